"""Comparing a Spark landing read with the local reader's read of the same files."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from idem_assets.lake import fingerprint
from idem_assets.lake.frames import nullable
from idem_assets.landing import LandingBatch
from idem_assets.spark.fingerprint import spark_fingerprint
from idem_assets.spark.landing import SparkLandingBatch

# Reasons docs/spark.md lists as worded differently: the Spark reader gives no physical
# line numbers, and its JSON Lines "file lacks" reason does not list the file's keys.
_CSV_FIELDS = (
    re.compile(r"^row has \d+ fields but the header has (\d+) \(line \d+\)(.*)$"),
    r"row does not have the header's \1 fields\2",
)
_JSON_LINE = (
    re.compile(r"^line \d+ (is not valid JSON: .*|is a JSON \w+, not an object)$"),
    "line is not a JSON object (invalid JSON, an array or a scalar)",
)
_JSON_KEYS = (re.compile(r"^(file lacks contract column\(s\) .*) \(it has: .*\)$"), r"\1")
CAREFUL = "judged line by line by the local reader"


def comparable(rows: Iterable[Mapping[str, Any]], careful: Iterable[str] = ()) -> Counter:
    """Quarantine rows as (file, day, reason), with the documented wording differences
    normalised; files in ``careful`` (JSON Lines the local reader parsed line by line,
    reading every value as text) keep their rows but not their reasons."""
    careful = set(careful)
    out: Counter = Counter()
    for row in rows:
        reason, relpath = row["reason"], row["source_file"]
        for pattern, spelled in (_CSV_FIELDS, _JSON_LINE):
            reason = pattern.sub(spelled, reason)
        if relpath.endswith((".jsonl", ".jsonl.gz")):
            reason = _JSON_KEYS[0].sub(_JSON_KEYS[1], reason)
        out[(relpath, row["partition_date"], CAREFUL if relpath in careful else reason)] += 1
    return out


def assert_same_read(
    batch: SparkLandingBatch, local: LandingBatch, careful: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """Spark's read equals the local one: rows, fingerprint, quarantine, files; returns
    Spark's quarantine rows."""
    assert batch.counts() == (local.rows.num_rows, local.quarantine.num_rows)
    assert spark_fingerprint(batch.rows) == fingerprint(local.rows)
    rows = batch.rows.toArrow()
    assert rows.schema == nullable(local.rows.schema)
    assert fingerprint(rows) == fingerprint(local.rows)
    quarantine = [r.asDict() for r in batch.quarantine.collect()]
    assert comparable(quarantine, careful) == comparable(local.quarantine.to_pylist(), careful)
    # Parquet rows keep their row numbers; CSV and JSON Lines rows cannot have them.
    numbered = {
        (r["source_file"], r["row_number"], r["reason"])
        for r in quarantine
        if r["row_number"] is not None
    }
    assert numbered == {
        (r["source_file"], r["row_number"], r["reason"])
        for r in local.quarantine.to_pylist()
        if r["source_file"].endswith(".parquet")
    }
    assert batch.files == tuple(f.relpath for f in local.files)
    # Spark lists the columns it drops for CSV and Parquet files only.
    assert batch.dropped_columns == {
        relpath: dropped
        for relpath, dropped in local.dropped_columns.items()
        if not relpath.endswith((".jsonl", ".jsonl.gz"))
    }
    assert batch.notes == local.notes
    assert batch.ignored_files == local.ignored_files
    return quarantine
