"""A stream test world: landing folder, lake and store, plus readers for what they hold."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from idem_assets.checkpoint import CheckpointStore, Tracker, open_store
from idem_assets.lake import Fingerprint, LakeTable, fingerprint, read_rows, txn_version
from idem_assets.sample import EVENTS_STREAM
from idem_assets.sample.stream_files import GeneratedFile, append_stream_files
from idem_assets.stream import Observer, StreamIngester, StreamSettings
from idem_assets.stream.batch import META_BATCH, META_STREAM

SEED = 11
Key = tuple[str, dt.datetime]


@dataclass
class StreamWorld:
    """Where one test's stream lives."""

    landing: Path
    lake: Path
    url: str

    def __post_init__(self) -> None:
        # The landing root exists before any file arrives, as a deployment's does.
        self.landing.mkdir(parents=True, exist_ok=True)

    @property
    def table(self) -> LakeTable:
        """The stream's Delta table."""
        return LakeTable(str(self.lake / EVENTS_STREAM.name))

    @property
    def quarantine(self) -> LakeTable:
        """The shared quarantine table."""
        return LakeTable(str(self.lake / "quarantine"))

    def append(self, files: int, events: int = 30, defects: bool = True) -> list[GeneratedFile]:
        """Land more stream files (deterministic for the world's seed)."""
        return append_stream_files(self.landing, files, events, SEED, defects=defects)

    def store(self) -> CheckpointStore:
        """A new connection to the world's checkpoint store."""
        return open_store(self.url)

    def ingester(
        self, store: CheckpointStore, observer: Observer | None = None, **settings: Any
    ) -> StreamIngester:
        """An ingester over this world with the given settings."""
        return StreamIngester(
            store,
            EVENTS_STREAM,
            self.landing,
            self.table,
            self.quarantine,
            settings=StreamSettings(**settings),
            observer=observer,
        )

    def keys(self) -> list[Key]:
        """(event_id, ingested_at) of every row in the table, duplicates kept."""
        rows = read_rows(
            self.table.open(), EVENTS_STREAM.schema, columns=["event_id", "ingested_at"]
        )
        return list(
            zip(
                rows.column("event_id").to_pylist(),
                rows.column("ingested_at").to_pylist(),
                strict=True,
            )
        )

    def txn_version(self) -> int | None:
        """The stream's Delta txn version."""
        return txn_version(self.table.open(), EVENTS_STREAM.app_id)

    def batch_commits(self) -> Counter[int]:
        """How many table commits carry each batch number (must be one each)."""
        table = self.table.open()
        history = [] if table is None else table.history()
        return Counter(
            int(e[META_BATCH]) for e in history if e.get(META_STREAM) == EVENTS_STREAM.name
        )

    def batch_fingerprint(self, seq: int) -> Fingerprint:
        """Fingerprint of the rows the table holds for one batch."""
        rows = read_rows(self.table.open(), EVENTS_STREAM.schema)
        return fingerprint(rows.filter(pc.equal(rows.column("stream_batch"), seq)))

    def quarantined(self) -> list[tuple[str, int]]:
        """(source_file, row_number) of the stream's quarantine rows, duplicates kept."""
        table = self.quarantine.open()
        if table is None:
            return []
        rows = read_rows(table)
        rows = rows.filter(pc.equal(rows.column("source"), EVENTS_STREAM.name))
        return list(
            zip(
                rows.column("source_file").to_pylist(),
                rows.column("row_number").to_pylist(),
                strict=True,
            )
        )

    def trackers(self) -> list[Tracker]:
        """The offset log's trackers in batch order."""
        with self.store() as store:
            return store.list(EVENTS_STREAM.scope)


def expected_keys(files: list[GeneratedFile]) -> set[Key]:
    """Every valid (event_id, ingested_at) the landed files hold."""
    return set().union(*(f.valid_keys() for f in files))


def expected_quarantine(files: list[GeneratedFile]) -> int:
    """Rows of the landed files the contract refuses."""
    return sum(f.invalid for f in files)
