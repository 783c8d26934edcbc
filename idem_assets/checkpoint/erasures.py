"""The erasure ledger: which keys were erased, and what erasing them left to do.

Kept in the checkpoint store (scope ``erasures``, one memo per key), because every later
write must read it: a key recorded here is filtered out of every write of a table that
declares its column, whatever files are read again. The ledger is the one place that
holds an erased value (it must, to keep it out); everything else names it by
``key_digest``. An entry is never dropped by the library: un-erasing is a person's
decision, made in the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from idem_assets.checkpoint.model import Memo
from idem_assets.checkpoint.store import CheckpointStore
from idem_assets.lake.erasure import Erased, ErasedFrom, files_holding, key_digest
from idem_assets.lake.tables import LakeTable

SCOPE = "erasures"


@dataclass(frozen=True)
class Erasure:
    """One erased key and, per table, the erase commit and the files still holding it."""

    column: str
    value: str
    erased_at: float
    tables: Mapping[str, Mapping[str, Any]]

    @property
    def digest(self) -> str:
        """The key's name in logs and reports."""
        return key_digest(self.column, self.value)

    def pending_files(self) -> dict[str, list[str]]:
        """Table name -> data files that held the key and were not yet seen gone."""
        return {name: list(t["files"]) for name, t in self.tables.items() if t.get("files")}


def _memo_key(column: str, value: str) -> str:
    return f"{column}={value}"


class ErasureLedger:
    """The erasure ledger in a checkpoint store."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store

    def record(self, column: str, value: str) -> Erasure:
        """Record ``column = value`` as erased (before any table is touched, so a write that
        starts after this filters it); recording it again keeps the first record."""
        found = self.find(column, value)
        if found is not None:
            return found
        erasure = Erasure(column, value, self.store.now(), {})
        self._keep(erasure)
        return erasure

    def note(self, erasure: Erasure, done: Mapping[str, ErasedFrom]) -> Erasure:
        """Add what erasing did to tables, by table name (the commit, the files it removed)."""
        tables = dict(erasure.tables)
        for name, item in done.items():
            earlier = tables.get(name, {})
            files = sorted({*earlier.get("files", ()), *item.files_removed})
            tables[name] = {
                "version": item.version if item.version is not None else earlier.get("version"),
                "rows": int(earlier.get("rows", 0)) + item.rows_deleted,
                "files": files,
            }
        updated = Erasure(erasure.column, erasure.value, erasure.erased_at, tables)
        self._keep(updated)
        return updated

    def files_gone(self, erasure: Erasure, name: str, remaining: Iterable[str]) -> Erasure:
        """Keep only ``remaining`` as the files of table ``name`` still holding the key."""
        tables = dict(erasure.tables)
        if name in tables:
            tables[name] = {**tables[name], "files": sorted(remaining)}
        updated = Erasure(erasure.column, erasure.value, erasure.erased_at, tables)
        self._keep(updated)
        return updated

    def still_holding(
        self, erasure: Erasure, table: Callable[[str], LakeTable]
    ) -> dict[str, list[str]]:
        """Table name -> the data files still on storage that hold the key (``table`` locates
        a table by name); the ledger forgets the files found gone (vacuumed)."""
        held = {}
        for name, files in erasure.pending_files().items():
            remaining = files_holding(table(name), files)
            if len(remaining) < len(files):
                erasure = self.files_gone(erasure, name, remaining)
            if remaining:
                held[name] = remaining
        return held

    def find(self, column: str, value: str) -> Erasure | None:
        """The record of one key, if it was erased."""
        memo = self.store.memos(SCOPE, [_memo_key(column, value)]).get(_memo_key(column, value))
        return None if memo is None else _erasure(memo)

    def entries(self) -> list[Erasure]:
        """Every erased key, oldest first."""
        found = [_erasure(memo) for memo in self.store.memos_in(SCOPE).values()]
        return sorted(found, key=lambda e: (e.erased_at, e.column, e.value))

    def erased(self, columns: Iterable[str] | None = None) -> Erased:
        """The erased values by column (of ``columns`` only, when given)."""
        values: dict[str, set[str]] = {}
        for entry in self.entries():
            values.setdefault(entry.column, set()).add(entry.value)
        found = Erased({c: frozenset(v) for c, v in values.items()})
        return found if columns is None else found.of(columns)

    def _keep(self, erasure: Erasure) -> None:
        self.store.remember(
            SCOPE,
            [
                Memo(
                    _memo_key(erasure.column, erasure.value),
                    "erased",
                    {
                        "column": erasure.column,
                        "value": erasure.value,
                        "erased_at": erasure.erased_at,
                        "tables": dict(erasure.tables),
                    },
                )
            ],
        )


def _erasure(memo: Memo) -> Erasure:
    value = memo.value
    return Erasure(value["column"], value["value"], float(value["erased_at"]), value["tables"])
