"""Campaign creation: balanced assignment in which every pair of physicians shares
windows; a third rater; reassigning an abandoned window."""

from collections import Counter
from itertools import combinations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from accounts.roles import Role
from annotation.assigning import balanced_rater_sets, round_robin_pairs
from annotation.models import Assignment, AssignmentState, CampaignPhysician
from annotation.selectors import campaign_progress, physician_queue
from annotation.services import (
    assignment_add,
    assignment_reassign,
    campaign_create,
)
from tests.factories import make_admission, make_stay
from windows.windowing import windows_build

from .conftest import make_gold_windows, make_role_user
from .helpers import draft_as, written_state


def _loads_and_pairs(campaign):
    rows = list(
        Assignment.objects.filter(campaign=campaign, active=True).values_list(
            "window_id", "annotator_id"
        )
    )
    loads = Counter(user for _, user in rows)
    by_window: dict = {}
    for window, user in rows:
        by_window.setdefault(window, []).append(user)
    shared = Counter(
        pair for users in by_window.values() for pair in combinations(sorted(users), 2)
    )
    return loads, shared, by_window


def test_four_physicians_24_windows_two_per_window_balanced_and_all_pairs_share(db):
    admin = make_role_user(Role.ADMIN)
    doctors = [make_role_user(Role.PHYSICIAN) for _ in range(4)]
    windows = make_gold_windows(stay=make_stay(admission=make_admission(), hours=48))
    assert len(windows) == 24

    campaign = campaign_create(
        admin=admin, name="Gold", windows=windows, physicians=doctors
    )

    loads, shared, by_window = _loads_and_pairs(campaign)
    assert sorted(loads.values()) == [12, 12, 12, 12]
    assert all(len(set(users)) == 2 for users in by_window.values())
    assert len(by_window) == 24
    for a, b in combinations(sorted(d.pk for d in doctors), 2):
        assert shared[(a, b)] >= 1, (a, b)
    assert (
        campaign_progress(admin=admin, campaign=campaign)["pairs_without_shared_window"]
        == []
    )


@pytest.mark.parametrize(
    "physicians,windows,per_window",
    [(5, 10, 2), (6, 15, 2), (7, 30, 2), (5, 13, 3), (9, 40, 3), (3, 7, 1), (6, 11, 2)],
)
def test_rater_sets_keep_loads_within_one_after_every_window(
    physicians, windows, per_window
):
    sets = balanced_rater_sets(
        physicians=physicians, windows=windows, per_window=per_window
    )
    load = Counter()
    for raters in sets:
        assert len(set(raters)) == per_window
        load.update(raters)
        values = [load[p] for p in range(physicians)]
        assert max(values) - min(values) <= 1


@pytest.mark.parametrize("physicians", range(2, 12))
def test_two_raters_cover_every_pair_in_the_fewest_windows(physicians):
    pairs = physicians * (physicians - 1) // 2
    sets = balanced_rater_sets(physicians=physicians, windows=pairs, per_window=2)
    assert sorted(sets) == sorted(combinations(range(physicians), 2))
    assert sorted(round_robin_pairs(physicians)) == sorted(
        combinations(range(physicians), 2)
    )


def test_assignment_is_deterministic(db):
    assert balanced_rater_sets(physicians=5, windows=20, per_window=3) == (
        balanced_rater_sets(physicians=5, windows=20, per_window=3)
    )
    admin = make_role_user(Role.ADMIN)
    doctors = [make_role_user(Role.PHYSICIAN) for _ in range(3)]
    windows = make_gold_windows(stay=make_stay(admission=make_admission(), hours=20))
    first = campaign_create(admin=admin, name="A", windows=windows, physicians=doctors)
    second = campaign_create(
        admin=admin,
        name="B",
        windows=list(reversed(windows)),
        physicians=list(reversed(doctors)),
    )
    rows = lambda c: sorted(c.assignments.values_list("window_id", "annotator_id"))
    assert rows(first) == rows(second)


