"""The embedded Celery broker (issue 29): kombu's filesystem transport, made safe
for processes that publish and consume at once, and for a consumer killed with
messages in hand. Celery uses it when the broker URL is ``filesystem://``
(settings: ``CELERY_BROKER_TRANSPORT``)."""

from __future__ import annotations

import atexit
import fcntl
import itertools
import logging
import os
import shutil
import threading
import time
import uuid
from collections import deque
from contextlib import suppress
from pathlib import Path
from queue import Empty

from kombu.exceptions import ChannelError
from kombu.transport import filesystem, virtual
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads
from kombu.utils.objects import cached_property

from jobs.liveness import consumer_beat

logger = logging.getLogger(__name__)

LOCK_NAME = "owner.lock"
# A file that does not decode but was written this recently may belong to an old
# writer still writing it (open, then write): it goes back to the queue and is
# read again later, rather than to the bad folder.
UNDECODABLE_GRACE_SECONDS = 5.0
# A staging entry this old was left by a process that died before publishing it;
# its publish never returned, so dropping it loses nothing the sender relied on.
STAGING_STALE_SECONDS = 3600.0
# How often a consumer lists the queue folder while its last listing still has
# names for the queue it reads, and how soon it may list again for a queue that
# had none (a listing serves every queue: a worker reads several).
LISTING_MAX_AGE_SECONDS = 1.0
LISTING_MIN_AGE_SECONDS = 0.05


class _ClaimFolder:
    """This process's folder of taken messages under a claimed root, locked with
    ``flock`` for as long as the process lives."""

    def __init__(self, root: Path, staging: Path):
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        # Built in staging and renamed into place with its lock already held, so
        # a sweeping consumer never sees it unlocked.
        building = staging / f"claim-{name}"
        building.mkdir()
        self.fd = os.open(building / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.path = root / name
        os.rename(building, self.path)
        self.pid = os.getpid()
        self.last_sweep: float | None = None
        self.queue_folder: Path | None = None


_registry_lock = threading.Lock()
_claim_folders: dict[Path, _ClaimFolder] = {}
# Delivery tag -> claimed file, for every channel of the process: kombu may hand
# a message back through another channel than the one that took it
# (Transport._reject_inbound_message).
_claimed_files: dict[str, Path] = {}
_put_sequence = itertools.count()


def _claim_folder_get(root: Path, staging: Path) -> _ClaimFolder:
    with _registry_lock:
        folder = _claim_folders.get(root)
        if folder is None:
            folder = _claim_folders[root] = _ClaimFolder(root, staging)
        return folder


def _claim_release(delivery_tag: str) -> None:
    """The message is done with (acknowledged, rejected, or delivered without
    acknowledgement): its file goes."""
    path = _claimed_files.pop(delivery_tag, None)
    if path is not None:
        with suppress(FileNotFoundError):
            os.unlink(path)


def _move_messages(source: Path, queue_folder: Path) -> int:
    moved = 0
    try:
        names = os.listdir(source)
    except FileNotFoundError:
        return 0
    for name in names:
        if name.endswith(".msg"):
            try:
                os.rename(source / name, queue_folder / name)
                moved += 1
            except FileNotFoundError:
                pass
    return moved


def _after_fork_in_child() -> None:
    # A forked child (a prefork pool process) shares the parent's open lock file:
    # closing its copy lets the lock go when the parent dies. The parent's
    # messages are the parent's to acknowledge.
    for folder in _claim_folders.values():
        with suppress(OSError):
            os.close(folder.fd)
    _claim_folders.clear()
    _claimed_files.clear()


def _release_at_exit() -> None:
    """A consumer leaving cleanly puts back what it still holds and removes its
    folder, rather than leave both to the next consumer's sweep."""
    for folder in list(_claim_folders.values()):
        if folder.pid != os.getpid():
            continue
        if folder.queue_folder is not None:
            _move_messages(folder.path, folder.queue_folder)
        with suppress(OSError):
            os.unlink(folder.path / LOCK_NAME)
            os.rmdir(folder.path)
        with suppress(OSError):
            os.close(folder.fd)
    _claim_folders.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_release_at_exit)


def _message_order(name: str) -> tuple[int, str]:
    prefix = name.partition("_")[0]
    return (int(prefix) if prefix.isdigit() else 0, name)


