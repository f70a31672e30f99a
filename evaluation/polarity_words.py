"""The words the polarity guard (evaluation.polarity) reads: direction words of
an instruction, what sedation, ventilatory support and fluid balance are moved
by, negations, a problem's course, and the groups of mutually exclusive
states. Data only; the guard compiles them into its patterns."""

from __future__ import annotations

import re

# Direction of an instruction: do more of something (+1) or less (-1). Verb
# forms only: a noun phrase ("intubation", "fluid restriction") names an action
# without saying whether to do it or to avoid it (a red flag is often written
# so), and is compatible with either. Whole words after normalization; phrases
# are tried before single words, so "titrate down" is not read as "titrate".
UP_WORDS = (
    "start",
    "starts",
    "started",
    "starting",
    "initiate",
    "initiated",
    "initiating",
    "begin",
    "commence",
    "add",
    "adding",
    "give",
    "giving",
    "administer",
    "perform",
    "performed",
    "performing",
    "resume",
    "resumed",
    "restart",
    "restarted",
    "continue",
    "continued",
    "continuing",
    "increase",
    "increased",
    "increasing",
    "escalate",
    "escalated",
    "escalating",
    "uptitrate",
    "uptitrated",
    "uptitrating",
    "up-titrate",
    "up-titrated",
    "titrate up",
    "deepen",
    "deepened",
    "deepening",
    "push",
    "augment",
    "maximize",
    "double the",
    "raise",
    "raised",
    "broaden",
    "broadened",
    "intensify",
    "intubate",
    "reintubate",
    "re-intubate",
    "resuscitate",
    "insert",
    "place",
    "replete",
    "transfuse",
    "liberalize",
)
DOWN_WORDS = (
    "stop",
    "stops",
    "stopped",
    "stopping",
    "discontinue",
    "discontinued",
    "discontinuing",
    "d/c",
    "cease",
    "ceased",
    "hold",
    "held",
    "holding",
    "withhold",
    "withheld",
    "withholding",
    "wean",
    "weaned",
    "weaning",
    "taper",
    "tapered",
    "tapering",
    "decrease",
    "decreased",
    "decreasing",
    "reduce",
    "reduced",
    "reducing",
    "lower",
    "lowered",
    "lowering",
    "de-escalate",
    "de-escalated",
    "de-escalating",
    "deescalate",
    "downtitrate",
    "downtitrated",
    "downtitrating",
    "down-titrate",
    "down-titrated",
    "titrate down",
    "lighten",
    "lightened",
    "lightening",
    "diurese",
    "diuresed",
    "diuresing",
    "liberate",
    "liberated",
    "liberating",
    "pause",
    "paused",
    "interrupt",
    "interrupted",
    "suspend",
    "suspended",
    "trial off",
    "cut back",
    "halve the",
    "narrow",
    "narrowed",
    "extubate",
    "extubated",
    "extubating",
    "remove",
    "removed",
    "restrict",
    "restricted",
    "minimize",
    "limit",
)
# A titration whose direction comes after its object: "titrate norepinephrine
# down", "turn the propofol up", "bring FiO2 down", "back off".
PARTICLE_VERB = (
    r"titrat(?:e|ed|es|ing)|turn(?:ed|s|ing)?|bring(?:s|ing)?|brought|"
    r"step(?:s|ped|ping)?|ramp(?:s|ed|ing)?|dial(?:s|ed|led|ing)?"
)
UP_PHRASE = rf"(?:{PARTICLE_VERB})(?: [^\s,;:]+){{0,3}}? up"
DOWN_PHRASE = (
    rf"(?:{PARTICLE_VERB}|come|comes|came|back|backs|backed)"
    r"(?: [^\s,;:]+){0,3}? (?:down|off)"
)
# What a direction word acts on, for the quantities whose direction is not the
# verb's alone: sedation, ventilatory support and fluid balance. Each axis
# lists what an item may name on it with the way it moves the axis when done:
# giving furosemide lowers the fluid balance (-1), giving a bolus raises it
# (+1); starting a sedation holiday lightens sedation. An item's direction on
# its axis is that sign times its direction word, so "Diurese" (a verb that
# lowers fluid), "Start furosemide" and "Hold IV fluids" all point down, and
# "Hold furosemide" up. The first thing named from the direction word on
# decides the axis ("Wean sedation for an SBT" is about sedation), or in an
# item without one, the first thing it names ("Avoid diuretics").
# At most this many words from the direction word (itself included) up to what
# it acts on: "give a 500 mL | crystalloid bolus" has 4, "start a low-dose |
# furosemide infusion" 3.
OBJECT_REACH = 5
AXES: dict[str, tuple[tuple[str, int], ...]] = {
    "sedation": (
        (r"sedation (?:holidays?|vacations?|interruptions?|breaks?|holds?)", -1),
        (
            r"(?:spontaneous |daily )?awakening trials?|wake-? ?up (?:tests?|trials?)",
            -1,
        ),
        (r"sedat[a-z]*|analgosedation|benzodiazepines?", 1),
        (
            r"propofol|midazolam|lorazepam|diazepam|dexmedetomidine|precedex|"
            r"ketamine|fentanyl|remifentanil|sufentanil|hydromorphone",
            1,
        ),
    ),
    "ventilatory support": (
        (
            r"(?:spontaneous )?breathing trials?|pressure support trials?|"
            r"t-piece trials?|extubation|liberation|decannulation",
            -1,
        ),
        # The verbs: "extubate" is a down word acting on the support itself.
        (r"extubat(?:e|ed|es|ing)|(?:re-?)?intubat[a-z]*", 1),
        (
            r"ventilat[a-z]*|vent|positive end-expiratory pressure|"
            r"fraction of inspired oxygen|pressure support|tidal volumes?|"
            r"(?:supplemental )?oxygen|o2|bilevel positive airway pressure|"
            r"continuous positive airway pressure|high-? ?flow(?: nasal cannula)?|"
            r"respiratory support|endotracheal tube",
            1,
        ),
    ),
    "fluid balance": (
        (
            r"fluid removal|(?:net )?ultrafiltration|diuresis|diuretics?|"
            r"furosemide|lasix|bumetanide|bumex|torsemide|metolazone|"
            r"chlorothiazide",
            -1,
        ),
        # The verb: "diurese" is a down word acting on the fluid balance.
        (r"diures(?:e|ed|es|ing)", 1),
        (
            r"(?:intravenous |iv |maintenance )?fluids?|bolus|boluses|"
            r"crystalloids?|colloids?|(?:normal )?saline|lactated ringer'?s?|"
            r"ringer'?s lactate|plasma-?lyte|albumin|volume",
            1,
        ),
    ),
}
# Words that forbid what follows them: "do not wean" is the opposite of "wean",
# "avoid fluid boluses" of "give fluid boluses".
NEGATIONS = (
    "do not",
    "don't",
    "dont",
    "does not",
    "should not",
    "must not",
    "not",
    "never",
    "avoid",
    "avoiding",
    "avoidance",
    "refrain from",
    "contraindicated",
)
# "No" forbids only at the start of a clause ("no NSAIDs", "no further
# fluids"); elsewhere it is as likely nitric oxide ("inhaled NO").
LEADING_NO = re.compile(r"^\s*no\s")
# Course of a problem: getting better (+1) or worse (-1).
BETTER_WORDS = (
    "improving",
    "improved",
    "improvement",
    "resolving",
    "resolved",
    "resolution",
    "recovering",
    "recovered",
    "recovery",
    "better",
    "stabilizing",
    "stabilized",
    "decreasing need",
    "weaning off",
)
WORSE_WORDS = (
    "worsening",
    "worsened",
    "worse",
    "deteriorating",
    "deteriorated",
    "deterioration",
    "progressing",
    "progressive",
    "progression",
    "escalating need",
    "new-onset",
    "refractory",
    "failing",
)
# Code status phrases that carry "not" without forbidding an action.
FIXED_PHRASES = {
    "do not resuscitate": "dnr",
    "do not intubate": "dni",
    "do not attempt resuscitation": "dnar",
    "allow natural death": "dnr",
    "no code": "dnr",
    # Anatomy, not direction.
    "lower gastrointestinal": "lgi",
    "upper gastrointestinal": "ugi",
    "lower extremity": "leg",
    "lower extremities": "legs",
    "lower lobe": "basal lobe",
}
# Opposite or mutually exclusive states of one thing, named by different
# words: groups of (name, pattern), where a pattern's group 1, when it has
# one, is the stem both sides must share ("hypokalemia" is opposed to
# "hyperkalemia", not to "hypertension"). Two items are opposed when each names
# a different member and not the other's ("mixed septic and cardiogenic shock"
# names both, and is opposed to neither).
EXCLUSIVE_STATES: tuple[tuple[tuple[str, str], ...], ...] = (
    (("hypo", r"hypo-?([a-z]{3,})"), ("hyper", r"hyper-?([a-z]{3,})")),
    (("brady", r"brady-?([a-z]{3,})"), ("tachy", r"tachy-?([a-z]{3,})")),
    (
        ("penia", r"([a-z]{3,}?)(?:cyto)?penia"),
        ("cytosis", r"([a-z]{3,}?)(?:cytosis|philia)"),
    ),
    (("acidosis", r"acidosis"), ("alkalosis", r"alkalosis")),
    (("acidemia", r"acidemia"), ("alkalemia", r"alkalemia")),
    (("intubation", r"(?:re)?intubat[a-z]*"), ("extubation", r"extubat[a-z]*")),
    (
        ("vasoconstriction", r"vasoconstrict[a-z]*"),
        ("vasodilation", r"vasodilat[a-z]*"),
    ),
    # "High potassium" / "low potassium"; "lower" as a verb is an action word.
    (("high", r"(?:high|elevated|raised)"), ("low", r"low")),
    (("acute", r"acute"), ("chronic", r"chronic")),
    # Depth of sedation, and the fluid balance aimed at.
    (
        ("deep sedation", r"(?:deep|deeper|deeply|heavy|heavily) (sedat)[a-z]*"),
        ("light sedation", r"(?:light|lighter|lightly|minimal) (sedat)[a-z]*"),
    ),
    (
        (
            "negative balance",
            r"(?:net |fluid )?negative(?: fluid)? balance|net negative",
        ),
        (
            "positive balance",
            r"(?:net |fluid )?positive(?: fluid)? balance|net positive",
        ),
    ),
    (("atrial", r"(?:atrial|supraventricular)"), ("ventricular", r"ventricular")),
    (("upper gi", r"ugi"), ("lower gi", r"lgi")),
    (("ischemic", r"ischemic"), ("hemorrhagic stroke", r"hemorrhagic stroke")),
    (
        ("hypoxemic", r"hypox[a-z]*"),
        ("hypercapnic", r"(?:hypercapn|hypercarb)[a-z]*"),
    ),
    (
        ("septic", r"(?:septic|sepsis)"),
        ("cardiogenic", r"cardiogenic"),
        ("hypovolemic", r"(?:hemorrhagic|hypovolemic)"),
        ("obstructive", r"obstructive shock"),
    ),
)
