"""The calibration judging page's read: the set the id names (Http404 for one
the user may not see) and the next pair the user has to judge."""

from __future__ import annotations

from annotation.calibration_judging import calibration_next_pair, calibration_set_get


def calibration_judge_page(*, user, set_id) -> dict:
    """``{calibration_set, pair, judged, total}`` (``calibration_next_pair``)."""
    calibration_set = calibration_set_get(user=user, set_id=set_id)
    return {
        "calibration_set": calibration_set,
        **calibration_next_pair(user=user, calibration_set=calibration_set),
    }
