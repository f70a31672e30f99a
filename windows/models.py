"""Clinical data: patients, hospital admissions, ICU stays and their events.

Every source (CLIF, MIMIC-IV) is normalized on import into CLIF's category
vocabulary, so clinical code reads ``Event.category`` the same way whatever the
source was.
"""

from django.conf import settings
from django.db import models

from jobs.models import JobFields


class Source(models.TextChoices):
    CLIF = "clif", "CLIF"
    MIMIC = "mimic", "MIMIC-IV"


class DataUseTerms(models.TextChoices):
    """Under what terms a source's data may be used, least strict first: a
    set of data from several sources takes the strictest of theirs
    (windows.datasources.terms_strictest)."""

    OPEN = "open", "Open"
    CREDENTIALED = "credentialed", "Credentialed (PhysioNet)"
    RESTRICTED = "restricted", "Restricted to this site"


class DataSource(models.Model):
    """A source of clinical data and its data-use terms: the CLIF demo (open),
    MIMIC-IV and MIMIC-IV-Note (PhysioNet credentialed), a site's own data
    (restricted to this site). Each import records the sources it read
    (ImportRun.data_sources) and links its stays to them (Stay.data_sources);
    the catalogue is windows.datasources."""

    key = models.SlugField(max_length=40, unique=True)
    name = models.CharField(max_length=120)
    terms = models.CharField(max_length=12, choices=DataUseTerms.choices)
    agreement = models.CharField(
        max_length=200,
        blank=True,
        help_text="The licence or data use agreement and its version.",
    )
    agreement_url = models.URLField(max_length=300, blank=True)
    citations = models.JSONField(
        default=list, blank=True, help_text="What a user of the data must cite."
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_terms_display().lower()})"


class Patient(models.Model):
    source = models.CharField(max_length=8, choices=Source.choices)
    source_id = models.CharField(max_length=64)
    pseudo_id = models.CharField(
        max_length=16, unique=True, help_text="Pseudonymous id shown on pages."
    )
    sex = models.CharField(max_length=16, blank=True)
    age = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Age in years at the first admission."
    )
    death_time = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "source_id"], name="patient_source_uniq"
            )
        ]

    def __str__(self) -> str:
        return self.pseudo_id


class Admission(models.Model):
    """A hospitalization; events belong to it and are shared by its ICU stays."""

    patient = models.ForeignKey(
        Patient, on_delete=models.CASCADE, related_name="admissions"
    )
    source = models.CharField(max_length=8, choices=Source.choices)
    source_id = models.CharField(max_length=64)
    admit_time = models.DateTimeField()
    discharge_time = models.DateTimeField(null=True, blank=True)
    discharge_disposition = models.CharField(max_length=64, blank=True)
    admission_type = models.CharField(max_length=64, blank=True)
    age_at_admission = models.PositiveSmallIntegerField(null=True, blank=True)
    diagnoses = models.JSONField(
        default=list,
        blank=True,
        help_text="ICD codes in source order: [{code, version, rank, title}].",
    )
    events_version = models.PositiveBigIntegerField(
        default=0,
        help_text="Bumped whenever the admission's events change "
        "(windows.services.admission_events_touch): what a stay's stored concept "
        "tracks were computed from, read without counting the events.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "source_id"], name="admission_source_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.patient} admission {self.admit_time:%Y-%m-%d}"


class Outcome(models.TextChoices):
    DIED = "died", "Died in hospital"
    SURVIVED = "survived", "Survived"


