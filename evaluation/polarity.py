"""The polarity guard of the semantic matcher: two items about the same thing
in opposite directions ("start norepinephrine" / "stop norepinephrine", "give a
fluid bolus" / "avoid fluid boluses", "worsening AKI" / "resolving AKI") or
naming mutually exclusive states of it ("hypokalemia" / "hyperkalemia",
"septic shock" / "cardiogenic shock", "upper" / "lower GI bleeding") never
match, whatever the embedding says.

Sentence embeddings place such pairs close together (they share most words),
so no tau separates them; the guard reads the direction and state words
instead, and for sedation, ventilatory support and fluid balance what each
action does to that quantity ("Diurese" and "Start furosemide" lower the fluid
balance, "Give fluids" raises it; "Wean sedation" and "Start a sedation
holiday" lighten sedation, "Deepen sedation" deepens it). It only vetoes a
match, never makes one, and an item without such words ("septic shock",
"norepinephrine") is opposed to neither side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from evaluation.normalize import normalize_text, tidy_text
from evaluation.polarity_words import (
    AXES,
    BETTER_WORDS,
    DOWN_PHRASE,
    DOWN_WORDS,
    EXCLUSIVE_STATES,
    FIXED_PHRASES,
    LEADING_NO,
    NEGATIONS,
    OBJECT_REACH,
    UP_PHRASE,
    UP_WORDS,
    WORSE_WORDS,
)

# A recorded change of a setting or rate: "PEEP 5 -> 10 cmH2O".
_NUMERIC_CHANGE = re.compile(
    r"(\d+(?:\.\d+)?)\s*[a-z/%]*\s*(?:->|\u2192)\s*(\d+(?:\.\d+)?)"
)
# A clause ends here: a direction word after it belongs to another instruction.
_CLAUSE_BREAK = re.compile(r"[;,:]| then | and then | but ")


def _words_pattern(words: tuple[str, ...], *patterns: str) -> re.Pattern[str]:
    ordered = sorted(set(words), key=len, reverse=True)
    alternation = "|".join([*(re.escape(w) for w in ordered), *patterns])
    return re.compile(rf"(?<![\w-])(?:{alternation})(?![\w-])")


_UP = _words_pattern(UP_WORDS, UP_PHRASE)
_DOWN = _words_pattern(DOWN_WORDS, DOWN_PHRASE)
_AXIS_PATTERNS = tuple(
    (axis, re.compile(rf"(?<![\w-])(?:{pattern})(?![\w-])"), sign)
    for axis, objects in AXES.items()
    for pattern, sign in objects
)
_NEGATION = _words_pattern(NEGATIONS)
_BETTER = _words_pattern(BETTER_WORDS)
_WORSE = _words_pattern(WORSE_WORDS)
_FIXED = re.compile(
    "|".join(
        rf"(?<!\w){re.escape(k)}(?!\w)"
        for k in sorted(FIXED_PHRASES, key=len, reverse=True)
    )
)
_STATE_PATTERNS = tuple(
    (name, re.compile(rf"(?<!\w){pattern}(?!\w)"))
    for group in EXCLUSIVE_STATES
    for name, pattern in group
)
_RIVALS = {
    name: {other for other, _ in group if other != name}
    for group in EXCLUSIVE_STATES
    for name, _ in group
}
# A prohibition at the start of a red flag: "Do not wean ...", "Avoid ...",
# "No ...". What follows is the action the red flag forbids. Matched on the red
# flag as written (any case), so that what remains keeps its writer's words.
_PROHIBITION = re.compile(
    r"^(?:do not|don't|dont|never|avoid(?:ing)?|no|refrain from|"
    r"(?:it is )?(?:contraindicated to)|should not|must not)\s+",
    re.IGNORECASE,
)


# Where a red flag's condition starts: "... while MAP < 65", "... without a
# secured airway". "with" is left out: "ventilation with high tidal volumes"
# names the harm itself.
_CONDITION = re.compile(
    r"\s(?:while|when|whenever|if|unless|until|without|under|during)\s",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Polarity:
    """Which way an item points.

    ``negated``: the item forbids something ("do not wean ...", "avoid fluid
    boluses", "no NSAIDs"): a prohibition. ``verb``: the direction word it uses,
    +1 (start, give, continue, escalate, increase), -1 (stop, hold, wean,
    decrease) or 0 (none); in a prohibition, the direction of what it forbids.
    ``course``: a problem improving (+1) or worsening (-1). ``states``: the
    opposable states it names (hypo/hyper and brady/tachy with their stem,
    acidosis, intubation, ...). ``axis``: the quantity its direction word acts
    on when it is one of ``AXES`` (sedation, ventilatory support, fluid
    balance), with the sign of what it names there: ("fluid balance", -1) for
    "start furosemide", ("sedation", -1) for "start a sedation holiday".
    """

    negated: bool
    verb: int
    course: int
    states: frozenset[tuple[str, str]]
    axis: tuple[str, int] | None = None

    @property
    def action(self) -> int:
        """The net direction: "do not wean" is +1, "avoid fluid boluses" -1,
        "start" +1, a noun phrase 0."""
        if self.negated:
            return -(self.verb or 1)
        return self.verb

    def along(self, axis: str, noun_as: int = 0) -> int:
        """The direction it moves ``axis``, 0 when it does not name it: "Hold
        furosemide" +1 on the fluid balance, "Diurese" -1, "Lighten sedation"
        and "Start a sedation holiday" -1 on sedation. A noun phrase moves it
        ``noun_as`` times its sign: 0, it may be done or avoided; 1, it is
        read as done."""
        if self.axis is None or self.axis[0] != axis:
            return 0
        return self.axis[1] * (self.action or noun_as)


def _negation(clause: str) -> re.Match[str] | None:
    return LEADING_NO.search(clause) or _NEGATION.search(clause)


def _clause(text: str) -> str:
    return _CLAUSE_BREAK.split(text, maxsplit=1)[0]


def _action(clause: str) -> tuple[bool, int, int]:
    """(negated, direction, where its object may start) of one clause."""
    up, down = _UP.search(clause), _DOWN.search(clause)
    verbs = [m for m in (up, down) if m is not None]
    negation = _negation(clause)
    if not verbs:
        change = _NUMERIC_CHANGE.search(clause)
        if change is not None and negation is None:
            # A recorded setting change, "PEEP 5 -> 10 cmH2O", goes up or down.
            before, after = float(change.group(1)), float(change.group(2))
            return False, (after > before) - (after < before), 0
        return negation is not None, 0, 0
    verb = min(verbs, key=lambda m: m.start())
    direction = 1 if verb is up else -1
    negated = negation is not None and negation.start() < verb.start()
    return negated, direction, verb.start()


def _axis(clause: str, start: int) -> tuple[str, int] | None:
    """The axis of the first thing named from ``start`` on (the longest name
    where two start together), with its sign; only within ``OBJECT_REACH``
    words, so that "Start norepinephrine for MAP < 65 rather than giving fluid"
    is not read as acting on the fluid balance."""
    found = []
    for axis, pattern, sign in _AXIS_PATTERNS:
        match = pattern.search(clause, start)
        if match is None or len(clause[start : match.start()].split()) > OBJECT_REACH:
            continue
        found.append((match.start(), -len(match.group(0)), axis, sign))
    if not found:
        return None
    _, _, axis, sign = min(found)
    return axis, sign


def _course(text: str) -> int:
    better, worse = _BETTER.search(text), _WORSE.search(text)
    if better is None and worse is None:
        return 0
    if better is not None and (worse is None or better.start() < worse.start()):
        # "not improving", "no improvement": a negation just before it turns it.
        negation = _negation(text[: better.start()])
        if negation is not None and better.start() - negation.end() <= 12:
            return -1
        return 1
    return -1


def _stem(rest: str) -> str:
    # "hypoxemia" is hypo + (o)xemia: oxygen on both sides of hyperoxia.
    if rest.startswith(("x", "ox")):
        return "oxygen"
    return rest[:5]


def _states(text: str) -> frozenset[tuple[str, str]]:
    states = set()
    for name, pattern in _STATE_PATTERNS:
        for match in pattern.finditer(text):
            stem = _stem(match.group(1)) if pattern.groups else ""
            states.add((name, stem))
    return frozenset(states)


def _prepare(text: str) -> str:
    text = normalize_text(text)
    return _FIXED.sub(lambda m: FIXED_PHRASES[m.group(0)], text)


@lru_cache(maxsize=65536)
def polarity(text: str) -> Polarity:
    """The direction words of one item (normalized first, like the matcher)."""
    prepared = _prepare(text)
    clause = _clause(prepared)
    negated, verb, start = _action(clause)
    return Polarity(
        negated=negated,
        verb=verb,
        course=_course(prepared),
        states=_states(prepared),
        axis=_axis(clause, start),
    )


def _opposite_states(a: frozenset, b: frozenset) -> bool:
    for name, stem in a - b:
        for rival in _RIVALS[name]:
            if (rival, stem) in b - a:
                return True
    return False


def _shared_axis(a: Polarity, b: Polarity) -> str | None:
    if a.axis is not None and b.axis is not None and a.axis[0] == b.axis[0]:
        return a.axis[0]
    return None


def _opposite_actions(a: Polarity, b: Polarity) -> bool:
    if a.negated != b.negated:
        # A prohibition never matches an instruction that says its direction:
        # "give a fluid bolus" / "avoid fluid boluses", "escalate vasopressors"
        # / "do not wean vasopressors". A bare noun phrase ("fluid boluses")
        # says neither, and may be either.
        instruction = b if a.negated else a
        return instruction.verb != 0
    axis = _shared_axis(a, b)
    if axis is not None:
        # Both act on one quantity: the way each moves it counts, not its
        # verb. "Start furosemide" and "Hold IV fluids" both lower the fluid
        # balance, "Diurese" and "Give fluids" go opposite ways; "Avoid
        # diuretics" and "Avoid fluid boluses" forbid opposite things.
        return a.along(axis) * b.along(axis) < 0
    # Two instructions, or two prohibitions forbidding opposite things ("do not
    # wean" / "do not escalate"). "Avoid extubation" forbids the act the noun
    # names, whichever its direction word would be.
    return a.verb * b.verb < 0


def opposed(a: str, b: str) -> bool:
    """True when a and b point in opposite directions, so they must not match
    however similar they read: opposite instructions (start / stop, wean /
    deepen sedation, diurese / give fluids, titrate up / down), a prohibition
    against an instruction, opposite courses (worsening / resolving) or
    opposite states (hypo- / hyperkalemia, acidosis / alkalosis, deep / light
    sedation). An item without direction words ("septic shock",
    "norepinephrine") is opposed to none of these."""
    pa, pb = polarity(a), polarity(b)
    if _opposite_actions(pa, pb):
        return True
    if pa.course * pb.course < 0:
        return True
    return _opposite_states(pa.states, pb.states)


def forbidden_action(red_flag: str) -> str:
    """The action a red flag forbids, as a recommended action would say it:
    "Do not wean vasopressors while MAP < 65" -> "wean vasopressors", "Avoid
    deep sedation without a secured airway" -> "deep sedation", "Avoid fluid
    boluses" -> "fluid boluses". The prohibition goes, and so does a trailing
    condition (while, when, if, unless, until, without, under): it says when
    the action is harmful, and left in, it makes the remedy ("secure the
    airway") read like the harm. A red flag written as the action itself
    ("Intubation") is returned as it is, and so is a code status ("Do not
    resuscitate").

    The rest is the red flag's own words (``tidy_text``: case and
    abbreviations kept, "Do not wean NE" -> "wean NE"), so the matcher
    normalizes it exactly as it normalizes the recommendation it is compared
    with: the same abbreviation list, the admin's included, on both sides."""
    text = tidy_text(red_flag)
    stripped = text
    if not _FIXED.match(text.lower()):
        stripped = _PROHIBITION.sub("", text, count=1) or text
    action = _CONDITION.split(stripped, maxsplit=1)[0].strip(" ,;:")
    return action or stripped


def harmful_direction_conflict(action: str, red_flag: str) -> bool:
    """True when a recommended action goes against what a red flag forbids, so
    it cannot be that harmful action: "Avoid fluid boluses" recommended against
    the red flag "Avoid fluid boluses" (the red flag forbids giving them), or
    "Escalate vasopressors" against "Do not wean vasopressors". Both sides read
    an item without direction words as doing it ("Norepinephrine" is giving
    norepinephrine), as a recommendation and a forbidden action mean."""
    recommended = polarity(action)
    forbidden = polarity(forbidden_action(red_flag))
    axis = _shared_axis(recommended, forbidden)
    if axis is not None:
        # "Diurese" against the red flag "Avoid fluid boluses": the red flag
        # forbids raising the fluid balance, the recommendation lowers it.
        return recommended.along(axis, 1) != forbidden.along(axis, 1)
    return (recommended.action or 1) != (forbidden.action or 1)
