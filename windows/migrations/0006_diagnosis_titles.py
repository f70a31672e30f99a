"""Fills the titles of admission diagnoses that were imported as bare codes
("ICD-9 41401"): each Admission.diagnoses entry without a title gets the CMS
table's, and each stay's admission_diagnosis label is rewritten with the code's
title (windows.vocabulary). Codes the tables do not know keep no title."""

from django.db import migrations


def fill_titles(apps, schema_editor):
    from windows.disease_groups import first_ranked
    from windows.vocabulary import diagnoses_titled, diagnosis_label

    Admission = apps.get_model("windows", "Admission")
    Stay = apps.get_model("windows", "Stay")
    for admission in Admission.objects.exclude(diagnoses=[]).iterator(chunk_size=500):
        titled = diagnoses_titled(admission.diagnoses)
        if titled != admission.diagnoses:
            admission.diagnoses = titled
            admission.save(update_fields=["diagnoses"])
        dx = first_ranked(titled)
        if dx is None:
            continue
        label = diagnosis_label(
            str(dx["code"]), dx.get("version"), dx.get("title") or ""
        )
        Stay.objects.filter(admission_id=admission.pk).exclude(
            admission_diagnosis=label[:255]
        ).update(admission_diagnosis=label[:255])


class Migration(migrations.Migration):
    dependencies = [
        ("windows", "0005_event_order_coded"),
    ]

    operations = [
        migrations.RunPython(fill_titles, migrations.RunPython.noop, elidable=True),
    ]
