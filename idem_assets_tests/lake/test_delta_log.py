"""Reading commit metadata back from the Delta log, on a log that moves under the reader."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from idem_assets.lake import LakeTable, append_exactly_once, fingerprint
from idem_assets.lake.delta_log import commit_infos

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.date32())])
DAY = dt.date(2024, 3, 1)


def _batch(number: int) -> pa.Table:
    return pa.table({"id": [number], "day": [DAY]}, schema=SCHEMA)


def _append(target: LakeTable, number: int) -> None:
    append_exactly_once(target, _batch(number), "log-test", number, partition_column="day")


def test_commit_versions_stay_right_when_commits_land_after_the_table_was_loaded(tmp_path):
    """Version v holds the append of batch v + 1, whose fingerprint its commit records."""
    target = LakeTable(str(tmp_path / "moving"))
    for number in range(1, 4):  # versions 0, 1, 2
        _append(target, number)
    loaded = target.open()
    assert loaded is not None and loaded.version() == 2
    for number in range(4, 6):  # versions 3 and 4 land after the load
        _append(target, number)

    expected = [(v, str(fingerprint(_batch(v + 1)))) for v in (2, 1, 0)]
    read = [(v, info.get("idem.fingerprint")) for v, info in commit_infos(loaded, 3)]
    assert read == expected
    newest = target.open()
    assert newest is not None
    assert [v for v, _ in commit_infos(newest, 10)] == [4, 3, 2, 1, 0]

    # Why: delta-rs's history numbers the newest log files from the snapshot's version, so
    # the entry it calls version 2 is batch 5's (version 4). If this ever stops holding,
    # DeltaTable.history may be trusted again.
    labelled_two = next(e for e in loaded.history(3) if e["version"] == 2)
    assert labelled_two.get("idem.fingerprint") == str(fingerprint(_batch(5)))
