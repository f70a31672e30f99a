"""Windows that labels refer to keep their bounds: a rebuild with other window
settings is refused for them, and nothing is changed."""

import pytest
from django.core.exceptions import ValidationError

from annotation.services import campaign_create
from tests.factories import make_stay, make_user
from windows.models import Window
from windows.windowing import windows_build, windows_build_many

pytestmark = pytest.mark.django_db


def bounds_of(stay) -> list[tuple]:
    return list(
        Window.objects.filter(stay=stay).order_by("index").values_list("start", "end")
    )


@pytest.fixture
def labelled_stay():
    stay = make_stay(hours=24)
    windows_build(stay=stay, window_minutes=30, stride_hours=2)
    Window.objects.filter(stay=stay, index=3).update(sampled_gold=True)
    admin = make_user(role="admin", staff=True)
    physicians = [make_user(role="physician") for _ in range(2)]
    campaign_create(
        admin=admin,
        name="guard",
        windows=[Window.objects.get(stay=stay, index=3)],
        physicians=physicians,
    )
    return stay


def test_rebuilding_a_labelled_stay_with_other_settings_is_refused_and_changes_nothing(
    labelled_stay,
):
    before = bounds_of(labelled_stay)
    with pytest.raises(ValidationError, match=r"windows 3 are in a campaign"):
        windows_build(stay=labelled_stay, window_minutes=30, stride_hours=1)
    assert bounds_of(labelled_stay) == before


def test_rebuilding_with_the_same_settings_still_refreshes_counts(labelled_stay):
    Window.objects.filter(stay=labelled_stay).update(event_count=99)
    windows_build(stay=labelled_stay, window_minutes=30, stride_hours=2)
    assert set(
        Window.objects.filter(stay=labelled_stay).values_list("event_count", flat=True)
    ) == {0}


def test_a_batch_rebuild_is_checked_before_any_stay_is_written(labelled_stay):
    free = make_stay(hours=24)
    windows_build(stay=free, window_minutes=30, stride_hours=2)
    free_before = bounds_of(free)
    with pytest.raises(ValidationError):
        windows_build_many(stays=[free, labelled_stay], seed=0, stride_hours=1)
    assert bounds_of(free) == free_before


def test_unlabelled_stays_rebuild_freely():
    stay = make_stay(hours=24)
    windows_build(stay=stay, window_minutes=30, stride_hours=2)
    windows_build(stay=stay, window_minutes=30, stride_hours=1)
    assert len(bounds_of(stay)) > 12