class DiseaseGroup(models.TextChoices):
    """Broad groups by ICD chapter, sepsis on its own (paper, Figure 8)."""

    SEPSIS = "sepsis", "Sepsis & Severe Infection"
    INFECTIOUS = "infectious", "Infectious Diseases"
    ONCOLOGY = "oncology", "Oncology"
    HEMATOLOGIC = "hematologic", "Hematologic Disorders"
    ENDOCRINE = "endocrine", "Endocrine/Metabolic Disorders"
    PSYCHIATRIC = "psychiatric", "Psychiatric Disorders"
    NEUROLOGICAL = "neurological", "Neurological Disorders"
    EYE_EAR = "eye_ear", "Eye/Ear Disorders"
    CARDIOVASCULAR = "cardiovascular", "Cardiovascular Disorders"
    RESPIRATORY = "respiratory", "Respiratory Disorders"
    GI_HEPATIC = "gi_hepatic", "Gastrointestinal/Hepatic Disorders"
    SKIN = "skin", "Skin Disorders"
    MUSCULOSKELETAL = "musculoskeletal", "Musculoskeletal Disorders"
    RENAL_GU = "renal_gu", "Renal/Genitourinary Disorders"
    PREGNANCY = "pregnancy", "Pregnancy/Perinatal"
    CONGENITAL = "congenital", "Congenital Disorders"
    SIGNS_SYMPTOMS = "signs_symptoms", "Clinical Signs/Symptoms"
    INJURY_POISONING = "injury_poisoning", "Injury/Poisoning"
    OTHER = "other", "Other/Health Services"
    UNKNOWN = "unknown", "Unknown"


class Stay(models.Model):
    """One ICU stay: a run of contiguous ICU segments within one admission."""

    admission = models.ForeignKey(
        Admission, on_delete=models.CASCADE, related_name="stays"
    )
    source = models.CharField(max_length=8, choices=Source.choices)
    source_id = models.CharField(max_length=64)
    source_ids = models.JSONField(
        default=dict, blank=True, help_text="Ids in the source: segments, stay_id, ..."
    )
    care_unit = models.CharField(max_length=128, blank=True)
    intime = models.DateTimeField()
    outtime = models.DateTimeField()
    hospital_outcome = models.CharField(max_length=8, choices=Outcome.choices)
    admission_diagnosis = models.CharField(max_length=255, blank=True)
    diagnosis_code = models.CharField(max_length=16, blank=True)
    diagnosis_version = models.PositiveSmallIntegerField(null=True, blank=True)
    disease_group = models.CharField(
        max_length=20, choices=DiseaseGroup.choices, default=DiseaseGroup.UNKNOWN
    )
    data_sources = models.ManyToManyField(
        DataSource,
        blank=True,
        related_name="stays",
        help_text="The sources its data came from, as its import recorded them "
        "(none: its source's catalogue entry, windows.datasources).",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "source_id"], name="stay_source_uniq"
            ),
            models.CheckConstraint(
                condition=models.Q(outtime__gt=models.F("intime")),
                name="stay_out_after_in",
            ),
        ]
        indexes = [
            models.Index(fields=["disease_group"]),
            models.Index(fields=["intime"]),
        ]

    def __str__(self) -> str:
        return f"Stay {self.pk} ({self.admission.patient})"

    @property
    def length_hours(self) -> float:
        return (self.outtime - self.intime).total_seconds() / 3600.0

    def hours_since_admit(self, when) -> float:
        return (when - self.intime).total_seconds() / 3600.0


class EventKind(models.TextChoices):
    """What an event is to a reader at the bedside.

    ``action`` is a clinical decision (``windows.actions`` defines which records
    are); ``outcome`` reveals how the stay ends; ``coded`` is coded after
    discharge (ICD procedure codes billed with a date only, DRG): hindsight only,
    never in a bedside or release context.
    """

    OBSERVATION = "observation", "Observation"
    ACTION = "action", "Action"
    OUTCOME = "outcome", "Outcome"
    CODED = "coded", "Coded after discharge"


class Domain(models.TextChoices):
    """The CLIF table an event belongs to, whatever source it came from."""

    ADT = "adt", "ADT / transfers"
    VITALS = "vitals", "Vitals"
    LABS = "labs", "Labs"
    MED_CONTINUOUS = "medication_admin_continuous", "Continuous medications"
    MED_INTERMITTENT = "medication_admin_intermittent", "Intermittent medications"
    RESPIRATORY = "respiratory_support", "Respiratory support"
    ASSESSMENTS = "patient_assessments", "Assessments"
    CRRT = "crrt_therapy", "CRRT"
    CODE_STATUS = "code_status", "Code status"
    POSITION = "position", "Position"
    PROCEDURES = "patient_procedures", "Procedures"
    MICROBIOLOGY = "microbiology_culture", "Microbiology"
    INPUT = "input", "Fluid input"
    OUTPUT = "output", "Fluid output"
    OUTCOME = "outcome", "Outcome"
    NOTES = "notes", "Clinical notes"
    OTHER = "other", "Other (unmapped)"


