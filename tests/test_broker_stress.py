"""The embedded filesystem broker (realicu_web.broker) under load and crashes: no
message lost, none read twice, none read half-written (issue 29).

The helper processes are this module run as a script (``python -m
tests.test_broker_stress <role> ...``): a producer, a consumer that records what
it read, and a consumer that takes messages and waits to be killed."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from queue import Empty

import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue

from jobs import liveness
from realicu_web.broker import Transport

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "stress"


def _connection(folder: Path, **options) -> Connection:
    queue = str(folder / "queue")
    return Connection(
        "filesystem://",
        transport=Transport,
        transport_options={
            "data_folder_in": queue,
            "data_folder_out": queue,
            "control_folder": str(folder / "control"),
            "polling_interval": 0.01,
            **options,
        },
    )


def _produce(folder: Path, prefix: str, count: int) -> None:
    """``count`` messages with ids ``prefix-0`` ... and 0.5-4 KB of padding, so a
    write takes long enough for a reader to meet it half-done."""
    with _connection(folder) as conn:
        queue = conn.SimpleQueue(QUEUE)
        for i in range(count):
            queue.put({"id": f"{prefix}-{i}", "pad": "x" * (512 + (i * 37) % 3584)})
        queue.close()


def _helper(role: str, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.test_broker_stress", role, *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(predicate, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


def _names(folder: Path) -> list[str]:
    return sorted(os.listdir(folder)) if folder.exists() else []


def _claimed(folder: Path) -> list[str]:
    root = folder / "claimed"
    return [
        name for sub in _names(root) for name in _names(root / sub) if ".msg" in name
    ]


def _drain(queue, seconds: float = 1.0) -> list[str]:
    """Ids of every message left, acknowledged."""
    ids = []
    while True:
        try:
            message = queue.get(timeout=seconds)
        except Empty:
            return ids
        ids.append(message.payload["id"])
        message.ack()


# Celery picks the transport


def test_celery_uses_the_safe_transport_when_the_broker_is_the_filesystem(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CELERY_BROKER_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    env["REALICU_VAR_DIR"] = str(tmp_path)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from realicu_web.celery import app\n"
            "with app.connection_for_read() as c:\n"
            "    t = type(c.transport)\n"
            "    print(t.__module__, t.__name__, c.default_channel.staging_folder)",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == [
        "realicu_web.broker",
        "Transport",
        str(tmp_path / "broker" / "staging"),
    ]


# Publishing and taking


def test_a_published_message_enters_the_queue_whole_and_staging_stays_empty(
    tmp_path,
):
    with _connection(tmp_path) as conn:
        conn.SimpleQueue(QUEUE).put({"id": "a"})
    names = _names(tmp_path / "queue")
    assert len(names) == 1 and names[0].endswith(f".{QUEUE}.msg")
    payload = json.loads((tmp_path / "queue" / names[0]).read_text())
    assert "properties" in payload
    assert _names(tmp_path / "staging") == []


def test_messages_are_taken_oldest_first(tmp_path):
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue(QUEUE)
        for i in range(200):
            queue.put({"id": i})
        assert _drain(queue) == list(range(200))


def test_a_taken_message_stays_claimed_until_it_is_acknowledged(tmp_path):
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue(QUEUE)
        queue.put({"id": "a"})
        message = queue.get(timeout=5)
        assert _names(tmp_path / "queue") == []
        assert len(_claimed(tmp_path)) == 1
        message.ack()
        assert _claimed(tmp_path) == []
        assert _names(tmp_path / "queue") == []


def test_a_message_rejected_with_requeue_comes_back_once(tmp_path):
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue(QUEUE)
        queue.put({"id": "a"})
        queue.put({"id": "b"})
        queue.get(timeout=5).reject(requeue=True)
        assert _claimed(tmp_path) == []
        assert len(_names(tmp_path / "queue")) == 2
        # Back in its own place, ahead of the later message.
        assert _drain(queue) == ["a", "b"]


def test_a_message_rejected_without_requeue_is_gone(tmp_path):
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue(QUEUE)
        queue.put({"id": "a"})
        queue.get(timeout=5).reject()
        assert _claimed(tmp_path) == [] and _names(tmp_path / "queue") == []


def test_closing_a_connection_puts_back_its_unacknowledged_messages_once(tmp_path):
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue(QUEUE)
        for i in range(5):
            queue.put({"id": i})
        taken = [queue.get(timeout=5) for _ in range(3)]
        taken[0].ack()
    assert _claimed(tmp_path) == []
    with _connection(tmp_path) as conn:
        assert sorted(_drain(conn.SimpleQueue(QUEUE))) == [1, 2, 3, 4]


def test_fanout_reaches_every_bound_queue_and_no_ack_leaves_no_claimed_file(
    tmp_path,
):
    exchange = Exchange("broadcast", type="fanout")
    queues = [Queue(f"node{i}", exchange) for i in (1, 2)]
    received = []
    with _connection(tmp_path) as conn:
        channel = conn.channel()
        consumer = Consumer(
            channel,
            queues,
            no_ack=True,
            callbacks=[lambda body, message: received.append(body["id"])],
        )
        with consumer:
            Producer(conn.channel()).publish({"id": "hello"}, exchange=exchange)
            deadline = time.monotonic() + 10
            while len(received) < 2 and time.monotonic() < deadline:
                try:
                    conn.drain_events(timeout=0.5)
                except TimeoutError:
                    pass
    assert received == ["hello", "hello"]
    assert _claimed(tmp_path) == []
    assert [n for n in _names(tmp_path / "control") if n.startswith(".")] == []


def test_draining_beats_the_consumer_loop_even_with_the_prefetch_full(tmp_path):
    liveness.consumer_forget()
    try:
        with _connection(tmp_path) as conn:
            queue = conn.SimpleQueue(QUEUE)
            queue.consumer.qos(prefetch_count=1)
            queue.put({"id": "a"})
            queue.put({"id": "b"})
            held = queue.get(timeout=5)
            before = liveness.consumer_last_beat()
            time.sleep(0.01)
            with pytest.raises(Empty):
                queue.get(timeout=0.3)  # the one slot is taken: nothing read
            assert liveness.consumer_last_beat() > before
            assert len(_names(tmp_path / "queue")) == 1
            held.ack()
    finally:
        liveness.consumer_forget()


# Bad files


def test_a_half_written_file_from_old_code_goes_to_bad_and_the_consumer_goes_on(
    tmp_path, caplog
):
    (tmp_path / "queue").mkdir(parents=True)
    # kombu's own naming (monotonic milliseconds): left by the old code.
    empty = tmp_path / "queue" / f"1000_0a-1.{QUEUE}.msg"
    truncated = tmp_path / "queue" / f"1001_0a-2.{QUEUE}.msg"
    empty.write_bytes(b"")
    truncated.write_bytes(b'{"body": "eyJpZCI6')
    old = time.time() - 60
    for path in (empty, truncated):
        os.utime(path, (old, old))
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue(QUEUE)
        queue.put({"id": "good"})
        assert _drain(queue) == ["good"]
    assert _names(tmp_path / "bad") == sorted([empty.name, truncated.name])
    assert "does not decode" in caplog.text


def test_a_file_still_being_written_is_read_once_it_is_whole(tmp_path):
    with _connection(tmp_path) as writer_conn:
        writer_conn.SimpleQueue(QUEUE).put({"id": "late"})
    (whole,) = (tmp_path / "queue").iterdir()
    content = whole.read_bytes()
    whole.write_bytes(b"")  # as an old writer leaves it between open and write
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue(QUEUE)
        with pytest.raises(Empty):
            queue.get(timeout=0.3)
        whole.write_bytes(content)
        assert _drain(queue) == ["late"]
    assert _names(tmp_path / "bad") == []


# Crashes


def test_a_consumer_killed_before_acking_loses_nothing(tmp_path):
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue(QUEUE)
        for i in range(20):
            queue.put({"id": i})
    taker = _helper("take", tmp_path, 5)
    try:
        assert taker.stdout.readline().strip() == "taken"
        assert len(_claimed(tmp_path)) == 5
        (dead_folder,) = _names(tmp_path / "claimed")
    finally:
        taker.send_signal(signal.SIGKILL)
        taker.wait()
    assert len(_names(tmp_path / "queue")) == 15
    # A consumer starting after the crash puts the dead one's messages back.
    with _connection(tmp_path) as conn:
        ids = _drain(conn.SimpleQueue(QUEUE))
    assert sorted(ids) == list(range(20))
    assert dead_folder not in _names(tmp_path / "claimed")


def test_a_running_consumer_takes_back_the_messages_of_one_that_died(tmp_path):
    with _connection(tmp_path, claim_sweep_seconds=0.2) as conn:
        queue = conn.SimpleQueue(QUEUE)
        with pytest.raises(Empty):
            queue.get(timeout=0.1)  # this consumer has started (and swept)
        for i in range(10):
            queue.put({"id": i})
        taker = _helper("take", tmp_path, 10)
        try:
            assert taker.stdout.readline().strip() == "taken"
        finally:
            taker.send_signal(signal.SIGKILL)
            taker.wait()
        assert _names(tmp_path / "queue") == []
        assert sorted(_drain(queue)) == list(range(10))


# The stress test of issue 29


def test_ten_thousand_messages_from_two_producers_to_two_consumers_are_each_read_once(
    tmp_path,
):
    per_producer = 5000
    started = time.monotonic()
    with _connection(tmp_path) as conn:
        queue = conn.SimpleQueue(QUEUE)
        other_consumer = _helper("consume", tmp_path, tmp_path / "stop")
        other_producer = _helper("produce", tmp_path, "process", per_producer)
        thread = threading.Thread(
            target=_produce, args=(tmp_path, "thread", per_producer)
        )
        thread.start()
        ids = []
        while True:
            try:
                message = queue.get(timeout=0.2)
            except Empty:
                producing = thread.is_alive() or other_producer.poll() is None
                if producing or queue.qsize():
                    continue
                break
            ids.append(message.payload["id"])
            message.ack()
        thread.join()
        assert other_producer.wait() == 0, other_producer.stderr.read()[-3000:]
        (tmp_path / "stop").touch()
        out, err = other_consumer.communicate(timeout=60)
        assert other_consumer.returncode == 0, err[-3000:]
        other_ids = json.loads(out)
        ids += _drain(queue, seconds=0.5)  # anything it put back on leaving
    seconds = time.monotonic() - started

    read = Counter(ids) + Counter(other_ids)
    expected = {
        f"{who}-{i}" for who in ("thread", "process") for i in range(per_producer)
    }
    lost = expected - set(read)
    twice = [key for key, n in read.items() if n > 1]
    bad = _names(tmp_path / "bad")
    print(
        f"\nbroker stress: {len(expected)} messages in {seconds:.1f} s; read "
        f"{len(ids)} here and {len(other_ids)} in the other consumer; "
        f"lost {len(lost)}, read twice {len(twice)}, undecodable {len(bad)}"
    )
    assert not lost
    assert not twice
    assert set(read) == expected
    assert bad == []
    assert _names(tmp_path / "queue") == [] and _claimed(tmp_path) == []
    assert _names(tmp_path / "staging") == []


# Helper processes


def _consume_until(folder: Path, stop: Path) -> None:
    """Read and acknowledge until ``stop`` exists and nothing is left; print the
    ids read, as JSON."""
    ids = []
    with _connection(folder) as conn:
        queue = conn.SimpleQueue(QUEUE)
        idle_since = None
        while True:
            try:
                message = queue.get(timeout=0.2)
            except Empty:
                if stop.exists():
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > 0.5:
                        break
                continue
            idle_since = None
            ids.append(message.payload["id"])
            message.ack()
    print(json.dumps(ids))


def _take_and_hang(folder: Path, count: int) -> None:
    """Take ``count`` messages without acknowledging them, say so, and wait to
    be killed."""
    conn = _connection(folder)
    queue = conn.SimpleQueue(QUEUE)
    held = [queue.get(timeout=30) for _ in range(count)]
    print("taken", flush=True)
    time.sleep(600)
    print(len(held))


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    if role == "produce":
        _produce(Path(args[0]), args[1], int(args[2]))
    elif role == "consume":
        _consume_until(Path(args[0]), Path(args[1]))
    elif role == "take":
        _take_and_hang(Path(args[0]), int(args[1]))