def test_queue_keeps_a_stays_windows_together_in_index_order(db):
    admin = make_role_user(Role.ADMIN)
    doctors = [make_role_user(Role.PHYSICIAN) for _ in range(2)]
    stays = [make_stay(admission=make_admission(), hours=8) for _ in range(2)]
    windows = make_gold_windows(stay=stays[1]) + make_gold_windows(stay=stays[0])
    campaign_create(admin=admin, name="G", windows=windows, physicians=doctors)

    queue = physician_queue(user=doctors[0])

    keys = [(a.window.stay_id, a.window.index) for a in queue.assignments]
    assert keys == sorted(keys)
    assert queue.total == len(windows)
    assert queue.counts == {"todo": len(windows), "draft": 0, "submitted": 0}
    assert queue.next_after(None) == queue.assignments[0]
    assert queue.next_after(queue.assignments[0].pk) == queue.assignments[1]


@pytest.mark.parametrize(
    "case,message",
    [
        ("not_admin", "Only an admin can create a campaign."),
        ("not_physician", "Only physicians can be assigned windows"),
        ("not_gold", "Only sampled Gold windows can be labelled"),
        ("too_few", "2 annotators per window need at least 2 physicians; 1 chosen."),
        ("no_name", "Give the campaign a name."),
        ("no_windows", "Choose at least one window for the campaign."),
    ],
)
def test_campaign_create_refuses_bad_input_and_writes_nothing(db, case, message):
    admin = make_role_user(Role.ADMIN)
    doctors = [make_role_user(Role.PHYSICIAN) for _ in range(2)]
    stay = make_stay(admission=make_admission(), hours=8)
    windows = make_gold_windows(stay=stay)
    kwargs = {"admin": admin, "name": "G", "windows": windows, "physicians": doctors}
    if case == "not_admin":
        kwargs["admin"] = doctors[0]
    elif case == "not_physician":
        kwargs["physicians"] = [doctors[0], make_role_user(Role.RESEARCHER)]
    elif case == "not_gold":
        kwargs["windows"] = windows_build(
            stay=make_stay(admission=make_admission(), hours=4)
        )
    elif case == "too_few":
        kwargs["physicians"] = doctors[:1]
    elif case == "no_name":
        kwargs["name"] = "  "
    elif case == "no_windows":
        kwargs["windows"] = []
    error = PermissionDenied if case == "not_admin" else ValidationError
    with pytest.raises(error) as excinfo:
        campaign_create(**kwargs)
    assert message in str(excinfo.value)
    assert Assignment.objects.count() == 0
    assert CampaignPhysician.objects.count() == 0


def test_admin_adds_a_third_rater_to_a_window(campaign, admin_user, gold_windows):
    third = make_role_user(Role.PHYSICIAN)
    window = gold_windows[0]

    added = assignment_add(
        admin=admin_user, window=window, campaign=campaign, physician=third
    )

    assert added.state == AssignmentState.TODO
    assert added.assigned_by == admin_user
    assert campaign.assignments.filter(window=window, active=True).count() == 3
    assert CampaignPhysician.objects.filter(campaign=campaign, user=third).exists()
    assert [a.pk for a in physician_queue(user=third).assignments] == [added.pk]


def test_adding_a_physician_already_on_the_window_is_refused(
    campaign, admin_user, physicians, gold_windows
):
    before = written_state()
    with pytest.raises(ValidationError) as excinfo:
        assignment_add(
            admin=admin_user,
            window=gold_windows[0],
            campaign=campaign,
            physician=physicians[0],
        )
    assert "is already assigned" in excinfo.value.messages[0]
    assert written_state() == before


