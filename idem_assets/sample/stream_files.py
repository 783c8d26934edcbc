"""Deterministic stream files for tests and demos: N more files of M events, with re-deliveries.

File ``k`` of a seed always has the same bytes: ``events-<k:06d>.<fmt>`` (formats rotate
JSON Lines, CSV, Parquet), fresh events with ids derived from (seed, k, n), plus a share of
the previous file's events delivered again with a newer ``ingested_at``. Every written row
therefore has a distinct (event_id, ingested_at); with ``defects`` every fourth file also
carries one row the contract refuses (a blank event_id), to exercise quarantine.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idem_assets.sample.sources import EVENTS_STREAM
from idem_assets.sample.writers import (
    TIMESTAMP_FORMS,
    FileStyle,
    PlannedFile,
    file_bytes,
    write_atomically,
)
from idem_assets.stream.source import StreamSource

STREAM_EPOCH = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
STREAM_NAMESPACE = uuid.UUID("0b6f7d0e-58a4-4b8e-9f0e-4c1d7a2f9e31")
FORMATS = ("jsonl", "csv", "parquet")
EVENT_TYPES = (
    "page_view",
    "page_view",
    "page_view",
    "add_to_cart",
    "checkout",
    "purchase",
    "support_ticket",
)
_FILE_NAME = re.compile(r"^events-(\d{6})\.[a-z]+$")


@dataclass(frozen=True)
class GeneratedFile:
    """One written stream file and what it holds."""

    path: Path
    index: int
    rows: tuple[dict[str, Any], ...]  # typed values as written, in file order
    redelivered: int
    invalid: int  # rows the contract refuses (they go to quarantine)

    def valid_keys(self) -> set[tuple[str, dt.datetime]]:
        """(event_id, ingested_at) of the rows that should reach the table."""
        return {(r["event_id"], r["ingested_at"]) for r in self.rows if r["event_id"].strip()}


def _fresh_rows(seed: int, index: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(f"idem-assets/stream/{seed}/{index}")
    start = STREAM_EPOCH + dt.timedelta(minutes=index)
    rows = []
    for n in range(count):
        # Fresh events are ingested in the first half of the file's minute, re-deliveries of
        # them in the second half of the next file's minute: no (id, ingested_at) repeats.
        ingested = start + dt.timedelta(microseconds=rng.randrange(30_000_000))
        kind = rng.choice(EVENT_TYPES)
        rows.append(
            {
                "event_id": str(uuid.uuid5(STREAM_NAMESPACE, f"{seed}/{index}/{n}")),
                "customer_id": rng.randint(1, 400),
                "event_type": kind,
                "event_time": ingested - dt.timedelta(seconds=rng.randint(0, 600)),
                "ingested_at": ingested,
                "payload": json.dumps({"page": f"/p/{rng.randint(1, 80)}"}, separators=(",", ":")),
            }
        )
    return rows


def file_rows(
    seed: int, index: int, events_per_file: int, redeliver_share: float = 0.1, defects: bool = False
) -> tuple[list[dict[str, Any]], int, int]:
    """Rows of file ``index`` (and how many are re-deliveries and invalid)."""
    again = 0 if index == 0 else min(events_per_file, round(events_per_file * redeliver_share))
    rows = _fresh_rows(seed, index, events_per_file - again)
    if again:
        rng = random.Random(f"idem-assets/stream/{seed}/{index}/again")
        previous = _fresh_rows(seed, index - 1, events_per_file - (0 if index == 1 else again))
        start = STREAM_EPOCH + dt.timedelta(minutes=index, seconds=30)
        for row in rng.sample(previous, min(again, len(previous))):
            later = start + dt.timedelta(microseconds=rng.randrange(30_000_000))
            rows.append({**row, "ingested_at": later})
    invalid = 0
    if defects and index % 4 == 3 and rows:
        rows[0] = {**rows[0], "event_id": " "}
        invalid = 1
    return rows, len(rows) - (events_per_file - again), invalid


def next_index(folder: Path) -> int:
    """One past the highest ``events-NNNNNN`` file in the folder (0 for an empty folder)."""
    if not folder.is_dir():
        return 0
    found = [int(m.group(1)) for p in folder.iterdir() if (m := _FILE_NAME.match(p.name))]
    return max(found, default=-1) + 1


def append_stream_files(
    landing_dir: str | Path,
    files: int,
    events_per_file: int,
    seed: int,
    *,
    redeliver_share: float = 0.1,
    defects: bool = False,
    source: StreamSource = EVENTS_STREAM,
) -> list[GeneratedFile]:
    """Append ``files`` new files after the existing ones (atomic renames, never a rewrite)."""
    if files < 0 or events_per_file < 1:
        raise ValueError(
            f"need files >= 0 and events_per_file >= 1, got {files}, {events_per_file}"
        )
    if not 0 <= redeliver_share < 1:
        raise ValueError(f"redeliver_share must be in [0, 1), got {redeliver_share}")
    folder = source.folder(landing_dir)
    first = next_index(folder)
    written = []
    for index in range(first, first + files):
        rows, redelivered, invalid = file_rows(
            seed, index, events_per_file, redeliver_share, defects
        )
        fmt = FORMATS[index % len(FORMATS)]
        style = FileStyle(timestamp_forms=TIMESTAMP_FORMS, parquet_tz=None if index % 2 else "UTC")
        relpath = f"{source.name}/events-{index:06d}.{fmt}"
        planned = PlannedFile(relpath, tuple(source.contract.columns), tuple(rows), style)
        path = Path(landing_dir) / relpath
        write_atomically(path, file_bytes(planned, source.contract))
        written.append(GeneratedFile(path, index, tuple(rows), redelivered, invalid))
    return written