class QoS(virtual.QoS):
    """kombu's QoS, with a message's claimed file deleted when it is acknowledged
    or rejected; a requeue renames it back (Channel._restore)."""

    def ack(self, delivery_tag):
        _claim_release(delivery_tag)
        super().ack(delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        if not requeue:
            _claim_release(delivery_tag)
        super().reject(delivery_tag, requeue=requeue)


class Channel(filesystem.Channel):
    """kombu's filesystem channel, where a message file only ever enters the queue
    folder whole, and leaves it whole.

    kombu 5.7 creates a message file and only then writes it, and takes one by
    moving it (a copy and delete when the temporary folder is elsewhere) and
    reading it without a lock: a consumer may read a file still empty, and its
    worker dies on the JSON error (kombu #1551). Here:

    - ``_put`` writes the payload into a staging folder and renames it into the
      queue folder under its final ``.msg`` name;
    - ``_get`` renames a file into the consuming process's claimed folder (a
      rename is atomic: one consumer wins, the others find it gone) and reads it
      there; the file stays until the message is acknowledged, and a rejected or
      restored message is renamed back under its name, into its old place;
    - each consuming process holds an ``flock`` on a lock file in its claimed
      folder, which the kernel releases when the process dies, however it dies;
      any consumer, as it starts and then every ``claim_sweep_seconds``, puts
      the messages of a folder whose lock it can take (its owner is dead) back
      into the queue. Delivery is therefore at least once: a task running when
      its worker is killed runs again.

    A file that does not decode (half-written by the old code, or emptied by a
    power loss) goes to the bad folder with a logged error; the worker goes on.

    Files are named ``<ms>_<sequence>-<uuid>.<queue>.msg``, kombu's form, and are
    taken oldest first by that prefix. The milliseconds are wall-clock, not
    kombu's ``monotonic()``: the queue outlives a reboot, which restarts the
    monotonic clock and would put every message left from before it behind the
    new ones. Prefixes are compared as numbers (kombu compares text, which puts
    10000000 before 9999999), then by the publisher's sequence number.

    Transport options beyond kombu's: ``staging_folder``, ``claimed_folder``,
    ``bad_folder`` (default: siblings of the queue folder so named; all on the
    queue's filesystem, which is checked), ``fsync`` (default False, see
    ``_put``) and ``claim_sweep_seconds`` (default 30). ``store_processed`` is
    not supported: an acknowledged message is deleted.
    """

    QoS = QoS

    def __init__(self, connection, **kwargs):
        super().__init__(connection, **kwargs)
        self._listing: dict[str, deque[str]] = {}
        self._listed_at: float | None = None
        self._folders_prepare()

    # Folders

    def _sibling(self, option: str, of: str, name: str) -> Path:
        value = self.transport_options.get(option)
        return Path(value) if value else Path(of).parent / name

    @cached_property
    def queue_folder_in(self) -> Path:
        return Path(self.data_folder_in)

    @cached_property
    def queue_folder_out(self) -> Path:
        return Path(self.data_folder_out)

    @cached_property
    def staging_folder(self) -> Path:
        return self._sibling("staging_folder", self.data_folder_out, "staging")

    @cached_property
    def claimed_folder(self) -> Path:
        return self._sibling("claimed_folder", self.data_folder_in, "claimed")

    @cached_property
    def bad_folder(self) -> Path:
        return self._sibling("bad_folder", self.data_folder_in, "bad")

    @cached_property
    def fsync(self) -> bool:
        return bool(self.transport_options.get("fsync", False))

    @cached_property
    def claim_sweep_seconds(self) -> float:
        return float(self.transport_options.get("claim_sweep_seconds", 30.0))

    def _folders_prepare(self) -> None:
        folders = (
            self.queue_folder_in,
            self.queue_folder_out,
            self.staging_folder,
            self.claimed_folder,
            self.bad_folder,
        )
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
        # A rename is atomic only within one filesystem (across two it fails).
        devices = {folder: folder.stat().st_dev for folder in folders}
        if len(set(devices.values())) > 1:
            raise ChannelError(
                "The filesystem broker's folders must be on one filesystem: "
                + ", ".join(
                    f"{folder} (device {dev})" for folder, dev in devices.items()
                )
            )

    # Publishing

    def _put(self, queue, payload, **kwargs):
        """Write the message whole into staging, then rename it into the queue.

        No ``fsync`` by default: it costs a disk flush per message (milliseconds
        each on a VM disk, the broker's whole throughput), and what it guards
        against is a power loss or kernel crash, not a process dying: after
        ``close`` the data is in the page cache, which every process reads. A
        file that a power loss leaves empty goes to the bad folder, not to a
        crash. ``fsync=True`` in the transport options flushes the file and the
        queue folder for a machine where that matters more than speed.
        """
        # Within a millisecond, a publisher's own messages keep their order.
        stamp = f"{time.time_ns() // 1_000_000}_{next(_put_sequence):010d}"
        name = f"{stamp}-{uuid.uuid4().hex}.{queue}.msg"
        staged = self.staging_folder / name
        target = self.queue_folder_out / name
        try:
            with open(staged, "xb") as file:
                file.write(str_to_bytes(dumps(payload)))
                if self.fsync:
                    file.flush()
                    os.fsync(file.fileno())
            os.rename(staged, target)
            if self.fsync:
                directory = os.open(self.queue_folder_out, os.O_RDONLY)
                try:
                    os.fsync(directory)
                finally:
                    os.close(directory)
        except OSError as exc:
            with suppress(OSError):
                os.unlink(staged)
            raise ChannelError(f"Cannot add message {name!r} to the queue") from exc

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        # kombu creates a new exchange table empty and then writes it, unlocked
        # in between: a reader there would fail to decode it. A new table is
        # written aside and linked into place whole (link fails if another
        # process made the table first; kombu then updates it under its lock).
        file = self._exchange_file(exchange)
        if not file.exists():
            self.control_folder.mkdir(parents=True, exist_ok=True)
            staged = self.control_folder / f".{uuid.uuid4().hex}.tmp"
            row = [[routing_key or "", pattern or "", queue or ""]]
            try:
                staged.write_bytes(str_to_bytes(dumps(row)))
                os.link(staged, file)
                return
            except FileExistsError:
                pass
            finally:
                with suppress(OSError):
                    os.unlink(staged)
        super()._queue_bind(exchange, routing_key, pattern, queue)

    # Consuming

    def drain_events(self, timeout=None, callback=None):
        # Called on every pass of the consumer loop, even when the prefetch is
        # full and nothing is read: the worker's liveness (jobs.liveness).
        consumer_beat()
        return super().drain_events(timeout=timeout, callback=callback)

    def _claim_folder(self) -> _ClaimFolder:
        folder = _claim_folder_get(self.claimed_folder, self.staging_folder)
        folder.queue_folder = self.queue_folder_in
        now = time.monotonic()
        if folder.last_sweep is None or now - folder.last_sweep >= (
            self.claim_sweep_seconds
        ):
            folder.last_sweep = now
            self._sweep(own=folder.path)
        return folder

    def _sweep(self, *, own: Path) -> None:
        """Put back the messages of consumers that died, and drop what dead
        publishers left in staging."""
        for entry in os.scandir(self.claimed_folder):
            folder = Path(entry.path)
            if folder == own or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                # Its last sweeper removed the lock and is removing the folder
                # (or died doing so): its messages were moved out first.
                _move_messages(folder, self.queue_folder_in)
                with suppress(OSError):
                    os.rmdir(folder)
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its consumer is alive
                moved = _move_messages(folder, self.queue_folder_in)
                if moved:
                    self._listed_at = None
                    logger.warning(
                        "broker: %d message(s) taken by a consumer that died "
                        "(%s) are back in the queue",
                        moved,
                        folder.name,
                    )
                with suppress(OSError):
                    os.unlink(folder / LOCK_NAME)
                    os.rmdir(folder)
            finally:
                os.close(fd)
        stale_before = time.time() - STAGING_STALE_SECONDS
        for entry in os.scandir(self.staging_folder):
            with suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime < stale_before:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)

    def _pending(self, queue: str) -> deque[str]:
        """Names of the queue's files, oldest first, from a recent listing."""
        pending = self._listing.get(queue)
        age = (
            float("inf")
            if self._listed_at is None
            else time.monotonic() - self._listed_at
        )
        if age > LISTING_MAX_AGE_SECONDS or (
            not pending and age > LISTING_MIN_AGE_SECONDS
        ):
            listing: dict[str, list[str]] = {}
            for name in os.listdir(self.queue_folder_in):
                rest = name.partition(".")[2]
                if rest.endswith(".msg"):
                    listing.setdefault(rest[: -len(".msg")], []).append(name)
            self._listing = {
                key: deque(sorted(names, key=_message_order))
                for key, names in listing.items()
            }
            self._listed_at = time.monotonic()
            pending = self._listing.get(queue)
        return pending if pending is not None else deque()

    def _get(self, queue):
        """Take the oldest message of ``queue`` by renaming it into this process's
        claimed folder; it stays there until acknowledged."""
        folder = self._claim_folder()
        pending = self._pending(queue)
        while pending:
            name = pending.popleft()
            claimed = folder.path / name
            try:
                os.rename(self.queue_folder_in / name, claimed)
            except FileNotFoundError:
                continue  # another consumer took it
            except OSError as exc:
                raise ChannelError(f"Cannot take message {name!r}") from exc
            payload = self._read_claimed(claimed)
            if payload is None:
                continue
            # A fresh tag per delivery: a fanout message carries one tag into
            # every queue it reaches, and tags find claimed files.
            delivery_tag = uuid.uuid4().hex
            payload["properties"]["delivery_tag"] = delivery_tag
            _claimed_files[delivery_tag] = claimed
            return payload
        raise Empty()

    def _read_claimed(self, claimed: Path) -> dict | None:
        """The claimed file's message, or None when it does not decode (moved to
        the bad folder, or back to the queue while it may still be written)."""
        try:
            raw = claimed.read_bytes()
        except OSError as exc:
            raise ChannelError(f"Cannot read message {claimed.name!r}") from exc
        try:
            payload = loads(bytes_to_str(raw))
            if not isinstance(payload, dict) or not isinstance(
                payload.get("properties"), dict
            ):
                raise ValueError("not a kombu message")
            return payload
        except Exception as error:
            if time.time() - claimed.stat().st_mtime < UNDECODABLE_GRACE_SECONDS:
                os.rename(claimed, self.queue_folder_in / claimed.name)
                return None
            os.rename(claimed, self.bad_folder / claimed.name)
            logger.error(
                "broker: message file %s (%d bytes) does not decode (%s); moved to %s",
                claimed.name,
                len(raw),
                error,
                self.bad_folder,
            )
            return None

    def _restore(self, message):
        # Back into the queue under its own name, so in its old place. A tag
        # with no claimed file was acknowledged meanwhile (by another thread)
        # or delivered without acknowledgement: nothing to restore.
        path = _claimed_files.pop(message.delivery_tag, None)
        if path is not None:
            with suppress(FileNotFoundError):
                os.rename(path, self.queue_folder_in / path.name)
                self._listed_at = None  # list again: it is ahead of the rest

    def basic_consume(self, queue, no_ack, callback, consumer_tag, **kwargs):
        if no_ack:
            # No acknowledgement will come (pidbox, replies): done once delivered.
            deliver = callback

            def callback(message):
                _claim_release(message.delivery_tag)
                return deliver(message)

        return super().basic_consume(queue, no_ack, callback, consumer_tag, **kwargs)

    def basic_get(self, queue, no_ack=False, **kwargs):
        message = super().basic_get(queue, no_ack=no_ack, **kwargs)
        if message is not None and no_ack:
            _claim_release(message.delivery_tag)
        return message


class Transport(filesystem.Transport):
    """kombu's filesystem transport with this module's Channel."""

    Channel = Channel

    # kombu keeps one record of declared bindings for the whole process, and
    # skips writing a binding it has seen into the control folder: a second
    # broker folder in the same process (tests) would get no exchange table and
    # its messages would go nowhere. One record per control folder.
    _states: dict[str, virtual.BrokerState] = {}

    def __init__(self, client, **kwargs):
        super().__init__(client, **kwargs)
        control = os.path.abspath(
            client.transport_options.get("control_folder", "control")
        )
        self.state = self._states.setdefault(control, virtual.BrokerState())
