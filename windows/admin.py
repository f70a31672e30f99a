"""Admin for imported clinical data and import runs.

Event tables run to millions of rows: foreign keys use raw id fields, lists
select their relations in the same query, and counts are not shown per row.
"""

from django.contrib import admin

from windows.event_fields import EVENT_VALUE_FIELDS
from windows.models import Admission, DataSource, Event, ImportRun, Patient, Stay


class StayInline(admin.TabularInline):
    model = Stay
    extra = 0
    fields = (
        "source_id",
        "care_unit",
        "intime",
        "outtime",
        "hospital_outcome",
        "disease_group",
    )
    show_change_link = True


@admin.register(Patient)
class PatientAdmin(admin.ModelAdmin):
    list_display = ("pseudo_id", "source", "source_id", "sex", "age", "death_time")
    list_filter = ("source", "sex")
    search_fields = ("pseudo_id", "source_id")
    ordering = ("pseudo_id",)


@admin.register(Admission)
class AdmissionAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "patient",
        "source",
        "source_id",
        "admit_time",
        "discharge_time",
        "discharge_disposition",
        "admission_type",
        "age_at_admission",
    )
    list_filter = ("source", "admission_type")
    search_fields = ("source_id", "patient__pseudo_id", "patient__source_id")
    raw_id_fields = ("patient",)
    list_select_related = ("patient",)
    date_hierarchy = "admit_time"
    inlines = (StayInline,)


@admin.register(Stay)
class StayAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "patient_pseudo_id",
        "source",
        "source_id",
        "care_unit",
        "intime",
        "outtime",
        "length_hours_display",
        "hospital_outcome",
        "disease_group",
        "admission_diagnosis",
    )
    list_filter = ("source", "hospital_outcome", "disease_group", "care_unit")
    search_fields = (
        "source_id",
        "admission__source_id",
        "admission__patient__pseudo_id",
        "admission_diagnosis",
        "diagnosis_code",
    )
    raw_id_fields = ("admission",)
    list_select_related = ("admission__patient",)
    date_hierarchy = "intime"

    @admin.display(description="Patient", ordering="admission__patient__pseudo_id")
    def patient_pseudo_id(self, stay: Stay) -> str:
        return stay.admission.patient.pseudo_id

    @admin.display(description="Length (h)")
    def length_hours_display(self, stay: Stay) -> str:
        return f"{stay.length_hours:.1f}"


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "admission",
        "time",
        *EVENT_VALUE_FIELDS,
        "source_table",
    )
    # Filters with choices only: a filter on a free-text column would read every
    # event to list its values.
    list_filter = ("kind", "domain")
    search_fields = ("category", "name", "source_key")
    raw_id_fields = ("admission",)
    list_select_related = ("admission__patient",)
    # The unfiltered total would be a second COUNT over every event.
    show_full_result_count = False


@admin.register(ImportRun)
class ImportRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "source",
        "path",
        "status",
        "percent",
        "progress_label",
        "started_by",
        "created_at",
        "finished_at",
    )
    list_filter = ("source", "status")
    search_fields = ("path", "progress_label", "error")
    raw_id_fields = ("started_by",)
    list_select_related = ("started_by",)
    readonly_fields = ("created_at", "started_at", "finished_at")


@admin.register(DataSource)
class DataSourceAdmin(admin.ModelAdmin):
    """The sources of clinical data and their data-use terms
    (windows.datasources): the importers link every stay to its sources."""

    list_display = ("key", "name", "terms", "agreement")
    list_filter = ("terms",)
    search_fields = ("key", "name", "agreement")
