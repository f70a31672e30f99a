"""windows.parquet is written from JSON lines read with the schema (no pandas
import): the same table as Arrow's conversion of the Python values gives."""

from datetime import UTC, datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq

from exports.building.context import _dumps
from exports.building.records import ParquetBatches, parquet_schema


def _record(n: int, *, status, start: datetime) -> dict:
    labels = {
        "status": {"value": status, "evidence": [n], "provenance": {}},
        "acute_problems": [{"text": "Choc septique « réfractaire »", "evidence": []}],
        "recommended_actions": [{"text": 'Say "stop"\n', "evidence": []}],
        "red_flags": [],
    }
    return {
        "window_id": 10**12 + n,
        "stay_id": 7,
        "patient_id": "P0001",
        "window_index": n,
        "_start": start,
        "_end": start + timedelta(minutes=30),
        "start_hours": 0.1 + 0.2 * n,
        "end_hours": 1 / 3 + n,
        "context_file": "context/7.jsonl",
        "window_action_event_ids": [3, 2**40] if n else [],
        "window_companion_event_ids": [4] if n else [],
        "hindsight": {"disease_group": "sepsis"},
        "labels": labels,
    }


def test_parquet_rows_are_the_python_values_converted_by_arrow(tmp_path):
    records = [
        _record(0, status=None, start=datetime(2030, 1, 1, tzinfo=UTC)),
        _record(
            1,
            status="stable",
            start=datetime(2030, 1, 1, 2, 0, 0, 123456, tzinfo=UTC),
        ),
        # An offset other than UTC is the same instant in the UTC column.
        _record(
            2,
            status="deteriorating",
            start=datetime(2030, 1, 1, 6, tzinfo=timezone(timedelta(hours=2))),
        ),
    ]
    batches = ParquetBatches(tmp_path / "w.parquet")
    for record in records:
        batches.add(record)
    batches.close()
    table = pq.read_table(tmp_path / "w.parquet")
    assert table.schema == parquet_schema()
    expected = pa.Table.from_pylist(
        [
            {
                **{k: v for k, v in r.items() if not k.startswith("_")},
                "hindsight_disease_group": r["hindsight"]["disease_group"],
                "start": r["_start"],
                "end": r["_end"],
                "status": r["labels"]["status"]["value"],
                "acute_problems": [i["text"] for i in r["labels"]["acute_problems"]],
                "recommended_actions": [
                    i["text"] for i in r["labels"]["recommended_actions"]
                ],
                "red_flags": [],
                "labels_json": _dumps(r["labels"]),
            }
            for r in records
        ],
        schema=parquet_schema(),
    )
    assert table.equals(expected)
    rows = table.to_pylist()
    assert rows[2]["start"] == datetime(2030, 1, 1, 4, tzinfo=UTC)
    assert rows[1]["start"].microsecond == 123456
    assert rows[0]["status"] is None and rows[0]["window_action_event_ids"] == []
    assert '"Say \\"stop\\"\\n"' in rows[0]["labels_json"]
