"""The adjudication workspace (issue 13, point 4) on a hand-built window: a
merge of items that mean the same thing into one chosen wording, through the
service and the page (one Gold item with the union of the evidence, the
decision append-only with its author, reason and merged items; every bad
input refused with a message and nothing written), and the page naming each
item's evidence events, each recorded action's ratings per physician with the
disagreements marked, and the consensus status evidence."""

import re

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from accounts.roles import Role
from annotation.models import AdjudicationDecision, ConsensusTask
from annotation.services import adjudication_decide
from annotation.services.adjudication import adjudication_merge

from .conftest import make_gold_windows, make_role_user
from .consensus_data import consensus_of
from .helpers import accept_items
from .workspace_data import cluster_of

PROBLEMS = ConsensusTask.ACUTE_PROBLEMS
HTMX = {"HTTP_HX_REQUEST": "true"}


def _lactate_refs(campaign, window) -> list[str]:
    return [
        cluster_of(campaign, window, "Hyperlactatemia")["id"],
        cluster_of(campaign, window, "Elevated lactate")["id"],
    ]


def _snapshot(campaign, window) -> tuple:
    consensus = consensus_of(campaign, window)
    return (
        AdjudicationDecision.objects.count(),
        consensus.items,
        consensus.open_disputes,
        consensus.status_evidence,
    )


# The service --------------------------------------------------------------------


def _merge(admin, campaign, window, item_refs, new_text, reason, task=PROBLEMS):
    return adjudication_merge(
        admin=admin,
        campaign=campaign,
        window=window,
        task=task,
        item_refs=item_refs,
        new_text=new_text,
        reason=reason,
    )


def test_hand_built_window_keeps_both_lactate_problems_apart_until_merged(built):
    campaign, window = built
    consensus = consensus_of(campaign, window)

    assert [i["text"] for i in consensus.items[PROBLEMS]] == ["Septic shock"]
    open_texts = [d["texts"] for d in consensus.open_disputes if d["task"] == PROBLEMS]
    assert open_texts == [["Hyperlactatemia"], ["Elevated lactate"]]


def test_merge_leaves_one_item_with_the_chosen_wording_and_the_union_of_evidence(
    built, admin_user, clinical
):
    campaign, window = built
    refs = _lactate_refs(campaign, window)
    c = clinical

    decision = _merge(
        admin_user,
        campaign,
        window,
        refs,
        "Hyperlactatemia",
        "Same finding: lactate 4.2 mmol/L",
    )

    consensus = consensus_of(campaign, window)
    problems = consensus.items[PROBLEMS]
    assert [i["text"] for i in problems] == ["Septic shock", "Hyperlactatemia"]
    merged = problems[1]
    assert merged["evidence"] == sorted([c["lactate"].pk, c["heart_rate"].pk])
    assert merged["texts"] == ["Hyperlactatemia", "Elevated lactate"]
    assert merged["source"] == "adjudicated"
    assert merged["decision_id"] == decision.pk
    assert len(merged["annotators"]) == 2
    # The two lactate disputes are settled by the merge; the ventilator is left.
    assert [d["task"] for d in consensus.open_disputes] == ["recommended_actions"]

    decision.refresh_from_db()
    assert decision.action == "merge"
    assert decision.new_text == "Hyperlactatemia"
    assert decision.author == admin_user and decision.created_at
    assert decision.reason == "Same finding: lactate 4.2 mmol/L"
    assert decision.context["merged"] == refs
    assert decision.context["texts"] == ["Hyperlactatemia", "Elevated lactate"]
    assert len(decision.context["items"]) == 2


def test_merge_rewords_the_matched_items_of_one_cluster(built, admin_user, clinical):
    campaign, window = built
    shock = cluster_of(campaign, window, "Septic shock")

    _merge(
        admin_user,
        campaign,
        window,
        [shock["id"]],
        "Septic shock on norepinephrine",
        "One wording for both",
    )

    problems = consensus_of(campaign, window).items[PROBLEMS]
    assert problems[0]["text"] == "Septic shock on norepinephrine"
    assert problems[0]["texts"] == ["Septic shock", "Shock due to sepsis"]
    assert problems[0]["evidence"] == sorted(
        [clinical["lactate"].pk, clinical["norepinephrine"].pk]
    )
    assert len(problems) == 1


def test_merge_of_accepted_items_replaces_both_in_theconsensus_of(built, admin_user):
    campaign, window = built
    refs = _lactate_refs(campaign, window)
    accept_items(admin_user, campaign, window, refs, "Seen")
    texts = [i["text"] for i in consensus_of(campaign, window).items[PROBLEMS]]
    assert texts == ["Septic shock", "Hyperlactatemia", "Elevated lactate"]

    _merge(admin_user, campaign, window, refs, "Elevated lactate", "One finding")

    texts = [i["text"] for i in consensus_of(campaign, window).items[PROBLEMS]]
    assert texts == ["Septic shock", "Elevated lactate"]
    # Append-only: the accepts are still on record, the merge after them.
    actions = list(
        AdjudicationDecision.objects.filter(window=window).values_list(
            "action", flat=True
        )
    )
    assert actions == ["accept", "accept", "merge"]