class Event(models.Model):
    """One timestamped fact of an admission.

    ``category`` holds the CLIF category (``heart_rate``, ``creatinine``,
    ``norepinephrine``, ``IMV``, ``gcs_total``, ...); items without a mapping keep
    an empty category and their source label in ``name``.
    """

    # Events are bulk-loaded by the importers in the same transaction as their
    # admission, and deleted with it by Django's cascade; a database-level foreign
    # key would cost a deferred check per row at commit (a third of the import
    # time of a large chartevents), and the (admission, time) index serves every
    # lookup by admission.
    admission = models.ForeignKey(
        Admission,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
        db_constraint=False,
    )
    time = models.DateTimeField()
    end_time = models.DateTimeField(
        null=True, blank=True, help_text="End of an interval record (e.g. an infusion)."
    )
    kind = models.CharField(max_length=12, choices=EventKind.choices)
    domain = models.CharField(max_length=32, choices=Domain.choices)
    category = models.CharField(max_length=64, blank=True)
    name = models.CharField(max_length=255)
    value_num = models.FloatField(null=True, blank=True)
    unit = models.CharField(max_length=32, blank=True)
    value_text = models.TextField(blank=True)
    source_table = models.CharField(max_length=48)
    source_key = models.CharField(max_length=128, blank=True)
    order_id = models.CharField(
        max_length=64,
        blank=True,
        db_default="",
        help_text="The order a medication record belongs to (CLIF med_order_id, "
        "MIMIC-IV linkorderid): rates are kept per order.",
    )
    previous_value = models.CharField(
        max_length=64,
        blank=True,
        db_default="",
        help_text="For an action that changes a state (a rate, a setting, a device): "
        "the state before it, as windows.actions derived it.",
    )

    class Meta:
        indexes = [
            models.Index(fields=["admission", "time"], name="event_admission_time")
        ]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M} {self.category or self.name}"


USER_MODEL = settings.AUTH_USER_MODEL


class Cohort(models.Model):
    """A reproducible selection of ICU stays: one per patient, balanced by outcome
    and length of stay (spec section 2). ``settings`` holds the inputs that rebuild
    it; ``summary`` the strata counts at build time."""

    name = models.CharField(max_length=128, unique=True)
    settings = models.JSONField(default=dict, blank=True)
    seed = models.IntegerField()
    target_size = models.PositiveIntegerField()
    summary = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    stays = models.ManyToManyField(Stay, through="CohortStay", related_name="cohorts")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


class CohortStratum(models.TextChoices):
    DIED_SHORT = "died_short", "Died, short stay"
    DIED_LONG = "died_long", "Died, long stay"
    SURVIVED_SHORT = "survived_short", "Survived, short stay"
    SURVIVED_LONG = "survived_long", "Survived, long stay"


class CohortStay(models.Model):
    cohort = models.ForeignKey(
        Cohort, on_delete=models.CASCADE, related_name="cohort_stays"
    )
    stay = models.ForeignKey(
        Stay, on_delete=models.CASCADE, related_name="cohort_stays"
    )
    stratum = models.CharField(max_length=16, choices=CohortStratum.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cohort", "stay"], name="cohort_stay_uniq")
        ]

    def __str__(self) -> str:
        return f"{self.cohort}: stay {self.stay_id}"


class SampleRegime(models.TextChoices):
    """The density regime a window fell in when its stay's Gold windows were drawn;
    blank until then."""

    HIGH_DENSITY = "high_density", "High action density"
    CONTROL = "control", "Control"
    BLANK = "", "Not classified"


