"""What the trajectory pages show, built from the selectors' rows: event rows
with their display names and values, coded records, window marks, and the
context of a window's trajectory partials (``window_page_context``), which the
window page and the labelling page (annotation) both embed."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import F
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from windows import selectors
from windows.models import Domain, Event, EventKind, Stay, Window
from windows.selectors import EventScope
from windows.selectors_pages import EndPaginator
from windows.vocabulary import EventLabel, coded_code, event_label

WINDOW_EVENTS_PER_PAGE = 250


def choice(value: str | None, allowed) -> str:
    return value if value in allowed else ""


def _event_label(event: Event) -> EventLabel:
    return event_label(
        domain=event.domain, category=event.category, name=event.name, unit=event.unit
    )


def _value_text(event: Event, unit: str) -> str:
    """The value with the unit it is stored in (windows.vocabulary)."""
    num = event.value_num
    if num is None:
        return event.value_text
    text = f"{num:.0f}" if abs(num) >= 1e6 else f"{num:.6g}"
    return f"{text} {unit}".strip()


@dataclass(frozen=True)
class EventRow:
    """An event as the stay page shows it, placed relative to this ICU stay,
    named by its concept (windows.vocabulary)."""

    event: Event
    hours_since_admit: float
    phase: str  # "pre" (before ICU admission), "icu", or "post" (after discharge)
    label: EventLabel

    @property
    def value(self) -> str:
        return _value_text(self.event, self.label.unit)


@dataclass(frozen=True, slots=True)
class CodedRow:
    """A record coded after discharge, as the pages list it apart from the
    timeline: its billing date (a date only), code system, code and title."""

    id: int
    billed: str
    system: str
    code: str
    title: str
    source: str


def coded_rows(events) -> list[CodedRow]:
    rows = []
    for event in events:
        parts = coded_code(event.category, event.value_text or event.name)
        rows.append(
            CodedRow(
                id=event.pk,
                billed=timezone.localtime(event.time).strftime("%Y-%m-%d"),
                system=parts.system,
                code=parts.code,
                title=parts.title,
                source=f"{event.source_table} {event.source_key}".strip(),
            )
        )
    return rows


def event_rows(stay: Stay, events) -> list[EventRow]:
    rows = []
    for event in events:
        if event.time < stay.intime:
            phase = "pre"
        elif event.time > stay.outtime:
            phase = "post"
        else:
            phase = "icu"
        hours = stay.hours_since_admit(event.time)
        rows.append(EventRow(event, hours, phase, _event_label(event)))
    return rows


@dataclass(frozen=True, slots=True)
class DischargeSummary:
    """A discharge summary as the pages show it apart from the timeline: written
    at discharge, hindsight only."""

    id: int
    written: str
    text: str
    source: str


def discharge_summaries(events) -> list[DischargeSummary]:
    return [
        DischargeSummary(
            id=event.pk,
            written=timezone.localtime(event.time).strftime("%Y-%m-%d %H:%M"),
            text=event.value_text,
            source=f"{event.source_table} {event.source_key}".strip(),
        )
        for event in events
    ]


@dataclass(frozen=True, slots=True)
class NoteMark:
    """A radiology report on the overview's notes lane: where it lies along the
    stay (percent of the stay's length) and what it is."""

    id: int
    hours: float
    percent: float
    name: str


def note_marks(stay: Stay, reports) -> list[NoteMark]:
    length = max(stay.length_hours, 1e-9)
    marks = []
    for event in reports:
        hours = stay.hours_since_admit(event.time)
        percent = min(100.0, max(0.0, 100.0 * hours / length))
        marks.append(NoteMark(event.pk, round(hours, 2), round(percent, 2), event.name))
    return marks


@dataclass(frozen=True, slots=True)
class WindowStrip:
    """The stay page's strip of windows: a link a window, a bar as high as its
    action density, marked when it was drawn for Gold. The marks' markup is
    built here in one pass: a 1,800-hour stay has 900 windows, and the template
    tags and filters of each mark cost most of the page's render time."""

    count: int
    window_minutes: int
    first_hours: float
    last_hours: float
    marks: SafeString  # only numbers and the window pages' address


_HUNDREDTH, _TENTH = Decimal("0.01"), Decimal("0.1")


def _fixed(value: float, step: Decimal) -> str:
    """``value`` to ``step``, half up from its shortest repr: as floatformat
    writes it (``f"{0.125:.2f}"`` is 0.12; floatformat's, and this, 0.13)."""
    return str(Decimal(repr(value)).quantize(step, ROUND_HALF_UP))


def _mark_height(density: float) -> int:
    # A floor keeps empty windows visible and clickable.
    return 12 + round(88 * min(1.0, density))


def _window_mark(prefix: str, index, hours, events, actions, density, gold) -> str:
    gold_class, gold_title, gold_name = (
        (" is-gold", " · Gold", " (Gold)") if gold else ("", "", "")
    )
    return (
        f'<a class="wmark{gold_class}" href="{prefix}{index}/" '
        f'style="--h: {_mark_height(density)}%" title="Window {index} · '
        f"{_fixed(hours, _TENTH)} h · {events} events, {actions} actions "
        f'(density {_fixed(density, _HUNDREDTH)}){gold_title}">'
        '<span class="visually-hidden">'
        f"Window {index}{gold_name}</span></a>"
    )


def window_strip(stay: Stay) -> WindowStrip | None:
    """The strip of ``stay``'s windows, or None when it has none yet."""
    rows = list(
        selectors.stay_windows(stay=stay)
        .values_list(
            "index",
            "hours_since_admit",
            "event_count",
            "action_count",
            "action_density",
            "sampled_gold",
        )
        .annotate(length=F("end") - F("start"))
    )
    if not rows:
        return None
    # The window page's address cut before its index, as trajectory.js does;
    # escaped, though a reversed path holds nothing to escape.
    prefix = escape(
        reverse("windows:window_detail", args=[stay.pk, 0]).removesuffix("0/")
    )
    return WindowStrip(
        count=len(rows),
        window_minutes=round(rows[0][-1].total_seconds() / 60),
        first_hours=rows[0][1],
        last_hours=rows[-1][1],
        # Every value interpolated is an int, a float or a bool (and the
        # escaped prefix): nothing a user or a data file wrote.
        marks=mark_safe("".join(_window_mark(prefix, *row[:-1]) for row in rows)),
    )


# The tag shown after the hours of a row, by position: (text, title).
_POSITION_TAGS = {
    "in": ("window", "In this window"),
    "after": ("after", "After the bedside boundary: hindsight"),
}
_WINDOW_ACTION_TAG = ("action", "An action of this window")


@dataclass(frozen=True, slots=True)
class WindowEventRow:
    """An event as the window page's table shows it, formatted here rather than
    with template filters: a whole-stay page holds hundreds of rows, and filters
    such as floatformat cost a few milliseconds per hundred."""

    id: int
    css: str  # "pos-before" (the look-back), "pos-in" or "pos-after", and
    # "window-action" for the window's own actions
    hours: str
    tag: str
    tag_title: str
    time: str
    kind: str
    kind_label: str
    category: str
    name: str  # the concept (windows.vocabulary)
    detail: str  # the source label where it adds to the concept, else ""
    source_name: str
    value: str
    # A clinical note (a radiology report): its first words, and the rest of
    # its text folded under them (the cell's text is the note's once, for the
    # event finder).
    is_note: bool = False
    note_head: str = ""
    note_rest: str = ""


# A note's first characters, shown before it is unfolded.
NOTE_HEAD_CHARS = 120


def _note_head(text: str) -> str:
    """A note's first NOTE_HEAD_CHARS characters or so, cut after a word."""
    if len(text) <= NOTE_HEAD_CHARS:
        return text
    cut = text.rfind(" ", 0, NOTE_HEAD_CHARS)
    return text[: cut if cut > 0 else NOTE_HEAD_CHARS]


def _window_event_row(window: Window, event: Event, kind_labels: dict):
    if event.time < window.start:
        position = "before"
    elif event.time < window.end:
        position = "in"
    else:
        position = "after"
    is_window_action = position == "in" and event.kind == EventKind.ACTION
    tag, tag_title = (
        _WINDOW_ACTION_TAG
        if is_window_action
        else _POSITION_TAGS.get(position, ("", ""))
    )
    label = _event_label(event)
    is_note = event.domain == Domain.NOTES
    value = _value_text(event, label.unit) or "–"
    head = _note_head(value) if is_note else ""
    return WindowEventRow(
        id=event.pk,
        css=f"pos-{position}" + (" window-action" if is_window_action else ""),
        hours=f"{window.stay.hours_since_admit(event.time):.2f}",
        tag=tag,
        tag_title=tag_title,
        time=timezone.localtime(event.time).strftime("%Y-%m-%d %H:%M"),
        kind=event.kind,
        kind_label=kind_labels.get(event.kind, event.kind),
        category=event.category or "–",
        name=label.concept,
        # A note is named by its exam (radiology_detail's exam_name).
        detail=event.name if is_note and event.name != label.concept else label.detail,
        source_name=label.source_name,
        value=value,
        is_note=is_note,
        note_head=head,
        note_rest=value[len(head) :] if is_note else "",
    )


@dataclass(frozen=True)
class EventGroup:
    domain: str
    label: str
    total: int  # events of this domain in the whole scope, not only this page
    rows: list[WindowEventRow]


def _window_event_groups(window: Window, events, totals: dict) -> list[EventGroup]:
    """A page's events (in time order) grouped by domain, in reading order."""
    domain_labels = dict(Domain.choices)
    kind_labels = dict(EventKind.choices)
    by_domain: dict[str, list[WindowEventRow]] = {}
    for event in events:
        row = _window_event_row(window, event, kind_labels)
        by_domain.setdefault(event.domain, []).append(row)
    return [
        EventGroup(d, domain_labels.get(d, d), totals.get(d, 0), by_domain[d])
        for d in sorted(by_domain, key=lambda d: (selectors.event_domain_rank(d), d))
    ]


def page_number(value: str | None) -> int:
    try:
        return max(1, int(value or 1))
    except ValueError:
        return 1


def window_page_context(request, window: Window, *, full: bool) -> dict:
    """The context of a window's trajectory partials (header, overview, plots,
    event table) for ``window``, with the event table's scope, domain and page
    from the query string; ``full`` adds what only the whole page shows. Shared
    with the annotation page, which embeds them."""
    scope = choice(request.GET.get("scope"), EventScope.values) or EventScope.WINDOW
    totals = selectors.window_event_domain_counts(window=window, scope=scope)
    domain = choice(request.GET.get("domain"), totals)
    events = selectors.window_events(window=window, scope=scope, domain=domain)
    paginator = EndPaginator(events, WINDOW_EVENTS_PER_PAGE)
    # The per-domain counts already add up to the total: no second count query.
    paginator.count = totals.get(domain, 0) if domain else sum(totals.values())
    page = paginator.get_page(page_number(request.GET.get("page")))
    events_on_page = list(page.object_list)
    domain_labels = dict(Domain.choices)
    stay = window.stay
    # Coded records, discharge summaries and the notes lane's reports: one query.
    apart = selectors.stay_records_apart(stay=stay)
    context = {
        "window": window,
        "stay": stay,
        "scope": scope,
        "scopes": EventScope.choices,
        "domain": domain,
        "domains": [(d, domain_labels.get(d, d), n) for d, n in totals.items()],
        "page": page,
        "groups": _window_event_groups(window, events_on_page, totals),
        # A page of the whole stay is a stretch of time: say which.
        "page_hours": (
            (
                stay.hours_since_admit(events_on_page[0].time),
                stay.hours_since_admit(events_on_page[-1].time),
            )
            if events_on_page
            else None
        ),
        "lookback_hours": int(selectors.WINDOW_LOOKBACK.total_seconds() // 3600),
        "coded": coded_rows(apart.coded),
        "discharge_summaries": discharge_summaries(apart.discharge_summaries),
    }
    if full:
        context.update(
            {
                "facts": selectors.window_bedside_facts(window=window),
                "window_end_hours": stay.hours_since_admit(window.end),
                "previous_index": window.index - 1 if window.index > 0 else None,
                "next_index": (
                    window.index + 1 if window.index < window.last_index else None
                ),
                "gold_windows": list(selectors.stay_windows(stay=stay, gold_only=True)),
                "note_marks": note_marks(stay, apart.reports),
            }
        )
    return context


STAY_EVENTS_PER_PAGE = 100


def stay_page_context(request, stay: Stay, *, full: bool) -> dict:
    """The context of a stay's page: its events filtered by the query string's
    kind, domain and category (each ignored unless the stay has it), a page of
    them; ``full`` adds what only the whole page shows (coded records, the
    notes lane, the admission's other stays, the window marks)."""
    categories_by_domain = selectors.stay_event_categories(stay=stay)
    kind = choice(
        request.GET.get("kind"), [k for k in EventKind.values if k != EventKind.CODED]
    )
    domain = choice(request.GET.get("domain"), categories_by_domain)
    present = {c for categories in categories_by_domain.values() for c in categories}
    category = choice(request.GET.get("category"), present)
    events = selectors.stay_events(
        stay=stay, kind=kind, domain=domain, category=category
    )
    page = EndPaginator(events, STAY_EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    domain_labels = dict(Domain.choices)
    context = {
        "stay": stay,
        "page": page,
        "rows": event_rows(stay, page.object_list),
        "kind": kind,
        "domain": domain,
        "category": category,
        # Coded records are listed apart, not filtered into the timeline.
        "kinds": [c for c in EventKind.choices if c[0] != EventKind.CODED],
        "domains": [(d, domain_labels.get(d, d)) for d in categories_by_domain],
        "categories": [
            (domain_labels.get(d, d), categories)
            for d, categories in categories_by_domain.items()
            if categories
        ],
        "filtered": bool(kind or domain or category),
    }
    if full:
        # Coded records and the notes lane's radiology reports: one query.
        apart = selectors.stay_records_apart(stay=stay)
        context["coded"] = coded_rows(apart.coded)
        context["note_marks"] = note_marks(stay, apart.reports)
        context["other_stays"] = selectors.stay_admission_stays(stay=stay)
        context["window_strip"] = window_strip(stay)
    return context
