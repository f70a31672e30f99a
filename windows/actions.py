"""Which recorded events are clinical decisions (actions): one definition for every
source, applied to an admission's stored events after each import batch and by
``manage.py rebuild_actions``.

An action is a decision a clinician made at that time (REALICU_SPEC.md section 1:
the window's actions are the answer of the Recommended Actions task and drive
action density, section 2). Charting a state that did not change is an
observation. Per domain:

- ``medication_admin_continuous``: each order (``Event.order_id``; records
  without an order share one) is one infusion of its drug (the CLIF category):
  two bags of one drug running side by side under two orders are two infusions.
  An order starts with its first charted rate, is re-rated by any later charting
  with a dose, and stops with a stop, a pause or a rate of 0. A record is an
  action when it starts or stops its order, or changes its rate by more than
  ``RATE_TOLERANCE`` relative, except a *bag change*: a new order of the drug
  starting within ``HANDOVER_MINUTES`` of another order's stop takes it over,
  so the old order's stop is an observation and the new order's start is an
  action only when its rate differs from the old one's (a rate change). A
  "going" confirmation is an observation, a bolus an action. A *carrier fluid*
  (a crystalloid of ``CARRIER_FLUIDS``, e.g. the NaCl or D5W that carries
  insulin or phenylephrine) charted under an order that also holds another drug
  is never an action: it follows its drug's order, whatever other orders of that
  fluid do. (Spec section 1: an action is an intervention ordered or given; the
  carrier is part of its drug's order.)
- ``respiratory_support``: a device (its CLIF device category), a ventilation mode
  (``mode:<category>``) or one set parameter (``<name>_set``) is an action when it
  differs from that item's previous charting in the admission; the first charting
  counts as a change, except a first "Room Air" or "Standby", which start
  nothing. A mode charted without a CLIF mode category keeps its charted name
  as its state: a ventilator on "Standby" does not ventilate, so Standby -> a
  mode (e.g. AC-VC) resumes ventilation and is an action, and a mode -> Standby
  pauses it. Measured
  parameters (``*_obs``) are observations. Each setting is compared on its own:
  changing FiO2 does not make the PEEP charted beside it an action.
- ``crrt_therapy``: a CRRT start is one action, the mode's charting
  (``crrt:<mode>``): the first of the admission, or the first after the circuit
  was silent for more than ``CRRT_RESTART_HOURS`` (CLINICAL_CONCEPTS.md 11a: the
  CRRT tables hold point chartings only, no stop). The prescription charted
  with a start (blood flow, replacement and dialysate rates) is part of it;
  after that, each setting that differs from its previous charting is one
  action, as is a switch of mode. An episode charted without any mode starts
  with its first setting. The ultrafiltrate removed is a measurement.
- ``position``: turning a patient prone, or back from prone.
- ``code_status``: a change of code status. The first charting of an
  admission is not a change: it records the status the patient came with (in
  the CLIF demo, "Full" on admission), not a decision taken then.

Other domains keep the kind their importer gave: an intermittent dose given is an
action, a procedure with a real time (intubation, a line) is an action, coded
records (``EventKind.CODED``) and outcomes are never actions. So do the timed
procedures that land in a derived domain (MIMIC-IV ``procedureevents``
intubation 224385, extubation 227194, tracheostomy 225448 and 226237, CRRT
225802 and the other dialysis procedures of CLINICAL_CONCEPTS.md 11b, of
``PROCEDURE_ACTIONS``) are actions: each is a decision at its start time, not
a state charted again.

For every action that changes a state, ``Event.previous_value`` keeps the state
before it ("0.6" for "FiO2 0.6 -> 0.4", "IMV" for a device change), so
``action_text`` names the change.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
from django.db import connection, transaction

from windows.action_states import (
    code_status_kinds,
    crrt_kinds,
    isnan,
    number_text,
    position_kinds,
    respiratory_kinds,
)
from windows.models import Domain, Event, EventKind
from windows.vocabulary import event_label

if TYPE_CHECKING:
    import pandas as pd

# Relative rate change below which a charting keeps a drug's rate: one pump rate
# converted to mcg/kg/min with the weights charted on two orders differs by up to
# 1.5 % in the CLIF demo's bag changes; titration steps are 10 % and more.
RATE_TOLERANCE = 0.025
# A new order of a drug starting this close to another order's stop replaces
# its bag or syringe: in the CLIF demo 1,132 of 1,717 new orders start in the
# minute the previous one stops and 145 more within 30 minutes (norepinephrine
# of hospitalization 22987108: 12:10 new order, 12:20 old one stopped).
HANDOVER_MINUTES = 30.0
# CLIF med_category (mCIDE, and the consortium's MIMIC-IV mapping) of the
# crystalloids that dilute and carry a drug under the drug's own order.
CARRIER_FLUIDS = frozenset(
    {
        "sodium chloride",
        "dextrose",
        "dextrose_in_water_d5w",
        "dextrose_5_water",
        "dextrose_10_water",
        "dextrose_other",
        "lactated_ringers_solution",
        "plasma_lyte",
        "sterile water",
        "sterile_water",
    }
)
# MAR action words (CLIF mar_action_category, MIMIC-IV statusdescription, lower
# case) that end an order's infusion, and those that say nothing about its rate.
STOP_WORDS = ("stop", "stopped", "paused", "finishedrunning", "finished running")
NO_RATE_WORDS = ("not_given", "verify", "other", "held")
# Source tables whose records are coded after discharge (billing codes with a
# date only): EventKind.CODED, whatever an older import called them.
CODED_SOURCE_TABLES = ("clif_patient_procedures",)
# Timed procedures (MIMIC-IV procedureevents, CLINICAL_CONCEPTS.md 11b and 12b)
# whose domain is derived here: actions, as their importer says. The
# ventilation durations (225792, 225794) restate the device charting and a CRRT
# filter change is circuit upkeep: those stay observations.
PROCEDURE_TABLES = ("procedureevents",)
PROCEDURE_ACTIONS = frozenset(
    {
        "intubation",
        "extubation",
        "unplanned_extubation_patient",
        "unplanned_extubation_non_patient",
        "tracheostomy",
        "crrt",
        "cvvhd",
        "cvvhdf",
        "scuf",
        "hemodialysis",
        "peritoneal_dialysis",
    }
)
DERIVED_DOMAINS = (
    Domain.MED_CONTINUOUS,
    Domain.RESPIRATORY,
    Domain.CRRT,
    Domain.POSITION,
    Domain.CODE_STATUS,
)
_FIELDS = (
    "id",
    "admission_id",
    "time",
    "kind",
    "domain",
    "category",
    "value_num",
    "unit",
    "value_text",
    "order_id",
    "previous_value",
    "name",
    "source_table",
)
_ACT, _OBS = EventKind.ACTION.value, EventKind.OBSERVATION.value


def actions_derive(*, admission_ids: Iterable[int], chunk: int = 200) -> dict[str, int]:
    """Set ``kind`` and ``previous_value`` of the admissions' events in the derived
    domains by the definition above; return the number of actions per domain.

    Runs in the caller's transaction (an import batch) or its own; only rows
    whose kind or previous state changes are written, so a rerun writes nothing.
    """
    ids = sorted({int(a) for a in admission_ids})
    counts: dict[str, int] = {}
    with transaction.atomic():
        for start in range(0, len(ids), chunk):
            part = ids[start : start + chunk]
            from windows.tracks import event_rows  # pandas: only here

            frame = event_rows(
                Event.objects.filter(
                    admission_id__in=part, domain__in=DERIVED_DOMAINS
                ).exclude(kind__in=(EventKind.OUTCOME, EventKind.CODED)),
                _FIELDS,
            )
            if frame.empty:
                continue
            derived = derive_kinds(frame)
            for domain, n in (
                derived.loc[derived["kind"] == _ACT, "domain"].value_counts().items()
            ):
                counts[str(domain)] = counts.get(str(domain), 0) + int(n)
            changed = derived[
                (derived["kind"] != frame["kind"])
                | (derived["previous_value"] != frame["previous_value"])
            ]
            _write(changed)
    return counts


def derive_kinds(events: pd.DataFrame) -> pd.DataFrame:
    """The events with ``kind`` and ``previous_value`` derived (a copy; same index).

    ``events`` has the columns of ``_FIELDS`` (``id`` only breaks ties of equal
    times); rows of other domains come back unchanged.
    """
    import pandas as pd

    out = events.copy()
    out["previous_value"] = out["previous_value"].fillna("").astype(str)
    out["order_id"] = out["order_id"].fillna("").astype(str)
    out["value_text"] = out["value_text"].fillna("").astype(str)
    out["category"] = out["category"].fillna("").astype(str)
    out["time"] = pd.to_datetime(out["time"], utc=True)
    out = out.sort_values(["admission_id", "time", "id"], kind="mergesort")
    kinds = out["kind"].to_numpy(dtype=object).copy()
    previous = out["previous_value"].to_numpy(dtype=object).copy()
    position = {idx: i for i, idx in enumerate(out.index)}

    def set_rows(index, kind, prev):
        for idx, k, p in zip(index, kind, prev):
            kinds[position[idx]] = k
            previous[position[idx]] = p

    domain = out["domain"].to_numpy(dtype=object)
    if "source_table" in out:
        procedure = (
            out["source_table"].isin(PROCEDURE_TABLES)
            & out["category"].str.strip().str.lower().isin(PROCEDURE_ACTIONS)
        ).to_numpy()
        # An action whatever an earlier derivation stored.
        kinds[procedure] = _ACT
        previous[procedure] = ""
        domain = np.where(procedure, "", domain)
    for name, rule in (
        (Domain.MED_CONTINUOUS.value, _infusion_kinds),
        (Domain.RESPIRATORY.value, respiratory_kinds),
        (Domain.CRRT.value, crrt_kinds),
        (Domain.POSITION.value, position_kinds),
        (Domain.CODE_STATUS.value, code_status_kinds),
    ):
        part = out[domain == name]
        if len(part):
            set_rows(part.index, *rule(part))
    out["kind"] = kinds
    out["previous_value"] = previous
    return out.loc[events.index]


def action_text(
    *,
    name: str,
    category: str,
    domain: str,
    value_num,
    unit: str,
    value_text: str,
    previous_value: str,
) -> str:
    """A recorded action as a clinician reads it, named by its concept
    (``windows.vocabulary``): "PEEP 5 -> 10 cmH2O", "start Nitroglycerin 0.5
    mcg/kg/min", "Norepinephrine 0.4 -> 0.3 mcg/kg/min", "stop Propofol",
    "Nasal cannula -> Invasive mechanical ventilation (Endotracheal tube)"."""
    label = event_label(domain=domain, category=category, name=name, unit=unit)
    value = "" if value_num is None or isnan(value_num) else number_text(value_num)
    unit = f" {label.unit}" if label.unit and value else ""
    if domain == Domain.MED_CONTINUOUS:
        if value_text.strip().lower() in STOP_WORDS or value == "0":
            return f"stop {label.text}"
        if not value:  # a record without its rate
            return label.text
        if previous_value:
            return f"{label.text} {previous_value} -> {value}{unit}"
        return f"start {label.text} {value}{unit}"
    if domain in (Domain.RESPIRATORY, Domain.CRRT, Domain.POSITION, Domain.CODE_STATUS):
        if value:  # a setting
            setting = label.text.removesuffix(" (set)")
            if previous_value:
                return f"{setting} {previous_value} -> {value}{unit}"
            return f"{setting} {value}{unit}"
        if previous_value:  # a device, mode, position or code status
            prefix = category.split(":", 1)[0] + ":" if ":" in category else ""
            before = event_label(
                domain=domain, category=prefix + previous_value, name=""
            )
            head, sep, _ = label.text.partition(": ")
            if sep and before.concept.startswith(head + sep):
                # "Ventilator mode: A -> B", not the heading twice
                cut = len(head + sep)
                return f"{label.text[:cut]}{before.concept[cut:]} -> {label.text[cut:]}"
            return f"{before.concept} -> {label.text}"
        return label.text
    return " ".join(part for part in (label.text, value + unit, value_text) if part)


def action_text_of(event: Event) -> str:
    return action_text(
        name=event.name,
        category=event.category,
        domain=event.domain,
        value_num=event.value_num,
        unit=event.unit,
        value_text=event.value_text,
        previous_value=event.previous_value,
    )


# --- the rules ---------------------------------------------------------------------


def _carriers(rows: pd.DataFrame) -> np.ndarray:
    """Records of a carrier fluid under an order that also holds another drug."""
    import pandas as pd

    fluid = rows["category"].str.strip().str.lower().isin(CARRIER_FLUIDS).to_numpy()
    has_order = (rows["order_id"] != "").to_numpy()
    keys = pd.MultiIndex.from_arrays([rows["admission_id"], rows["order_id"]])
    drug_orders = keys[has_order & ~fluid].unique()
    return fluid & has_order & keys.isin(drug_orders)


def _infusion_kinds(rows: pd.DataFrame):
    """Per admission and drug, replay each order's records in time order (stops
    first at one time, so a stop and a restart of one order charted together keep
    it running), then pair the starts of new orders with the stops of others
    (bag changes).

    The flags, the order of the records and their grouping into decisions are
    computed on whole columns; the replay itself, a state per order, is one pass
    over plain lists (pandas per-group iteration cost 25 s of an 85 s import)."""
    import pandas as pd

    n = len(rows)
    kinds = np.full(n, _OBS, dtype=object)
    prevs = np.full(n, "", dtype=object)
    words = rows["value_text"].str.strip().str.lower()
    carrier = _carriers(rows)
    frame = pd.DataFrame(
        {
            "admission_id": rows["admission_id"].to_numpy(),
            "category": rows["category"].to_numpy(),
            "time": pd.DatetimeIndex(pd.to_datetime(rows["time"], utc=True))
            .as_unit("ns")
            .asi8,
            "is_stop": words.isin(STOP_WORDS).to_numpy(),
            "order_id": rows["order_id"].to_numpy(),
            "id": rows["id"].to_numpy(),
            "position": np.arange(n),
        }
    )[~carrier]
    if frame.empty:
        return kinds, prevs
    # Ties at one time break by order id, not storage order, so every source
    # names the same record as the decision.
    frame = frame.sort_values(
        ["admission_id", "category", "time", "is_stop", "order_id", "id"],
        ascending=[True, True, True, False, True, True],
        kind="mergesort",
    )
    # The records of one time and order are one decision, taken in the order
    # the first of them comes (stops first): a stable sort by that group's rank.
    group = frame.groupby(
        ["admission_id", "category", "time", "order_id"], sort=False
    ).ngroup()
    frame = frame.iloc[np.argsort(group.to_numpy(), kind="stable")]
    group = np.sort(group.to_numpy(), kind="stable")
    position = frame["position"].to_numpy()
    drug = np.r_[
        True,
        (frame["admission_id"].to_numpy()[1:] != frame["admission_id"].to_numpy()[:-1])
        | (frame["category"].to_numpy()[1:] != frame["category"].to_numpy()[:-1]),
    ]
    first = np.r_[True, group[1:] != group[:-1]]
    bolus = words.str.contains("bolus").to_numpy()[position]
    stop = words.isin(STOP_WORDS).to_numpy()[position]
    values = pd.to_numeric(rows["value_num"], errors="coerce").to_numpy(dtype=float)
    rated = (~words.isin(NO_RATE_WORDS).to_numpy() & ~np.isnan(values))[position]
    values = values[position]
    units = rows["unit"].to_numpy(dtype=object)[position]
    times = frame["time"].to_numpy()
    orders = frame["order_id"].to_numpy()
    kinds[position[bolus]] = _ACT
    # Ends of the groups of one decision and of one drug, as row numbers.
    group_starts = np.flatnonzero(first).tolist() + [len(frame)]
    drug_starts = set(np.flatnonzero(drug).tolist())
    handover = int(HANDOVER_MINUTES * 60 * 1_000_000_000)
    running: dict[str, tuple[float, str]] = {}
    starts: list = []  # (position, time, order, rate)
    stops: list = []
    for g in range(len(group_starts) - 1):
        lo, hi = group_starts[g], group_starts[g + 1]
        if lo in drug_starts:
            if g:
                _handovers(starts, stops, kinds, prevs, handover)
            running, starts, stops = {}, [], []
        order = orders[lo]
        before = running.get(order)
        deciding = None
        for i in range(lo, hi):
            if bolus[i]:
                continue
            if stop[i]:
                running.pop(order, None)
                deciding = position[i]
            elif rated[i]:
                if values[i] > 0:
                    running[order] = (float(values[i]), units[i] or "")
                else:
                    running.pop(order, None)
                deciding = position[i]
        after = running.get(order)
        if deciding is None or not _rate_changed(before, after):
            continue
        if before is None:
            starts.append((deciding, int(times[lo]), order, after))
        elif after is None:
            stops.append((deciding, int(times[lo]), order, before))
        else:
            kinds[deciding] = _ACT
            prevs[deciding] = number_text(before[0])
    _handovers(starts, stops, kinds, prevs, handover)
    return kinds, prevs


def _handovers(starts, stops, kinds, prevs, handover: int) -> None:
    """Pair each new order's start with the closest other order's stop of the
    drug within ``handover`` (a bag change: the stop is no decision, the start
    one only when it changes the rate); what is left unpaired is an action.
    ``stops`` come in time order, so the candidates of a start are one slice."""
    taken: set[int] = set()
    stop_times = [stop[1] for stop in stops]
    for position, time, order, rate in starts:
        old = None
        for stop in stops[
            bisect_left(stop_times, time - handover) : bisect_right(
                stop_times, time + handover
            )
        ]:
            if stop[0] in taken or stop[2] == order:
                continue
            if old is None or abs(stop[1] - time) < abs(old[1] - time):
                old = stop
        if old is None:
            kinds[position] = _ACT
            continue
        taken.add(old[0])
        if _rate_changed(old[3], rate):
            kinds[position] = _ACT
            prevs[position] = number_text(old[3][0])
    for position, *_ in stops:
        if position not in taken:
            kinds[position] = _ACT


def _rate_changed(before, after) -> bool:
    if (before is None) != (after is None):
        return True
    if before is None:
        return False
    if before[1] != after[1]:
        return True
    return abs(after[0] - before[0]) > RATE_TOLERANCE * max(before[0], after[0])


def _write(changed: pd.DataFrame) -> None:
    if changed.empty:
        return
    values = list(
        zip(
            changed["id"].astype(int),
            changed["kind"].astype(str),
            changed["previous_value"].astype(str).str.slice(0, 64),
        )
    )
    table = Event._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Three array parameters, not a VALUES list of 3 x N placeholders:
            # psycopg parsed the 15,000-placeholder statements for longer than
            # the server ran them.
            ids, kinds, previous = (list(column) for column in zip(*values))
            cursor.execute(
                f"UPDATE {table} AS e SET kind = v.kind, previous_value = v.prev "
                f"FROM unnest(%s::bigint[], %s::text[], %s::text[]) "
                f"AS v(id, kind, prev) WHERE e.id = v.id",
                [ids, kinds, previous],
            )
        else:
            cursor.executemany(
                f"UPDATE {table} SET kind = %s, previous_value = %s WHERE id = %s",
                [(kind, prev, pk) for pk, kind, prev in values],
            )
