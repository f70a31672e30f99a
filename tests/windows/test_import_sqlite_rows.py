"""The SQLite event writer's rows (windows.importers.writing.sqlite_rows), built
column by column, are the rows the straightforward per-row build gives (pandas
strftime and itertuples): the same values and types, None for missing times
and numbers, text cut and emptied as the PostgreSQL COPY has it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from windows.importers.writing import EVENT_COLUMNS, events_cleaned, sqlite_rows


def straightforward_rows(frame: pd.DataFrame) -> list[tuple]:
    out = frame.copy()
    for col in ("time", "end_time"):
        times = pd.to_datetime(out[col], utc=True)
        out[col] = times.dt.strftime("%Y-%m-%d %H:%M:%S.%f").astype("object")
        out.loc[times.isna(), col] = None
    out["value_num"] = (
        out["value_num"].astype("object").where(out["value_num"].notna(), None)
    )
    return list(out.itertuples(index=False, name=None))


def events_frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 500
    start = pd.Timestamp("2150-03-01 07:30:00.123456", tz="UTC")
    times = start + pd.to_timedelta(rng.integers(0, 10**12, n), unit="us")
    ends = pd.Series(times + pd.Timedelta(minutes=30))
    ends[rng.random(n) < 0.5] = pd.NaT
    numbers = rng.normal(80, 10, n)
    numbers[rng.random(n) < 0.2] = np.nan
    numbers[:3] = [np.inf, -np.inf, 0.0]
    names = np.array(["Heart Rate", None, "x" * 300, "SpO2", 7], dtype=object)
    return pd.DataFrame(
        {
            "admission_id": rng.integers(1, 40, n),
            "time": times,
            "end_time": ends,
            "kind": "observation",
            "domain": "vitals",
            "category": rng.choice(["heart_rate", "spo2"], n),
            "name": names[rng.integers(0, len(names), n)],
            "value_num": numbers,
            "unit": rng.choice(["bpm", "%", None], n),
            "value_text": None,
            "source_table": "chartevents",
            "source_key": [f"row {i}" for i in range(n)],
            "order_id": None,
        }
    )


def test_sqlite_rows_are_the_straightforward_rows():
    frame = events_cleaned(events_frame())
    rows = sqlite_rows(frame)
    expected = straightforward_rows(frame)
    assert len(rows) == 500
    assert rows == expected
    assert [tuple(type(v) for v in row) for row in rows] == [
        tuple(type(v) for v in row) for row in expected
    ]
    time, end, value, name = (
        EVENT_COLUMNS.index(c) for c in ("time", "end_time", "value_num", "name")
    )
    assert rows[0][time].startswith("2150-03-") and rows[0][time][10] == " "
    assert len(rows[0][time]) == 26
    assert any(row[end] is None for row in rows)
    assert rows[0][value] is None and rows[1][value] is None and rows[2][value] == 0.0
    assert {len(row[name]) for row in rows} >= {0, 255}