def _bad_inputs(campaign, window, other_window):
    refs = _lactate_refs(campaign, window)
    flag = cluster_of(campaign, window, "Avoid fluid overload", "red_flags")["id"]
    base = {
        "task": PROBLEMS,
        "item_refs": refs,
        "new_text": "Hyperlactatemia",
        "reason": "Same finding",
    }
    return {
        "a single item": (
            {**base, "item_refs": refs[:1]},
            "is a single item",
        ),
        "empty reason": ({**base, "reason": "  "}, "Give a reason"),
        "empty wording": ({**base, "new_text": ""}, "Give the wording"),
        "wording too long": ({**base, "new_text": "x" * 301}, "the limit is 300"),
        "no item": ({**base, "item_refs": []}, "Choose the items"),
        "an item of another task": (
            {**base, "item_refs": [refs[0], flag]},
            "is an item of red flags, not of acute problems",
        ),
        "an item of another window": (
            {**base, "item_refs": [refs[0], f"{other_window.pk}999/acute_problems/0"]},
            "merge items of this window only",
        ),
        "the status": ({**base, "task": "status"}, "not 'status'"),
    }


BAD = [
    "a single item",
    "empty reason",
    "empty wording",
    "wording too long",
    "no item",
    "an item of another task",
    "an item of another window",
    "the status",
]


@pytest.mark.parametrize("case", BAD)
def test_bad_merge_is_refused_with_a_message_and_changes_nothing(
    built, admin_user, stay, case
):
    campaign, window = built
    other = make_gold_windows(stay=stay, count=2)[1]
    fields, message = _bad_inputs(campaign, window, other)[case]
    before = _snapshot(campaign, window)

    with pytest.raises(ValidationError, match=re.escape(message)):
        adjudication_merge(admin=admin_user, campaign=campaign, window=window, **fields)

    assert _snapshot(campaign, window) == before


def test_items_already_merged_are_not_merged_again(built, admin_user):
    campaign, window = built
    refs = _lactate_refs(campaign, window)
    fields = {
        "task": PROBLEMS,
        "item_refs": refs,
        "new_text": "Hyperlactatemia",
        "reason": "Same finding",
    }
    adjudication_merge(admin=admin_user, campaign=campaign, window=window, **fields)
    before = _snapshot(campaign, window)

    with pytest.raises(ValidationError, match="already merged by"):
        adjudication_merge(admin=admin_user, campaign=campaign, window=window, **fields)
    assert _snapshot(campaign, window) == before


def test_an_item_merged_into_another_cannot_be_accepted_after(built, admin_user):
    campaign, window = built
    refs = _lactate_refs(campaign, window)
    _merge(admin_user, campaign, window, refs, "Hyperlactatemia", "Same finding")
    before = _snapshot(campaign, window)

    with pytest.raises(ValidationError, match=r"already decided \(merge\)"):
        accept_items(admin_user, campaign, window, [refs[1]], "x")
    assert _snapshot(campaign, window) == before


def test_nothing_is_merged_in_a_dropped_window(built, admin_user):
    campaign, window = built
    adjudication_decide(
        admin=admin_user,
        campaign=campaign,
        window=window,
        task="window",
        item_ref="",
        action="drop_window",
        reason="Unusable",
    )
    before = _snapshot(campaign, window)

    with pytest.raises(ValidationError, match="was dropped; nothing is left to merge"):
        _merge(
            admin_user,
            campaign,
            window,
            _lactate_refs(campaign, window),
            "Hyperlactatemia",
            "Same finding",
        )
    assert _snapshot(campaign, window) == before


def test_a_merge_through_the_decide_form_is_refused(built, admin_user):
    campaign, window = built
    before = _snapshot(campaign, window)
    with pytest.raises(ValidationError, match="choose them in the merge form"):
        adjudication_decide(
            admin=admin_user,
            campaign=campaign,
            window=window,
            task=PROBLEMS,
            item_ref=_lactate_refs(campaign, window)[0],
            action="merge",
            reason="x",
        )
    assert _snapshot(campaign, window) == before


def test_a_physician_cannot_merge(built, physicians):
    campaign, window = built
    before = _snapshot(campaign, window)
    with pytest.raises(PermissionDenied):
        _merge(
            physicians[0],
            campaign,
            window,
            _lactate_refs(campaign, window),
            "Hyperlactatemia",
            "x",
        )
    assert _snapshot(campaign, window) == before


# The page -----------------------------------------------------------------------


def _url(name, campaign, window):
    return reverse(f"annotation:adjudication_{name}", args=[campaign.pk, window.pk])


