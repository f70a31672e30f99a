"""Writing a release's files (spec section 8), one stay at a time so that memory
stays bounded by the largest stay, not by the release:

- ``windows.jsonl`` and ``windows.parquet``: one record per window (ids, start and
  end in hours since ICU admission, labels with evidence and provenance, the ids
  of the window's own recorded actions, which are the answer of Recommended
  Actions (spec section 2) and must be dropped from a model's context);
- ``context/<stay_id>.jsonl``: the stay's bedside events (spec section 1: events
  of the admission before the end of the stay's last released window, outcome-
  revealing events and records coded after discharge removed), from which the
  context of any window is the events with ``time`` before the window's ``end``;
  each event named by its concept (windows.vocabulary) beside its source label;
- ``manifest.json``, ``DATACARD.md`` and ``plots/*.svg`` (exports.svgplots).

Files go to a hidden folder that is renamed into place when complete and then
made read-only; a release's folder is never written again.

Modules: ``labels`` (the rows a release is made of and each window's labels as
released), ``stats`` (counts for the manifest and the data card), ``context``
(the per-stay context writer), ``records`` (windows.jsonl, windows.parquet and
the window rows), ``manifest`` (manifest, checksums, immutability) and ``build``
(the build job driver, ``release_build``).
"""

from exports.building.build import release_build, release_partial_remove
from exports.building.labels import (
    CodedRecords,
    _gold_labels,
    labels_without_coded,
    rater_pseudonym,
    release_label_rows,
)
from exports.building.manifest import (
    SCHEMA_VERSION,
    ReleaseFileChanged,
    file_sha256,
    json_safe,
    release_file_verify,
    release_folder,
)
from exports.building.records import release_files_write
from exports.building.stats import ReleaseStats

__all__ = [
    "SCHEMA_VERSION",
    "CodedRecords",
    "ReleaseFileChanged",
    "ReleaseStats",
    "_gold_labels",
    "file_sha256",
    "json_safe",
    "labels_without_coded",
    "rater_pseudonym",
    "release_build",
    "release_file_verify",
    "release_files_write",
    "release_folder",
    "release_label_rows",
    "release_partial_remove",
]
