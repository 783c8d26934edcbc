"""Check results carried forward: a partition's result stands while what it read stands.

A standard check says what its result depends on besides its definition (``Reads``): the
day's landing files, the table files that may hold the day, the source's quarantine files
of the day, or every file of the table. Before any check reads data, the step computes a
stamp per (check, partition) from exactly those, from metadata alone (landing listings
with their kept file hashes, the Delta logs' file lists). A stored result whose stamp
equals today's is reported again, marked ``carried_forward`` with what proved it, instead
of being recomputed; a changed file, table slice or check definition recomputes it.
Stamps are taken before the checks read anything, so a commit landing in between can only
cause a recomputation later, never a stale result.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import dagster as dg
from dagster_shared.serdes.errors import DeserializationError

from idem_assets.checkpoint import CheckpointStore, Memo
from idem_assets.checkpoint.model import MAX_JSON_BYTES
from idem_assets.io_manager import Window, target_table
from idem_assets.io_manager.writes import strategy_for
from idem_assets.lake.erasure import Erased
from idem_assets.lake.tables import FileIndex
from idem_assets.landing.files import discover_days, discover_snapshot
from idem_assets.landing.quarantine import QUARANTINE_TABLE, quarantine_conditions
from idem_assets.lib.inputs import input_signatures, keep_hashes, known_hashes
from idem_assets.resources import LakeResource

if TYPE_CHECKING:
    from idem_assets.lib.asset_def import LakeAssetDef


class Reads(StrEnum):
    """What a check's result depends on besides the check's own definition."""

    # The landing files of the partition's days.
    INPUTS = "inputs"
    # The table's data files that may hold the partition (its strategy's slice).
    SLICE = "slice"
    # The quarantine table's files of the source's days.
    QUARANTINE = "quarantine"
    # Every data file of the table.
    TABLE = "table"
    # The keys the erasure ledger holds for the asset's erasable columns: the check is
    # called with them (``erased=``), read once per step.
    ERASURES = "erasures"


def memo_scope(definition: LakeAssetDef) -> str:
    """Where an asset's check results are kept in the checkpoint store."""
    return f"checks/{definition.name}"


def memo_key(partition: str | None, check_name: str) -> str:
    """The memo of one check's result for one partition."""
    return f"{partition or 'all'}/{check_name}"


class Stamps:
    """The stamp of each (check, window): computed from metadata once per step, on demand."""

    def __init__(
        self,
        definition: LakeAssetDef,
        lake: LakeResource,
        store: CheckpointStore,
        windows: Sequence[Window],
        erased: Erased,
    ) -> None:
        self.definition = definition
        self.lake = lake
        self.store = store
        self.windows = list(windows)
        self.erased = erased

    def stamp(
        self, reads: frozenset[Reads] | None, checks: Sequence[tuple[str, str]], index: int
    ) -> str | None:
        """The stamp of results that depend on ``reads``, of the checks named and described
        by ``checks``, for window ``index``; None when they cannot be proven unchanged."""
        if reads is None:
            return None
        parts = {item.value: self._part(item, index) for item in sorted(reads - {Reads.ERASURES})}
        if any(part is None for part in parts.values()):
            return None
        if self.definition.spec.erasable_keys:
            # Every result of a table with erasable keys depends on which keys are erased.
            parts[Reads.ERASURES.value] = self.erased.digest()
        described = json.dumps(
            {
                "definition": self.definition.definition_digest,
                "checks": [list(check) for check in checks],
                "reads": parts,
            },
            sort_keys=True,
        )
        return hashlib.sha256(described.encode()).hexdigest()

    def _part(self, reads: Reads, index: int) -> str | None:
        window = self.windows[index]
        if reads is Reads.INPUTS:
            return None if self._inputs is None else self._inputs[index]
        if reads is Reads.TABLE:
            return self._whole_table
        if reads is Reads.SLICE:
            spec = self.definition.spec
            strategy = strategy_for(spec)
            touched = strategy.touched(strategy.window_slice(window), None)
            return self._table_files.signature(touched)
        contract = self.definition.landing_source
        if contract is None:
            return None
        return self._quarantine_files.signature(quarantine_conditions(contract, window))

    @functools.cached_property
    def _table_files(self) -> FileIndex:
        spec = self.definition.spec
        return FileIndex(target_table(self.lake, spec, self.definition.key).open())

    @functools.cached_property
    def _whole_table(self) -> str:
        return self._table_files.signature()

    @functools.cached_property
    def _quarantine_files(self) -> FileIndex:
        return FileIndex(self.lake.table(QUARANTINE_TABLE).open())

    @functools.cached_property
    def _inputs(self) -> list[str] | None:
        """Each window's landing signature: its days' files, as listed now."""
        contract = self.definition.landing_source
        if contract is None:
            return None
        root = self.lake.landing()
        if contract.daily:
            days = sorted({day for window in self.windows for day in window.days()})
            found = dict(discover_days(root, contract, days))
        else:
            found = {None: discover_snapshot(root, contract)}
        cache = known_hashes(self.store, root, list(found.values()), self.lake.file_settle_seconds)
        signed = input_signatures(self.definition, root, found, Window(), cache).days
        keep_hashes(self.store, root, cache)
        if not contract.daily:
            return [str(signed[None]) for _ in self.windows]
        return [json.dumps([signed[day] for day in window.days()]) for window in self.windows]