def _cell(html: str, attribute: str) -> str:
    """The inner HTML of the first element carrying ``attribute``."""
    match = re.search(rf"<(\w+)[^>]*{attribute}[^>]*>(.*?)</\1>", html, re.S)
    assert match, attribute
    return match.group(2)


def test_page_names_each_item_s_evidence_events_with_time_and_value(
    admin_client, built, clinical
):
    campaign, window = built
    html = admin_client.get(_url("window", campaign, window)).content.decode()

    lactate = clinical["lactate"]
    assert "· 1 evidence" not in html and "evidence</span>" not in html
    row = html[
        html.index(
            f'data-cluster="{cluster_of(campaign, window, "Hyperlactatemia")["id"]}"'
        ) :
    ]
    row = row[: row.index("</tr>")]
    assert f'data-event-id="{lactate.pk}"' in row
    assert "Lactate" in row and "4.2 mmol/L" in row
    assert lactate.time.strftime("%H:%M") in row


def test_page_shows_the_consensus_status_evidence_and_each_physician_s(
    admin_client, built, clinical
):
    campaign, window = built
    html = admin_client.get(_url("window", campaign, window)).content.decode()

    consensus_cell = _cell(html, "data-consensus-status-evidence")
    for name in ("lactate", "norepinephrine", "heart_rate"):
        assert f'data-event-id="{clinical[name].pk}"' in consensus_cell, name
    a_cell = _cell(html, 'data-status-evidence="A"')
    assert f'data-event-id="{clinical["lactate"].pk}"' in a_cell
    assert f'data-event-id="{clinical["norepinephrine"].pk}"' not in a_cell


def test_page_shows_each_action_s_ratings_side_by_side_and_marks_disagreements(
    admin_client, built, clinical
):
    campaign, window = built
    html = admin_client.get(_url("window", campaign, window)).content.decode()

    for name, ratings in (
        ("norepinephrine", ["best_practice", "acceptable"]),
        ("intubation", ["acceptable", "potentially_harmful"]),
    ):
        start = html.index(f'data-rated-event="{clinical[name].pk}"')
        row = html[start : html.index("</tr>", start)]
        assert "data-disagree" in row, name
        assert re.findall(r'data-rating="(\w*)"', row) == ratings
    assert "Best practice" in html and "Potentially harmful" in html
    assert "2 differ" in html
    # In the recommended actions, the physician whose rating recommends
    # nothing is shown with it, not as a blank.
    row = html[
        html.index("data-cluster=", html.index('data-task="recommended_actions"')) :
    ]
    vent = row[row.index("Invasive mechanical ventilation") :]
    vent = vent[: vent.index("</tr>")]
    assert re.findall(r"data-cell-rating>([^<]+)<", vent) == [
        "Acceptable",
        "— rated potentially harmful",
    ]


def test_page_merge_records_one_item_and_shows_it(admin_client, built, admin_user):
    campaign, window = built
    refs = _lactate_refs(campaign, window)

    response = admin_client.post(
        _url("merge", campaign, window),
        {
            "task": PROBLEMS,
            "item_ref": refs,
            "new_text": "Hyperlactatemia",
            "reason": "Same finding",
        },
        **HTMX,
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert "Recorded: merged into “Hyperlactatemia”" in html
    assert html.count('data-decision="merge"') == 2  # both rows show it
    decision = AdjudicationDecision.objects.get(window=window)
    assert decision.action == "merge" and decision.author == admin_user
    assert [i["text"] for i in consensus_of(campaign, window).items[PROBLEMS]] == [
        "Septic shock",
        "Hyperlactatemia",
    ]


def test_page_refuses_a_merge_without_a_reason_and_keeps_what_was_typed(
    admin_client, built
):
    campaign, window = built
    refs = _lactate_refs(campaign, window)
    before = _snapshot(campaign, window)

    response = admin_client.post(
        _url("merge", campaign, window),
        {"task": PROBLEMS, "item_ref": refs, "new_text": "Lactic acidosis"},
        **HTMX,
    )

    html = response.content.decode()
    assert "Give a reason for the merge" in html
    assert 'value="Lactic acidosis"' in html
    checked = re.findall(r'value="([^"]+)" data-merge-key="\d+" checked', html)
    assert checked == refs
    assert _snapshot(campaign, window) == before


@pytest.mark.parametrize("role", [Role.PHYSICIAN, Role.RESEARCHER])
def test_merge_route_is_403_for_physicians_and_researchers(client, built, role):
    campaign, window = built
    before = _snapshot(campaign, window)
    client.force_login(make_role_user(role))
    response = client.post(
        _url("merge", campaign, window),
        {
            "task": PROBLEMS,
            "item_ref": _lactate_refs(campaign, window),
            "new_text": "Hyperlactatemia",
            "reason": "x",
        },
    )
    assert response.status_code == 403
    assert _snapshot(campaign, window) == before
