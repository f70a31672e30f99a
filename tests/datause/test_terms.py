"""Data-use terms per source (issue 34, item 1): each import records its
source's terms and links its stays to it; the terms propagate to campaigns,
cohorts, runs and releases, the strictest of a mix winning."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from annotation.models import Campaign, CampaignWindow
from datause.selectors import data_use_of
from tests.factories import make_admission, make_patient, make_stay, make_user
from tests.windows.mimic_files import mimic_tables, write_mimic
from tests.windows.notes_folder import mimic_with_notes
from windows.datasources import (
    CLIF_DEMO,
    MIMIC_IV,
    MIMIC_IV_NOTE,
    SITE,
    clif_default_data_source,
    data_source_get,
    data_use_of_stays,
    stays_link,
)
from windows.importers.mimic import mimic_import
from windows.models import DataSource, ImportRun, Source, Stay, Window
from windows.services import import_run_create

pytestmark = pytest.mark.django_db


def test_the_catalogue_holds_the_sources_and_their_terms():
    for key in (CLIF_DEMO, MIMIC_IV, MIMIC_IV_NOTE, SITE):
        data_source_get(key)  # made by the migration (or again after a flush)
    terms = dict(DataSource.objects.values_list("key", "terms"))
    assert terms[CLIF_DEMO] == "open"
    assert terms[MIMIC_IV] == terms[MIMIC_IV_NOTE] == "credentialed"
    assert terms[SITE] == "restricted"


def test_a_mimic_iv_import_links_its_stays_to_mimic_iv(tmp_path):
    summary = mimic_import(directory=write_mimic(tmp_path / "m", mimic_tables()))
    assert summary.data_sources == [MIMIC_IV]
    stays = Stay.objects.all()
    assert stays.exists()
    data_use = data_use_of_stays(stays)
    assert data_use.terms == "credentialed" and data_use.keys == [MIMIC_IV]
    assert not stays.filter(data_sources__isnull=True).exists()


def test_a_mimic_import_with_notes_is_also_mimic_iv_note(tmp_path):
    summary = mimic_import(directory=mimic_with_notes(tmp_path))
    assert summary.data_sources == [MIMIC_IV, MIMIC_IV_NOTE]
    assert set(data_use_of_stays(Stay.objects.all()).keys) == {MIMIC_IV, MIMIC_IV_NOTE}


def test_a_clif_folder_is_the_sites_own_data_unless_said_otherwise(
    tmp_path, clif_demo_dir, settings
):
    assert clif_default_data_source(None) == CLIF_DEMO
    assert clif_default_data_source(clif_demo_dir) == CLIF_DEMO
    assert clif_default_data_source(tmp_path) == SITE
    settings.REALICU_IMPORT_ROOTS = [str(tmp_path)]
    folder = tmp_path / "clif"
    folder.mkdir()
    admin = make_user(staff=True)
    site = import_run_create(source=Source.CLIF, path=str(folder), user=admin)
    assert list(site.data_sources.values_list("key", flat=True)) == [SITE]
    demo = import_run_create(source=Source.CLIF, path="", user=admin)
    assert list(demo.data_sources.values_list("key", flat=True)) == [CLIF_DEMO]
    mimic_export = import_run_create(
        source=Source.CLIF, path=str(folder), user=admin, data_source=MIMIC_IV
    )
    assert list(mimic_export.data_sources.values_list("key", flat=True)) == [MIMIC_IV]
    with pytest.raises(ValidationError):
        import_run_create(
            source=Source.CLIF, path=str(folder), user=admin, data_source="nope"
        )
    assert ImportRun.objects.count() == 3


def test_a_stay_no_import_linked_takes_its_sources_catalogue_entry():
    clif = make_stay()
    mimic = make_stay(
        admission=make_admission(patient=make_patient(source=Source.MIMIC))
    )
    assert data_use_of_stays(Stay.objects.filter(pk=clif.pk)).keys == [CLIF_DEMO]
    assert data_use_of_stays(Stay.objects.filter(pk=mimic.pk)).keys == [MIMIC_IV]


def test_a_campaign_takes_the_strictest_terms_of_its_stays():
    from windows.windowing import windows_build

    admin = make_user()
    demo, mimic, site = make_stay(hours=4), make_stay(hours=4), make_stay(hours=4)
    stays_link(stay_ids=[mimic.pk], keys=[MIMIC_IV])
    stays_link(stay_ids=[site.pk], keys=[SITE])
    for stay in (demo, mimic, site):
        windows_build(stay=stay)
    campaign = Campaign.objects.create(name="mixed", created_by=admin)

    def add(stay):
        CampaignWindow.objects.create(
            campaign=campaign, window=Window.objects.filter(stay=stay).first()
        )

    add(demo)
    assert data_use_of(campaign).terms == "open"
    add(mimic)
    assert data_use_of(campaign).terms == "credentialed"
    add(site)
    data_use = data_use_of(campaign)
    assert data_use.terms == "restricted"
    assert data_use.keys == [SITE, MIMIC_IV, CLIF_DEMO]
