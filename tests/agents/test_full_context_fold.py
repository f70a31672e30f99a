"""The full-context agent's session of a stay (agents.reference._BlockFold):
over a stay's windows in time order it folds in each earlier event once, and
its aggregates are at every window those of the whole bedside history before
the window (the union of what each window added is that history); it begins
again when a context does not continue it (a failed window skipped, a resume
in a new worker, windows out of order, another stay) with the same result;
and rule 3 still leaves out the fewest blocks that make the prompt fit."""

from datetime import UTC, datetime, timedelta

from agents.base import PastWindow, WindowContext
from agents.prompts import events_text
from agents.reference import AGGREGATE_HOURS, FullContextAgent
from tests.agents.hand_contexts import StubLLM, event_hours

T0 = datetime(2030, 1, 1, tzinfo=UTC)
CONCEPTS = ("Heart rate", "MAP", "SpO2")


def stay_events(hours: int = 48):
    """An event every 10 min from 1 h before admission, cycling through three
    numeric concepts, and a text event every 5 h."""
    events, times = [], []
    for i in range(6 * (hours + 1)):
        when = T0 + timedelta(minutes=10 * i - 60)
        text = i % 30 == 0
        events.append(
            {
                "event_id": i + 1,
                "time": when.isoformat(),
                "hours_since_admit": round((when - T0).total_seconds() / 3600, 4),
                "kind": "observation",
                "domain": "assessments" if text else "vitals",
                "category": "x",
                "name": "RASS" if text else CONCEPTS[i % 3],
                "concept": "RASS" if text else CONCEPTS[i % 3],
                "value_num": None if text else float(60 + (i * 7) % 41),
                "unit": "" if text else "u",
                "value_text": f"score {i % 5}" if text else "",
            }
        )
        times.append(when)
    return events, times


def stay_contexts(stay_id: int = 1, hours: int = 48):
    """A window of 30 min every 2 h; each context holds the events before its
    end."""
    events, times = stay_events(hours)
    starts = [T0 + timedelta(hours=2 * k) for k in range(hours // 2)]
    out = []
    for k, start in enumerate(starts):
        end = start + timedelta(minutes=30)
        n = sum(1 for t in times if t < end)
        out.append(
            WindowContext(
                stay_id=stay_id,
                window_id=1000 * stay_id + k,
                window_index=4 * k,
                start=start,
                end=end,
                hours_since_admission=2.0 * k,
                events=tuple(events[:n]),
                static={"age": 70},
                past_windows=tuple(
                    PastWindow(
                        window_id=1000 * stay_id + j,
                        index=4 * j,
                        start=starts[j],
                        end=starts[j] + timedelta(minutes=30),
                    )
                    for j in range(k)
                ),
                event_times=tuple(times[:n]),
            )
        )
    return out


def flat(blocks):
    return [line for _, lines in blocks for line in lines]


def expected_lines(earlier: list[dict]) -> set[str]:
    """The numeric concepts' lines, aggregated here from scratch."""
    rows: dict[tuple[int, str], list[float]] = {}
    for event in earlier:
        if event["value_num"] is None:
            continue
        block = int(event["hours_since_admit"] // AGGREGATE_HOURS)
        if event["hours_since_admit"] < 0:
            block = -1
        rows.setdefault((block, event["concept"]), []).append(event["value_num"])
    return {
        f"[{b * AGGREGATE_HOURS}-{(b + 1) * AGGREGATE_HOURS}h] observation {c}: "
        f"n={len(v)} min={min(v):g} max={max(v):g} last={v[-1]:g} u"
        for (b, c), v in rows.items()
    }


def test_each_window_adds_only_its_new_events_and_sees_the_whole_history():
    agent = FullContextAgent()
    added: list[int] = []
    contexts = stay_contexts()
    for ctx in contexts:
        before = agent._fold.count
        lines = flat(agent.earlier_blocks(ctx))
        earlier = ctx.events_before(ctx.start)
        added += [e["event_id"] for e in earlier[before:]]
        assert agent._fold.count == len(earlier)
        numeric = {line for line in lines if "min=" in line}
        assert numeric == expected_lines(earlier)
        assert any("RASS: n=1 last=score" in line for line in lines)
    # The union of the windows' additions is the last window's history,
    # each event once.
    last = contexts[-1].events_before(contexts[-1].start)
    assert added == [e["event_id"] for e in last]
    assert len(set(added)) == len(added)


def test_a_context_that_does_not_continue_the_fold_begins_it_again():
    contexts = stay_contexts()
    other = stay_contexts(stay_id=2)

    def fresh(ctx):
        return flat(FullContextAgent().earlier_blocks(ctx))

    agent = FullContextAgent()
    for ctx in contexts[:6]:
        agent.earlier_blocks(ctx)
    # Window 6 failed before its prompt was made: window 7 goes on.
    assert flat(agent.earlier_blocks(contexts[7])) == fresh(contexts[7])
    folded = agent._fold
    assert flat(agent.earlier_blocks(contexts[8])) == fresh(contexts[8])
    assert agent._fold is folded
    # An earlier window again (overlapping windows, a retried one): begun again.
    assert flat(agent.earlier_blocks(contexts[3])) == fresh(contexts[3])
    assert agent._fold is not folded
    # Another stay, and a stay whose events are not the ones folded.
    assert flat(agent.earlier_blocks(other[9])) == fresh(other[9])
    assert agent._fold.stay_id == 2
    changed = contexts[10]
    events = list(changed.events)
    events[2] = {**events[2], "event_id": 999_999}
    changed = WindowContext(**{**changed.__dict__, "events": tuple(events)})
    agent.earlier_blocks(contexts[9])
    agent._fold.stay_id = 1
    assert flat(agent.earlier_blocks(changed)) == fresh(changed)
    # A resume in a new worker: a new agent from the next window on.
    assert flat(FullContextAgent().earlier_blocks(contexts[11])) == fresh(contexts[11])


def test_rule_3_leaves_out_the_fewest_blocks_that_fit():
    contexts = stay_contexts(hours=96)
    llm = StubLLM(700)
    agent = FullContextAgent(llm)
    for ctx in contexts:
        agent.predict(ctx, {})
    ctx = contexts[-1]
    prompt = llm.sent[-1][-1]["content"]
    assert llm.estimate_tokens(llm.sent[-1][0]["content"] + prompt) <= 700
    blocks = agent.earlier_blocks(ctx)
    window_text = events_text(ctx.window_events())
    fewest = next(
        d
        for d in range(len(blocks) + 1)
        if agent._fits(ctx, agent.compressed(blocks, d, window_text))
    )
    assert fewest > 0
    assert f"[... {fewest} earlier block(s) of 6 h left out" in prompt
    # Nothing at or after the window's end.
    assert all(h < 2 * (len(contexts) - 1) + 0.5 for h in event_hours(prompt))
