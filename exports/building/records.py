"""A release's window records: ``windows.jsonl``, ``windows.parquet`` and their
rows in the database (committed in batches, ``exports.building.batches``),
written stay by stay beside each stay's context file."""

from __future__ import annotations

from functools import cache
from itertools import groupby
from pathlib import Path

from django.db.models import Count

from exports.building.batches import ReleaseRows
from exports.building.context import _dumps, _EventLines, _write_stay
from exports.building.labels import SET_TASKS, CodedRecords, release_label_rows
from exports.building.stats import ReleaseStats
from exports.models import Release

# Window records per Parquet row group, and per read of the label rows.
BATCH_ROWS = 2000


@cache
def parquet_schema():
    """The Arrow schema of ``windows.parquet``. Arrow is imported here, not by
    the module: web processes import this package (downloads verify a
    release's files) and must not load pyarrow for it."""
    import pyarrow as pa

    return pa.schema(
        [
            ("window_id", pa.int64()),
            ("stay_id", pa.int64()),
            ("patient_id", pa.string()),
            ("window_index", pa.int32()),
            ("start", pa.timestamp("us", tz="UTC")),
            ("end", pa.timestamp("us", tz="UTC")),
            ("start_hours", pa.float64()),
            ("end_hours", pa.float64()),
            ("hindsight_disease_group", pa.string()),
            ("context_file", pa.string()),
            ("window_action_event_ids", pa.list_(pa.int64())),
            ("window_companion_event_ids", pa.list_(pa.int64())),
            ("status", pa.string()),
            ("acute_problems", pa.list_(pa.string())),
            ("recommended_actions", pa.list_(pa.string())),
            ("red_flags", pa.list_(pa.string())),
            ("labels_json", pa.string()),
        ]
    )


class ParquetBatches:
    """Window records to Parquet, one row group per ``BATCH_ROWS`` records.

    The rows are handed to Arrow as JSON lines read with the explicit schema,
    not as Python objects: converting Python objects (``pa.array``,
    ``Table.from_pylist``) imports pandas, about as long as a small release's
    whole build (issue 20). The JSON reader parses the ISO 8601 times, with
    their offset, into the schema's UTC timestamps."""

    def __init__(self, path: Path) -> None:
        import pyarrow.parquet as pq

        self.writer = pq.ParquetWriter(path, parquet_schema(), compression="zstd")
        self.lines: list[str] = []

    def add(self, record: dict) -> None:
        labels = record["labels"]
        self.lines.append(
            _dumps(
                {
                    "window_id": record["window_id"],
                    "stay_id": record["stay_id"],
                    "patient_id": record["patient_id"],
                    "window_index": record["window_index"],
                    "start": record["_start"].isoformat(),
                    "end": record["_end"].isoformat(),
                    "start_hours": record["start_hours"],
                    "end_hours": record["end_hours"],
                    "hindsight_disease_group": record["hindsight"]["disease_group"],
                    "context_file": record["context_file"],
                    "window_action_event_ids": record["window_action_event_ids"],
                    "window_companion_event_ids": record["window_companion_event_ids"],
                    "status": labels["status"]["value"],
                    **{task: [i["text"] for i in labels[task]] for task in SET_TASKS},
                    "labels_json": _dumps(labels),
                }
            )
        )
        if len(self.lines) >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.lines:
            import pyarrow as pa
            import pyarrow.json as pa_json

            data = ("\n".join(self.lines) + "\n").encode("utf-8")
            table = pa_json.read_json(
                pa.BufferReader(data),
                # One block for the whole batch: one chunk per column, and no
                # row straddling two blocks.
                read_options=pa_json.ReadOptions(block_size=len(data) + 1),
                parse_options=pa_json.ParseOptions(
                    explicit_schema=parquet_schema(), unexpected_field_behavior="error"
                ),
            )
            self.writer.write_table(table, row_group_size=BATCH_ROWS)
            self.lines = []

    def close(self) -> None:
        self.flush()
        self.writer.close()


def _stay_chunks(rows, size: int) -> list[list[int]]:
    """The release's stays, in order, in lists holding about ``size`` windows
    (at least one stay each)."""
    counts = (
        rows.order_by()
        .values_list("window__stay_id")
        .annotate(n=Count("pk"))
        .order_by("window__stay_id")
    )
    chunks: list[list[int]] = []
    current: list[int] = []
    windows = 0
    for stay_id, n in counts:
        current.append(stay_id)
        windows += n
        if windows >= size:
            chunks.append(current)
            current, windows = [], 0
    if current:
        chunks.append(current)
    return chunks


def release_files_write(
    *, release: Release, folder: Path, rows_out: ReleaseRows, progress=None
) -> ReleaseStats:
    """Writes every file of the release into ``folder`` and hands its window
    records to ``rows_out`` (committed in batches); returns the statistics.

    The label rows are read ``BATCH_ROWS`` windows' worth of stays at a time,
    each read complete before its stays' rows are committed: no query is open
    on the connection when it writes (SQLite would refuse the write)."""
    (folder / "context").mkdir(parents=True)
    stats = ReleaseStats()
    rows = release_label_rows(release)
    chunks = _stay_chunks(rows, BATCH_ROWS)
    if progress is not None:
        progress.start(sum(map(len, chunks)) + 2, "windows and context")
    parquet = ParquetBatches(folder / "windows.parquet")
    lines = _EventLines()
    try:
        with open(folder / "windows.jsonl", "w", encoding="utf-8") as jsonl:
            for chunk in chunks:
                fetched = list(rows.filter(window__stay_id__in=chunk))
                # The chunk's hindsight records in one query, not one per stay.
                coded = CodedRecords.of_admissions(
                    {row.window.stay.admission_id for row in fetched}
                )
                for stay_id, stay_rows in groupby(
                    fetched, key=lambda r: r.window.stay_id
                ):
                    stay_rows = list(stay_rows)
                    stay = stay_rows[0].window.stay
                    pending: list[tuple] = []
                    for record in _write_stay(
                        release=release,
                        stay=stay,
                        rows=stay_rows,
                        folder=folder,
                        stats=stats,
                        lines=lines,
                        coded=coded.get(stay.admission_id, CodedRecords()),
                    ):
                        parquet.add(record)
                        del record["_start"], record["_end"]
                        text = _dumps(record)
                        jsonl.write(text)
                        jsonl.write("\n")
                        stats.add_window(record)
                        pending.append(
                            (
                                record["window_id"],
                                stay_id,
                                record["hindsight"]["disease_group"],
                                record["start_hours"],
                                text,
                            )
                        )
                    rows_out.windows(pending)
                    if progress is not None:
                        progress.advance(1, f"stay {stay_id}")
        rows_out.flush()
    finally:
        parquet.close()
    return stats
