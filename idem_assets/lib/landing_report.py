"""What a landing read reports on its asset: row accounting, and files nobody reads."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

import dagster as dg

from idem_assets.landing.files import is_hidden
from idem_assets.landing.quarantine import QuarantineWrite
from idem_assets.landing.reader import LandingBatch

MAX_LISTED_FILES = 50


def add_asset_metadata(context: dg.AssetExecutionContext, metadata: dict[str, Any]) -> None:
    """Metadata for the asset's output (the step also has an output per check)."""
    name = context.assets_def.get_output_name_for_asset_key(context.asset_key)
    context.add_output_metadata(metadata, output_name=name)


def listed(ignored: Mapping[str, str]) -> dg.MetadataValue:
    """Unread files (path -> why) as metadata, the first ``MAX_LISTED_FILES`` by path."""
    return dg.MetadataValue.json(dict(sorted(ignored.items())[:MAX_LISTED_FILES]))


def landing_figures(batch: LandingBatch, quarantine: QuarantineWrite) -> dict[str, Any]:
    """Row accounting of a landing read, as plain JSON values: raw rows, valid rows,
    quarantined rows (those written; rows holding an erased key are counted apart), files
    (kept, so that a rerun on unchanged files reports them too)."""
    files = [
        {"file": f.relpath, "format": f.format, "rows": f.rows, "sha256": f.sha256[:12]}
        for f in batch.files[:MAX_LISTED_FILES]
    ]
    reasons: dict[str, int] = {}
    if quarantine.rows.num_rows:
        for reason in quarantine.rows.column("reason").to_pylist():
            head = str(reason).split(":", 1)[0]
            reasons[head] = reasons.get(head, 0) + 1
    return {
        "landing_files": len(batch.files),
        "raw_rows": batch.raw_rows,
        "valid_rows": batch.rows.num_rows,
        "quarantined_rows": quarantine.rows.num_rows,
        "quarantine_rows_erased": quarantine.erased,
        "quarantine_reasons": reasons,
        "quarantine_table_version": quarantine.version,
        "dropped_columns": {path: list(cols) for path, cols in batch.dropped_columns.items()},
        "files": files,
        # Files in the folder that were not read, and remarks such as zero-byte files: shown so
        # that a producer's misnamed or empty file is seen by a person, not silently skipped.
        "ignored_files": dict(sorted(batch.ignored_files.items())[:MAX_LISTED_FILES]),
        "file_notes": {p: list(n) for p, n in sorted(batch.notes.items())[:MAX_LISTED_FILES]},
    }


def figures_metadata(figures: Mapping[str, Any], per_day: bool = False) -> dict[str, Any]:
    """``landing_figures`` as materialization metadata (structured values as JSON).

    ``per_day``: the run covers several days, each of which lists its own files on its own
    materialization (``day_files``); the run's figures leave the list out, so that every
    partition of a long range does not repeat the run's first files.
    """
    return {
        name: dg.MetadataValue.json(value) if isinstance(value, dict | list) else value
        for name, value in figures.items()
        if not (per_day and name == "files")
    }


def add_day_files(
    context: dg.AssetExecutionContext,
    days: Mapping[str, Sequence[str]],
    sha256: Callable[[str], str | None],
    rows: Mapping[str, int],
) -> None:
    """Each day's landing files on that day's materialization: path, content hash, and rows
    where this run read the file (``days``: partition key -> the day's relpaths)."""
    for key, relpaths in days.items():
        files = []
        for relpath in relpaths[:MAX_LISTED_FILES]:
            entry: dict[str, Any] = {"file": relpath, "sha256": (sha256(relpath) or "")[:12]}
            if relpath in rows:
                entry["rows"] = rows[relpath]
            files.append(entry)
        context.add_asset_metadata({"files": dg.MetadataValue.json(files)}, partition_key=key)


def warn_unread(context: dg.AssetExecutionContext, ignored: Mapping[str, str]) -> None:
    """Log landing files nobody reads (hidden files are in-progress writes by convention)."""
    unread = [
        (p, why) for p, why in sorted(ignored.items()) if not is_hidden(PurePosixPath(p).name)
    ]
    for relpath, why in unread[:MAX_LISTED_FILES]:
        context.log.warning(f"landing file {relpath} was not read: {why}")
