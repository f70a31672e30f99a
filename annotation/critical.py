"""Which recorded actions count as critical interventions for the Recommended Actions
task (spec section 3): rules over ``Event.domain`` and ``Event.category``, stored on
each campaign so an admin can change them."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models import Q

from windows.antibiotics import ANTIBIOTICS
from windows.models import Domain, EventKind

_MEDS = [Domain.MED_CONTINUOUS.value, Domain.MED_INTERMITTENT.value]
# CLIF medication categories of anticoagulant and thrombolytic drugs, and of the
# agents that reverse them or stop bleeding.
ANTICOAGULANTS = frozenset(
    {
        "heparin",
        "enoxaparin",
        "dalteparin",
        "fondaparinux",
        "argatroban",
        "bivalirudin",
        "warfarin",
        "apixaban",
        "rivaroxaban",
        "dabigatran",
        "alteplase",
    }
)
ANTICOAGULANT_REVERSAL = frozenset(
    {
        "protamine",
        "phytonadione",
        "prothrombin_complex_concentrate",
        "idarucizumab",
        "andexanet_alfa",
        "tranexamic_acid",
        "aminocaproic",
    }
)

# Each rule matches an action whose domain is one of ``domains`` and, when
# ``categories`` is not empty, whose category is one of them (CLIF's lower-case
# med_category / input category values). An empty ``categories`` takes every
# action of the domains: every ventilator or device change, CRRT mode change and
# procedure is critical. Routine monitoring and maintenance (insulin, stress ulcer
# prophylaxis, dextrose, electrolytes, ...) match no rule.
DEFAULT_CRITICAL_ACTION_RULES: list[dict] = [
    {
        "key": "vasoactives_inotropes",
        "label": "Vasoactives and inotropes",
        "domains": _MEDS,
        "categories": [
            "norepinephrine",
            "epinephrine",
            "vasopressin",
            "phenylephrine",
            "dopamine",
            "dobutamine",
            "milrinone",
            "angiotensin",
            "isoproterenol",
        ],
    },
    {
        "key": "sedation_analgesia",
        "label": "Sedation and analgesia infusions",
        "domains": [Domain.MED_CONTINUOUS.value],
        "categories": [
            "propofol",
            "dexmedetomidine",
            "midazolam",
            "lorazepam",
            "ketamine",
            "pentobarbital",
            "fentanyl",
            "hydromorphone",
            "morphine",
            "remifentanil",
        ],
    },
    {
        "key": "antimicrobials",
        "label": "Antimicrobials",
        "domains": _MEDS,
        "categories": sorted(ANTIBIOTICS),
    },
    {
        "key": "anticoagulants_reversal",
        "label": "Anticoagulants and their reversal",
        "domains": _MEDS,
        "categories": sorted(ANTICOAGULANTS | ANTICOAGULANT_REVERSAL),
    },
    {
        "key": "fluid_boluses",
        "label": "Fluid boluses",
        "domains": [Domain.INPUT.value, *_MEDS],
        "categories": ["iv_crystalloid", "iv_colloid", "albumin_infusion", "albumin"],
    },
    {
        "key": "blood_products",
        "label": "Blood products",
        "domains": [Domain.INPUT.value],
        "categories": [
            "blood_products",
            "red_blood_cells",
            "plasma",
            "platelets",
            "cryoprecipitate",
        ],
    },
    {
        "key": "diuretics",
        "label": "Diuretics",
        "domains": _MEDS,
        "categories": [
            "furosemide",
            "bumetanide",
            "torsemide",
            "chlorothiazide",
            "metolazone",
            "acetazolamide",
        ],
    },
    {
        "key": "ventilation_oxygen",
        "label": "Ventilation and oxygen-device changes",
        "domains": [Domain.RESPIRATORY.value],
        "categories": [],
    },
    {"key": "crrt", "label": "CRRT", "domains": [Domain.CRRT.value], "categories": []},
    {
        "key": "procedures",
        "label": "Procedures",
        "domains": [Domain.PROCEDURES.value],
        "categories": [],
    },
]


def default_critical_action_rules() -> list[dict]:
    """A fresh copy of the defaults (a JSONField default must be a callable)."""
    return [
        {
            **rule,
            "domains": list(rule["domains"]),
            "categories": list(rule["categories"]),
        }
        for rule in DEFAULT_CRITICAL_ACTION_RULES
    ]


def critical_action_rules_clean(rules) -> list[dict]:
    """The rules in canonical form, or a ValidationError naming what is wrong."""
    if not isinstance(rules, list):
        raise ValidationError(
            "Critical action categories must be a list of rules, each with "
            '"key", "label", "domains" and "categories".'
        )
    cleaned = []
    keys = set()
    for n, rule in enumerate(rules, start=1):
        if not isinstance(rule, dict):
            raise ValidationError(f"Critical action rule {n} must be an object.")
        key = str(rule.get("key") or "").strip()
        if not key:
            raise ValidationError(f'Critical action rule {n} needs a "key".')
        if key in keys:
            raise ValidationError(f'Critical action rule "{key}" appears twice.')
        keys.add(key)
        domains = rule.get("domains")
        if not isinstance(domains, list) or not domains:
            raise ValidationError(
                f'Critical action rule "{key}" needs a list of one or more "domains".'
            )
        unknown = [d for d in domains if d not in Domain.values]
        if unknown:
            raise ValidationError(
                f'Critical action rule "{key}" names unknown domains: '
                f"{', '.join(map(str, unknown))}. Known: {', '.join(Domain.values)}."
            )
        categories = rule.get("categories", [])
        if not isinstance(categories, list) or not all(
            isinstance(c, str) and c.strip() for c in categories
        ):
            raise ValidationError(
                f'Critical action rule "{key}": "categories" must be a list of '
                "category names (empty for every action of the domains)."
            )
        cleaned.append(
            {
                "key": key,
                "label": str(rule.get("label") or key).strip(),
                "domains": list(dict.fromkeys(domains)),
                "categories": list(dict.fromkeys(c.strip() for c in categories)),
            }
        )
    return cleaned


def critical_action_q(rules: list[dict]) -> Q:
    """The condition on ``Event`` for a critical action under ``rules``; matches
    nothing when there are no rules."""
    condition = Q(pk__in=[])
    for rule in rules:
        part = Q(domain__in=rule["domains"])
        if rule.get("categories"):
            part &= Q(category__in=rule["categories"])
        condition |= part
    return Q(kind=EventKind.ACTION) & condition
