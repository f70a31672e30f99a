"""What the calibration tests share: the six hand-set cosines and their
judgments (COSINES, SAME), a set drawn from labels (``draw_pairs``), an outside
judge, and ``judged_set``, the six pairs judged by two physicians. Fixtures: a
module takes them with ``from .calibration_data import ...``."""

import pytest

from accounts.roles import Role
from annotation.calibration import calibration_invite, calibration_set_draw
from annotation.calibration_judging import calibration_judge
from annotation.models import CalibrationPair, CalibrationSet

from .conftest import make_role_user

COSINES = [0.9, 0.7, 0.55, 0.45, 0.35, 0.2]
SAME = [True, True, False, True, False, False]


def draw_pairs(admin, name, campaigns, matcher, **options):
    return calibration_set_draw(
        admin=admin, name=name, campaigns=campaigns, matcher=matcher, **options
    )


@pytest.fixture
def judge(db):
    """A physician who rates no window: every window may give them items."""
    return make_role_user(Role.PHYSICIAN)


@pytest.fixture
def judged_set(labelled, admin_user, physicians, matcher):
    """Six pairs with the fixed cosines above; physician 0 judges them as SAME,
    physician 1 agrees except on the last pair, and a seventh pair is tied."""
    calibration_set = CalibrationSet.objects.create(
        name="Hand",
        model_name=matcher.model_name,
        tau_at_draw=0.5,
        band=0.15,
        created_by=admin_user,
    )
    calibration_set.campaigns.set([labelled])
    calibration_invite(
        admin=admin_user, calibration_set=calibration_set, judges=physicians
    )
    pairs = [
        CalibrationPair.objects.create(
            calibration_set=calibration_set,
            position=n,
            task="acute_problems",
            text_a=f"a{n}",
            text_b=f"b{n}",
            cosine=cosine,
            stratum="random",
        )
        for n, cosine in enumerate([*COSINES, 0.65])
    ]
    a, b = physicians
    for pair, same in zip(pairs, [*SAME, True]):
        calibration_judge(
            judge=a, calibration_set=calibration_set, pair_id=pair.pk, same=same
        )
    for pair, same in zip(pairs[:5], SAME[:5]):
        calibration_judge(
            judge=b, calibration_set=calibration_set, pair_id=pair.pk, same=same
        )
    calibration_judge(
        judge=b, calibration_set=calibration_set, pair_id=pairs[6].pk, same=False
    )
    return calibration_set