def test_adding_a_window_outside_the_campaign_is_refused(
    campaign, admin_user, physicians
):
    other = make_gold_windows(stay=make_stay(admission=make_admission(), hours=4))[0]
    with pytest.raises(ValidationError) as excinfo:
        assignment_add(
            admin=admin_user,
            window=other,
            campaign=campaign,
            physician=make_role_user(Role.PHYSICIAN),
        )
    assert "is not part of the campaign" in excinfo.value.messages[0]


def test_physician_cannot_add_raters(campaign, physicians, gold_windows):
    before = written_state()
    with pytest.raises(PermissionDenied, match="Only an admin can assign windows."):
        assignment_add(
            admin=physicians[0],
            window=gold_windows[0],
            campaign=campaign,
            physician=make_role_user(Role.PHYSICIAN),
        )
    assert written_state() == before


def test_reassigning_an_abandoned_window_gives_the_new_physician_an_empty_form(
    campaign, admin_user, physicians, assignment
):
    draft_as(physicians[0], assignment, {"status": "stable"})
    newcomer = make_role_user(Role.PHYSICIAN)

    new = assignment_reassign(
        admin=admin_user, assignment=assignment, physician=newcomer
    )

    assignment.refresh_from_db()
    assert not assignment.active and assignment.deactivated_at is not None
    assert new.reassigned_from == assignment
    assert new.annotator == newcomer and new.state == AssignmentState.TODO
    assert not hasattr(new, "label") or new.label is None
    # the old draft is kept, the old physician no longer sees the window
    assert assignment.label.status == "stable"
    assert assignment not in physician_queue(user=physicians[0]).assignments
    with pytest.raises(PermissionDenied, match="reassigned to another physician"):
        draft_as(physicians[0], assignment, {"status": "improving"}, version=1)
    assignment.label.refresh_from_db()
    assert assignment.label.status == "stable" and assignment.label.version == 1


@pytest.mark.usefixtures("submitted")
def test_reassigning_a_submitted_window_is_refused(campaign, admin_user, assignment):
    before = written_state()
    with pytest.raises(ValidationError) as excinfo:
        assignment_reassign(
            admin=admin_user,
            assignment=assignment,
            physician=make_role_user(Role.PHYSICIAN),
        )
    assert "already submitted; add another physician" in excinfo.value.messages[0]
    assert written_state() == before


def test_reassigning_to_the_co_rater_is_refused(
    campaign, admin_user, physicians, assignment
):
    before = written_state()
    with pytest.raises(ValidationError) as excinfo:
        assignment_reassign(
            admin=admin_user, assignment=assignment, physician=physicians[1]
        )
    assert "is already assigned this window" in excinfo.value.messages[0]
    assert written_state() == before


def test_progress_counts_states_per_physician(
    campaign, admin_user, physicians, assignment
):
    draft_as(physicians[0], assignment, {})

    progress = campaign_progress(admin=admin_user, campaign=campaign)

    by_name = {p["username"]: p for p in progress["physicians"]}
    first = by_name[physicians[0].username]
    assert (first["todo"], first["draft"], first["submitted"], first["total"]) == (
        2,
        1,
        0,
        3,
    )
    assert progress["totals"] == {"todo": 5, "draft": 1, "submitted": 0, "total": 6}
    assert progress["windows"] == 3 and progress["windows_complete"] == 0
    with pytest.raises(PermissionDenied):
        campaign_progress(admin=physicians[0], campaign=campaign)


def test_queue_and_progress_reads_take_a_fixed_number_of_queries(
    django_assert_max_num_queries, admin_user, physicians, campaign, assignment
):
    draft_as(physicians[0], assignment, {})
    physicians[0].refresh_from_db()  # drop the cached roles
    with django_assert_max_num_queries(3):
        queue = physician_queue(user=physicians[0])
        states = [
            (a.state, a.label.version if a.state != "todo" else None)
            for a in queue.assignments
        ]
    assert states[0] == ("draft", 1)
    with django_assert_max_num_queries(6):
        campaign_progress(admin=admin_user, campaign=campaign)