def carried(memo: Memo | None, stamp: str | None) -> dg.AssetCheckResult | None:
    """The kept result a memo holds, if its stamp is today's, with what proved it."""
    if memo is None or stamp is None or memo.stamp != stamp:
        return None
    value = memo.value
    try:
        metadata = _decoded(value["metadata"])
        severity = dg.AssetCheckSeverity(value["severity"])
    except (DeserializationError, KeyError, TypeError, ValueError):
        return None  # kept by another release: evaluated again, and kept anew
    proven = ", ".join(value.get("reads", ()))
    return dg.AssetCheckResult(
        check_name=value["check_name"],
        passed=bool(value["passed"]),
        severity=severity,
        description=value.get("description"),
        metadata={
            **metadata,
            "carried_forward": True,
            "evaluated_in_run": str(value.get("run_id")),
            "proven_by": f"definition, {proven} unchanged since that run",
        },
    )


def to_memo(
    key: str, stamp: str, result: dg.AssetCheckResult, reads: frozenset[Reads], run_id: str
) -> Memo | None:
    """The memo that keeps a result for later runs (None if it is too large to keep)."""
    value: dict[str, Any] = {
        "check_name": result.check_name,
        "passed": result.passed,
        "severity": result.severity.value,
        "description": result.description,
        "metadata": _encoded(result.metadata),
        "run_id": run_id,
        "reads": sorted(item.value for item in reads),
    }
    if len(json.dumps(value)) > MAX_JSON_BYTES - 1024:
        return None
    return Memo(key, stamp, value)


# Metadata kinds kept as plain JSON (what the standard checks report); any other value
# keeps the whole mapping in Dagster's own serialization, which costs several times more
# to read back on every day of an unchanged rerun.
_PLAIN: dict[type, tuple[str, Any]] = {
    dg.IntMetadataValue: ("int", dg.MetadataValue.int),
    dg.FloatMetadataValue: ("float", dg.MetadataValue.float),
    dg.BoolMetadataValue: ("bool", dg.MetadataValue.bool),
    dg.TextMetadataValue: ("text", dg.MetadataValue.text),
    dg.JsonMetadataValue: ("json", dg.MetadataValue.json),
}
_BUILD = {kind: build for kind, build in _PLAIN.values()}


def _encoded(metadata: Mapping[str, Any]) -> dict[str, Any] | str:
    """A result's metadata as plain JSON where every value is plain, else serialized."""
    plain: dict[str, Any] = {}
    for name, item in metadata.items():
        kind = _PLAIN.get(type(item))
        if kind is None or (kind[0] == "float" and not math.isfinite(item.value)):
            return dg.serialize_value(dict(metadata))
        plain[name] = [kind[0], item.value]
    return plain


def _decoded(encoded: dict[str, Any] | str) -> dict[str, Any]:
    """The metadata ``_encoded`` kept."""
    if isinstance(encoded, str):
        return dict(dg.deserialize_value(encoded, dict))
    return {name: _BUILD[kind](raw) for name, (kind, raw) in encoded.items()}
