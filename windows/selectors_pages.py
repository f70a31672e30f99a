"""Reads composed for one page or one JSON answer each: the imports page (runs,
latest builds), an import's progress row, and what a stay's tracks JSON is
about (read once per request for both its ETag and its body); and the
paginator of the event tables, which reads a late page from the end."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import Http404

from windows.import_batches import import_runs_check
from windows.models import ImportRun
from windows.selectors import (
    build_run_latest,
    import_run_get,
    import_run_list,
    stay_get,
    stay_tracks_version,
    stay_window_marks,
)

IMPORT_RUNS_PER_PAGE = 25


class EndPaginator(Paginator):
    """A Paginator that reads a page in the second half from the end: the
    reversed ordering with a small OFFSET, turned back. The database then
    sorts only the rows from the page to the end (a top-N sort in memory)
    instead of every row before the page: the last page of an 1,800 h
    stay's events (OFFSET 44,500) sorted 44,516 rows on disk, 100-200 ms of
    PostgreSQL's time. ``object_list`` is a QuerySet ordered totally (its
    ordering ends with a unique field, as ``("time", "id")``), so the
    reversed ordering is the same rows backwards."""

    def page(self, number):
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        if bottom <= self.count // 2:
            return self._get_page(self.object_list[bottom:top], number, self)
        rows = list(self.object_list.reverse()[self.count - top : self.count - bottom])
        rows.reverse()
        return self._get_page(rows, number, self)


def import_list_page(*, user, page_number) -> dict:
    """One page of the user's import runs, each open one checked by the reaper
    first (``import_runs_check``), and the latest tracks and windows builds."""
    runs = import_run_list(user=user)
    page = Paginator(runs, IMPORT_RUNS_PER_PAGE).get_page(page_number)
    import_runs_check(page)
    builds = build_run_latest(user=user)
    return {
        "page": page,
        "builds": builds,
        "builds_open": any(
            b["progress"]["state"] in ("queued", "running") for b in builds
        ),
    }


def import_run_progress_get(*, user, import_run_id: int) -> ImportRun:
    """The import run, checked by the reaper if open; Http404 for another id."""
    run = import_run_get(user=user, import_run_id=import_run_id)
    if run is None:
        raise Http404("No such import.")
    import_runs_check([run])
    return run


def stay_tracks_request(*, user, stay_id: int, window_index: str | None) -> dict:
    """The stay (Http404 for one the user may not see), its window marks, the
    window ``window_index`` names (Http404 for none; None when not asked) and
    its tracks' version (``stay_tracks_version``)."""
    stay = stay_get(user=user, stay_id=stay_id)
    if stay is None:
        raise Http404("No such ICU stay.")
    windows = stay_window_marks(stay=stay)
    current = None
    if window_index is not None:
        current = next((w for w in windows if str(w["index"]) == window_index), None)
        if current is None:
            raise Http404("No such window.")
    return {
        "stay": stay,
        "windows": windows,
        "current": current,
        "version": stay_tracks_version(stay=stay),
    }
