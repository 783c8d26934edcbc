"""Helpers for the drop-in tests: the IO manager built as dagster-deltalake's, and its tables."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from dagster_deltalake import LocalConfig
from deltalake import DeltaTable

from idem_assets.io_manager import IdempotentDeltaIOManager
from idem_assets.lake import read_rows


def manager(root: Path, **config: object) -> IdempotentDeltaIOManager:
    """Constructed exactly like ``DeltaLakePyarrowIOManager(root_uri=..., storage_options=...)``."""
    return IdempotentDeltaIOManager(root_uri=str(root), storage_options=LocalConfig(), **config)


def table(root: Path, path: str) -> DeltaTable:
    """The Delta table at ``<root>/<path>``."""
    return DeltaTable(str(root / path))


def version(root: Path, path: str) -> int:
    """The table's current version."""
    return table(root, path).version()


def rows(root: Path, path: str, column: str) -> list:
    """One column of the table, sorted."""
    return sorted(read_rows(table(root, path)).column(column).to_pylist())


def committed(result: dg.ExecuteInProcessResult, node: str | None = None) -> list[bool]:
    """The ``committed`` metadata of every materialization of a run (of one node)."""
    events = result.get_asset_materialization_events()
    out = []
    for event in events:
        if node is not None and event.step_key and not event.step_key.startswith(node):
            continue
        metadata = event.event_specific_data.materialization.metadata  # type: ignore[union-attr]
        out.append(bool(metadata["committed"].value))
    return out
