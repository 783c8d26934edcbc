"""The erasure ledger: which keys were erased, and what erasing them left to do.

Kept in the checkpoint store (scope ``erasures``, one memo per key), because every later
write must read it: a key recorded here is filtered out of every write of a table that
declares its column, whatever files are read again. The ledger is the one place that
holds an erased value (it must, to keep it out); everything else names it by
``key_digest``. An entry is never dropped by the library: un-erasing is a person's
decision, made in the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from idem_assets.checkpoint.model import Memo
from idem_assets.checkpoint.store import CheckpointStore
from idem_assets.lake.erasure import Erased, ErasedFrom, key_digest

SCOPE = "erasures"


@dataclass(frozen=True)
class Erasure:
    """One erased key: per table the erase commit and rows deleted, what the last scan of
    storage found holding it (table -> [path, kind] pairs), and when none was left."""

    column: str
    value: str
    erased_at: float
    tables: Mapping[str, Mapping[str, Any]]
    held: Mapping[str, list[list[str]]] = field(default_factory=dict)
    scanned_at: float | None = None
    gone_at: float | None = None  # the first scan after which no file held it

    @property
    def digest(self) -> str:
        """The key's name in logs and reports."""
        return key_digest(self.column, self.value)


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
            tables[name] = {
                "version": item.version if item.version is not None else earlier.get("version"),
                "rows": int(earlier.get("rows", 0)) + item.rows_deleted,
            }
        updated = replace(erasure, tables=tables)
        self._keep(updated)
        return updated

    def found(self, erasure: Erasure, held: Mapping[str, list[list[str]]], at: float) -> Erasure:
        """Record what a scan of storage found holding the key: table name -> [path, kind]
        pairs, replacing the tables scanned (``held``'s keys and those named in it as
        scanned with nothing found, see ``scanned``); the first scan that finds none left
        anywhere records when the key was fully gone."""
        merged = {t: f for t, f in erasure.held.items() if t not in held} | {
            t: f for t, f in held.items() if f
        }
        gone_at = None if merged else (erasure.gone_at if erasure.gone_at is not None else at)
        updated = replace(erasure, held=merged, scanned_at=at, gone_at=gone_at)
        self._keep(updated)
        return updated

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
                        "held": dict(erasure.held),
                        "scanned_at": erasure.scanned_at,
                        "gone_at": erasure.gone_at,
                    },
                )
            ],
        )


def _erasure(memo: Memo) -> Erasure:
    value = memo.value
    return Erasure(
        value["column"],
        value["value"],
        float(value["erased_at"]),
        value["tables"],
        value.get("held", {}),
        value.get("scanned_at"),
        value.get("gone_at"),
    )