class Window(models.Model):
    """A candidate window of a stay: ``[start, end)``, with its event counts and
    action density. RealICU-Scale labels every window; Gold a sample of them."""

    stay = models.ForeignKey(Stay, on_delete=models.CASCADE, related_name="windows")
    index = models.PositiveIntegerField(help_text="0 for the window at ICU admission.")
    start = models.DateTimeField()
    end = models.DateTimeField()
    hours_since_admit = models.FloatField()
    event_count = models.PositiveIntegerField(default=0)
    action_count = models.PositiveIntegerField(default=0)
    action_density = models.FloatField(default=0.0)
    sampled_gold = models.BooleanField(default=False)
    sample_regime = models.CharField(
        max_length=16,
        choices=SampleRegime.choices,
        blank=True,
        default=SampleRegime.BLANK,
    )

    class Meta:
        ordering = ["stay_id", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["stay", "index"], name="window_stay_index_uniq"
            ),
            models.CheckConstraint(
                condition=models.Q(end__gt=models.F("start")),
                name="window_end_after_start",
            ),
        ]
        indexes = [
            models.Index(fields=["stay", "start"], name="window_stay_start"),
            models.Index(fields=["sampled_gold"], name="window_sampled_gold"),
        ]

    def __str__(self) -> str:
        return (
            f"Stay {self.stay_id} window {self.index} (+{self.hours_since_admit:g} h)"
        )


class StayTracks(models.Model):
    """A stay's hourly clinical concept tracks (windows.concepts), stored in one
    compact row so a page reads them with one query. ``events_signature`` says
    which events they were computed from; a read with other events recomputes."""

    stay = models.OneToOneField(Stay, on_delete=models.CASCADE, related_name="tracks")
    events_signature = models.CharField(max_length=64)
    computed_at = models.DateTimeField(auto_now=True)
    hours = models.JSONField(
        default=list, help_text="Hour ends, hours since admission."
    )
    columns = models.JSONField(default=dict, help_text="Concept name -> hourly values.")
    meta = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"Tracks of stay {self.stay_id}"


class BuildKind(models.TextChoices):
    TRACKS = "tracks", "Concept tracks"
    WINDOWS = "windows", "Windows and Gold draw"


class BuildState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class BuildRun(models.Model):
    """One fanned-out build of concept tracks, or of windows and their Gold draw,
    over a set of stays: split into BuildBatch rows that the workers share
    (windows.services.build_run_create). Its progress is its batches' sum."""

    kind = models.CharField(max_length=8, choices=BuildKind.choices)
    params = models.JSONField(default=dict, blank=True)
    state = models.CharField(
        max_length=8, choices=BuildState.choices, default=BuildState.QUEUED
    )
    stays_total = models.PositiveIntegerField(default=0)
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    started_by = models.ForeignKey(
        USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} build {self.pk} ({self.state})"


class BatchFields(JobFields):
    """A batch of a fanned-out job (a build's or an import's): what it did
    (its share of the run's summary), its error, and when it was queued,
    taken and ended."""

    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class BuildBatch(BatchFields):
    """A batch of stays of a BuildRun: a job row (jobs.models.JobFields) that one
    worker at a time holds under a lease; the reaper re-queues it when its worker
    goes silent. ``result`` holds what the batch did (summed into the run's
    summary when the last batch ends)."""

    run = models.ForeignKey(BuildRun, on_delete=models.CASCADE, related_name="batches")
    index = models.PositiveIntegerField()
    stay_ids = models.JSONField(default=list)
    state = models.CharField(
        max_length=8, choices=BuildState.choices, default=BuildState.QUEUED
    )

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="build_batch_uniq")
        ]

    def __str__(self) -> str:
        return f"Batch {self.index} of build {self.run_id} ({self.state})"


def _event_changed(sender, instance, **kwargs) -> None:
    """An event saved one at a time (a factory, the admin) bumps its admission's
    events_version; bulk writes call windows.services.admission_events_touch once
    for the admissions they touched. (No post_delete receiver: it would stop
    Django deleting an admission's events in one statement; events are only
    ever added.)"""
    Admission.objects.filter(pk=instance.admission_id).update(
        events_version=models.F("events_version") + 1
    )


models.signals.post_save.connect(_event_changed, sender=Event)


# The import job rows live in their own module (this one stays under 600
# lines); imported here so Django registers them and old imports still work.
from windows.models_imports import ImportBatch, ImportRun, ImportStatus  # noqa: E402,F401
