"""The thresholds and drug groups of the rules backbone, each with the
definition or source it applies (/work/shared/CLINICAL_CONCEPTS.md, the spec)."""

from __future__ import annotations

from annotation.critical import DEFAULT_CRITICAL_ACTION_RULES

VASOPRESSORS = (
    "norepinephrine",
    "epinephrine",
    "vasopressin",
    "phenylephrine",
    "dopamine",
)
INOTROPES = ("dobutamine", "milrinone")
_RULE_CATEGORIES = {
    r["key"]: set(r["categories"]) for r in DEFAULT_CRITICAL_ACTION_RULES
}
FLUID_BOLUS = _RULE_CATEGORIES["fluid_boluses"]
MED_DOMAINS = ("medication_admin_continuous", "medication_admin_intermittent")

# Spans of the tracks read around a window (see the package docstring), hours.
NOW_LEAD_HOURS = 2.0
BEFORE_HOURS = 6.0

# MAP target of the Surviving Sepsis Campaign 2021 (Evans et al., Crit Care Med
# 2021): 65 mmHg. Hypotension is *sustained* when the hourly mean MAP (the
# "map" track, mean of the hour's chartings) is below it in the latest hour with
# a value and in at least two hours of "now": one low reading (a flushed
# arterial line, a cuff) moves the hour's minimum, not two hourly means.
MAP_TARGET = 65.0
SUSTAINED_HOURS = 2
# Profound hypotension: a sustained hourly mean MAP below 50 mmHg, under the
# lower limit of cerebral autoregulation (Lassen, Physiol Rev 1959) and of renal
# autoregulation; whatever the trend, a patient there is deteriorating.
MAP_PROFOUND = 50.0
# Shock on vasopressors: a norepinephrine-equivalent dose (CLINICAL_CONCEPTS.md
# 5, Goradia et al. 2020) above 0.1 mcg/kg/min, the dose at which SOFA scores
# cardiovascular failure 4 (norepinephrine or epinephrine > 0.1 mcg/kg/min,
# Vincent et al. 1996; CLINICAL_CONCEPTS.md 9b). Lower doses are named as
# low-dose support, and only beside hypotension or hyperlactatemia.
SHOCK_NED_MIN = 0.1
# SSC 2021: add vasopressin rather than escalating norepinephrine further once
# norepinephrine is 0.25-0.5 mcg/kg/min.
VASOPRESSIN_ADD_NE = 0.25
# A vasopressor dose trend: a change of at least 0.05 mcg/kg/min of
# norepinephrine equivalent and at least a quarter of the earlier dose (half of
# it when weaning), so that a pump's rounding or a bag change is not a trend.
NED_STEP = 0.05
NED_RISE_RATIO = 1.25
NED_WEAN_RATIO = 0.5
# Acute organ dysfunction in Sepsis-3 (Singer et al., JAMA 2016): a SOFA rise
# of 2 points or more (SOFA is the 24-h worst score, CLINICAL_CONCEPTS.md 9c).
SOFA_STEP = 2
# Lactate: a rise of 1 mmol/L to at least 2 mmol/L (the Sepsis-3 hyperlactatemia
# cut-off) is worse; a fall of at least 20 % from 2 mmol/L or more is lactate
# clearance (SSC 2021 guides resuscitation by falling lactate; 10-20 % clearance
# goals, Jansen et al. 2010, Nguyen et al. 2004).
LACTATE_HIGH = 2.0
# Septic shock (Sepsis-3, Singer et al., JAMA 2016): sepsis with vasopressors
# needed for a MAP >= 65 mmHg *and* serum lactate > 2 mmol/L; vasopressor
# shock with an infection but a lactate <= 2 mmol/L, or none measured, is shock.
SEPTIC_SHOCK_LACTATE = 2.0
LACTATE_RISE = 1.0
LACTATE_CLEARANCE = 0.2
# Oxygenation: FiO2 changed by 0.2 or more, or P/F by a fifth or more across
# the Berlin ARDS cut-off of 300 mmHg (ARDS Definition Task Force, JAMA 2012).
FIO2_STEP = 0.2
PF_CUTOFF = 300.0
PF_CHANGE = 0.2
GCS_STEP = 3
# AKI lasts as long as its definition: KDIGO stages an AKI episode by its worst
# stage (KDIGO 2012, CLINICAL_CONCEPTS.md 4) and ADQI 16 (Chawla et al., Nat
# Rev Nephrol 2017) calls AKI reversed only after 48 h without its criteria, so
# the problem's stage is the worst KDIGO stage of the last 48 h; while CRRT
# runs it is stage 3 (4d).
AKI_RECOVERY_HOURS = 48.0
# Antimicrobials count as given when one was given within the last 24 h (the
# longest usual dosing interval).
ANTIBIOTIC_LOOKBACK_HOURS = 24.0
# The final 12 hours before death of a patient who died in hospital: never
# "improving", and weaning of vasopressors or of ventilatory support there is
# not read as improvement (it is, in the main, withdrawal of life-sustaining
# treatment; CLINICAL_CONCEPTS.md, the rules Oracle). The Oracle's context gives
# the time of death (static "death_h", oracle.context._death_times) where the
# stay's data has one: the guard holds from DEATH_GUARD_HOURS before it.
DEATH_GUARD_HOURS = 12.0
# A death without a known time (only the outcome): in the CLIF demo 13 of the
# 22 in-hospital deaths happen during the ICU stay, 1 to 5 h before its recorded
# end, so the guard then covers the last 12 + DEATH_BEFORE_END_HOURS hours of
# the stay: counted from the stay's end alone, windows 8.5 and 10.2 h before
# death (hids 22987108, 28661809) were labelled improving.
DEATH_BEFORE_END_HOURS = 5.0
