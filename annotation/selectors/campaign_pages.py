"""Reads that gather what one of the admin's campaign pages, or a form posted
from it, needs: each view calls one of these, and they call the scoped
selectors of ``annotation.selectors``."""

from __future__ import annotations

from annotation.selectors import (
    CAMPAIGN_WINDOW_FILTERS,
    campaign_assignment_get,
    campaign_get_for_admin,
    campaign_progress,
    campaign_window_get,
    campaign_window_page_number,
    campaign_windows_page,
    physicians_all,
)


def campaign_page(
    *, admin, campaign_id, page, show: str, progress: bool = True
) -> dict:
    """What the campaign page shows: the campaign, one page of its windows
    under the filter ``show`` ("all" for an unknown one), every physician (to
    add or reassign), and unless ``progress`` is false (the windows' partial)
    the campaign's progress. Http404 for another id or a non-admin."""
    campaign = campaign_get_for_admin(admin=admin, campaign_id=campaign_id)
    if show not in CAMPAIGN_WINDOW_FILTERS:
        show = "all"
    return {
        "campaign": campaign,
        "show": show,
        "page": campaign_windows_page(
            admin=admin, campaign=campaign, page=page, show=show
        ),
        "physicians": list(physicians_all()),
        "progress": (
            campaign_progress(admin=admin, campaign=campaign) if progress else None
        ),
    }


def _physician(physician_id):
    if physician_id is None:
        return None
    return physicians_all().filter(pk=physician_id).first()


def _target(*, admin, campaign, window_id, physician_id, **found) -> dict:
    """What a form posted from the campaign page acts on, the physician it
    names, and the page to return to."""
    return {
        "campaign": campaign,
        **found,
        "physician": _physician(physician_id),
        "page_number": campaign_window_page_number(
            admin=admin, campaign=campaign, window_id=window_id
        ),
    }


def assignment_add_page(*, admin, campaign_id, window_id, physician_id) -> dict:
    """The campaign, its window a physician is to be added to, that physician
    (None when ``physician_id`` names no active physician), and the page of
    the campaign's windows that shows the window. Http404 for another
    campaign or window, or a non-admin."""
    campaign = campaign_get_for_admin(admin=admin, campaign_id=campaign_id)
    window = campaign_window_get(admin=admin, campaign=campaign, window_id=window_id)
    return _target(
        admin=admin,
        campaign=campaign,
        window_id=window.pk,
        physician_id=physician_id,
        window=window,
    )


def assignment_reassign_page(
    *, admin, campaign_id, assignment_id, physician_id
) -> dict:
    """The campaign, its assignment to hand over, the physician to take it
    (None when ``physician_id`` names no active physician), and the page of
    the campaign's windows that shows the assignment's window. Http404 for
    another campaign or assignment, or a non-admin."""
    campaign = campaign_get_for_admin(admin=admin, campaign_id=campaign_id)
    assignment = campaign_assignment_get(
        admin=admin, campaign=campaign, assignment_id=assignment_id
    )
    return _target(
        admin=admin,
        campaign=campaign,
        window_id=assignment.window_id,
        physician_id=physician_id,
        assignment=assignment,
    )
