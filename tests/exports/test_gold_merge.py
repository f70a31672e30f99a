"""A merge decided in adjudication reaches the Gold release as one item: the
chosen wording once, the union of the merged items' evidence, the physicians'
wordings kept as its paraphrases (issue 13, point 4)."""

import json

import pytest

from annotation.services import adjudication_decide
from annotation.services.adjudication import adjudication_merge
from exports.building import release_build
from exports.models import ReleaseKind
from exports.services import release_create
from tests.annotation.conftest import clinical, physicians, stay  # noqa: F401
from tests.annotation.workspace_data import cluster_of, hand_built_window


@pytest.fixture
def merged(admin_user, physicians, stay, clinical):  # noqa: F811
    """The hand-built window with its two lactate problems merged and its one
    other dispute (the one-sided ventilator rating) accepted: nothing open."""
    campaign, window = hand_built_window(
        admin=admin_user, physicians=physicians, stay=stay, clinical=clinical
    )
    adjudication_merge(
        admin=admin_user,
        campaign=campaign,
        window=window,
        task="acute_problems",
        item_refs=[
            cluster_of(campaign, window, "Hyperlactatemia")["id"],
            cluster_of(campaign, window, "Elevated lactate")["id"],
        ],
        new_text="Hyperlactatemia",
        reason="Same finding",
    )
    ventilator = cluster_of(
        campaign,
        window,
        "Invasive mechanical ventilation (Ventilator)",
        "recommended_actions",
    )
    adjudication_decide(
        admin=admin_user,
        campaign=campaign,
        window=window,
        task="recommended_actions",
        item_ref=ventilator["id"],
        action="accept",
        reason="Indicated",
    )
    return campaign, window


def test_gold_release_holds_a_merged_item_once_with_the_chosen_wording(
    admin_user,
    merged,
    clinical,
    release_dirs,  # noqa: F811
):
    campaign, window = merged
    release = release_build(
        release=release_create(
            user=admin_user, kind=ReleaseKind.GOLD, campaign=campaign
        )
    )

    with open(release_dirs / release.directory / "windows.jsonl") as handle:
        records = [json.loads(line) for line in handle]
    record = next(r for r in records if r["window_id"] == window.pk)
    problems = record["labels"]["acute_problems"]
    assert [p["text"] for p in problems] == ["Septic shock", "Hyperlactatemia"]
    lactate = problems[1]
    assert lactate["evidence"] == sorted(
        [clinical["lactate"].pk, clinical["heart_rate"].pk]
    )
    assert lactate["provenance"]["source"] == "adjudicated"
    assert lactate["provenance"]["texts"] == ["Elevated lactate", "Hyperlactatemia"]
    assert len(lactate["provenance"]["raters"]) == 2
    assert "Elevated lactate" not in [p["text"] for p in problems]
