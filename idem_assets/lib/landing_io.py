"""Reading landing files inside an asset: quarantine the bad rows, report every row."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import PurePosixPath
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from idem_assets import __version__
from idem_assets.io_manager import TableOutput, Window
from idem_assets.io_manager.tracking import SettledWrite, last_settled
from idem_assets.lake import OneOf, date_range, overwrite_slice, slice_signature
from idem_assets.lake.predicates import Condition
from idem_assets.landing.contract import SourceContract
from idem_assets.landing.files import discover_day, discover_snapshot, is_hidden
from idem_assets.landing.reader import (
    QUARANTINE_SCHEMA,
    HashCache,
    LandingBatch,
    day_signature,
    read_days,
    read_snapshot,
    snapshot_signature,
)
from idem_assets.lib.lake_asset import LakeAssetDef
from idem_assets.resources import CheckpointResource, LakeResource, SparkResource

QUARANTINE_TABLE = "quarantine"
_MAX_LISTED_FILES = 50



def _add_metadata(context: dg.AssetExecutionContext, metadata: dict[str, Any]) -> None:
    """Metadata for the asset's output (the step also has an output per check)."""
    name = context.assets_def.get_output_name_for_asset_key(context.asset_key)
    context.add_output_metadata(metadata, output_name=name)

def read_landing(lake: LakeResource, contract: SourceContract, window: Window) -> LandingBatch:
    """The landing batch of a source for a window (daily) or its newest snapshot."""
    if contract.daily:
        if not window.partitioned:
            raise ValueError(f"{contract.name} is daily: it needs a partition window")
        assert window.start is not None and window.end is not None
        return read_days(lake.landing_path, contract, window.start, window.end)
    return read_snapshot(lake.landing_path, contract)


def quarantine_conditions(contract: SourceContract, window: Window) -> list[Condition]:
    """The quarantine slice that belongs to a source and window."""
    # The name was validated when the source was declared; OneOf checks it again.
    conditions: list[Condition] = [OneOf("source", contract.name, frozenset({contract.name}))]
    if contract.daily and window.partitioned:
        assert window.start is not None and window.end is not None
        conditions.append(date_range("partition_date", window.start, window.end))
    return conditions


def write_quarantine(
    lake: LakeResource, contract: SourceContract, quarantine: pa.Table, window: Window
) -> int:
    """Replace this source's quarantine rows for the window; returns the table version."""
    result = overwrite_slice(
        lake.table(QUARANTINE_TABLE),
        quarantine,
        quarantine_conditions(contract, window),
        partition_by=["source", "partition_date"],
        schema=QUARANTINE_SCHEMA,
        commit_metadata={"idem.asset": QUARANTINE_TABLE, "idem.source": contract.name},
    )
    return result.version


def landing_metadata(batch: LandingBatch, quarantine_version: int) -> dict[str, Any]:
    """Row accounting for the materialization: raw rows, valid rows, quarantined rows, files."""
    files = [
        {"file": f.relpath, "format": f.format, "rows": f.rows, "sha256": f.sha256[:12]}
        for f in batch.files[:_MAX_LISTED_FILES]
    ]
    reasons: dict[str, int] = {}
    if batch.quarantine.num_rows:
        for reason in batch.quarantine.column("reason").to_pylist():
            head = str(reason).split(":", 1)[0]
            reasons[head] = reasons.get(head, 0) + 1
    return {
        "landing_files": len(batch.files),
        "raw_rows": batch.raw_rows,
        "valid_rows": batch.rows.num_rows,
        "quarantined_rows": batch.quarantine.num_rows,
        "quarantine_reasons": dg.MetadataValue.json(reasons),
        "quarantine_table_version": quarantine_version,
        "dropped_columns": dg.MetadataValue.json(
            {path: list(cols) for path, cols in batch.dropped_columns.items()}
        ),
        "files": dg.MetadataValue.json(files),
        # Files in the folder that were not read, and remarks such as zero-byte files: shown so
        # that a producer's misnamed or empty file is seen by a person, not silently skipped.
        "ignored_files": dg.MetadataValue.json(
            dict(sorted(batch.ignored_files.items())[:_MAX_LISTED_FILES])),
        "file_notes": dg.MetadataValue.json(
            {p: list(n) for p, n in sorted(batch.notes.items())[:_MAX_LISTED_FILES]}),
    }


def input_signature(definition: LakeAssetDef, lake: LakeResource, window: Window,
                    cache: HashCache | None = None) -> str:
    """Digest of everything an asset's output depends on: landing bytes, code, window."""
    contract = definition.landing_source
    assert contract is not None
    if contract.daily:
        inputs = [day_signature(lake.landing_path, contract, day, cache)
                  for day in window.days()]
    else:
        inputs = [snapshot_signature(lake.landing_path, contract, cache)]
    described = json.dumps({
        "asset": definition.name, "code_version": definition.code_version,
        "library": __version__, "window": window.label(), "inputs": inputs,
    }, sort_keys=True)
    return hashlib.sha256(described.encode()).hexdigest()


def landing_output(
    context: dg.AssetExecutionContext,
    lake: LakeResource,
    checkpoint: CheckpointResource,
    definition: LakeAssetDef,
    window: Window,
    spark: SparkResource | None = None,
) -> TableOutput:
    """An asset's output from its landing source, or a skip when nothing it reads changed.

    The skip needs the last settled write of this window to carry the same input
    signature (landing bytes + code version + window) and the slice's data files to be
    the ones that write left; the IO manager checks the files again before accepting.
    """
    contract = definition.landing_source
    assert contract is not None
    with checkpoint.open() as store:
        settled = last_settled(store, definition.name, window)
    cache = HashCache(settled.input_hashes if settled and lake.reuse_file_hashes else None)
    signature = input_signature(definition, lake, window, cache)
    _add_metadata(context, {"input_files_hashed": cache.hashed,
                                 "input_files_hash_reused": cache.reused})
    if _inputs_unchanged(context, lake, definition, window, signature, settled):
        return TableOutput.unchanged_inputs(signature, cache.kept())
    if spark is not None:
        output = _spark_output(context, lake, spark, definition, window, signature)
    else:
        rows = load_landing(context, lake, contract, window)
        output = TableOutput(definition.derive(rows) if definition.derive else rows, signature)
    return dataclasses.replace(output, input_hashes=cache.kept())


def _inputs_unchanged(context: dg.AssetExecutionContext, lake: LakeResource,
                      definition: LakeAssetDef, window: Window, signature: str,
                      settled: SettledWrite | None) -> bool:
    if (settled is None or settled.input_signature != signature
            or settled.files != slice_signature(lake.table(definition.name).open(),
                                                settled.conditions)):
        return False
    contract = definition.landing_source
    assert contract is not None
    ignored = unread_files(lake, contract, window)
    _add_metadata(context, {
        "input_signature": signature,
        "ignored_files": dg.MetadataValue.json(dict(sorted(ignored.items())[:_MAX_LISTED_FILES])),
    })
    warn_unread(context, ignored)
    context.log.info(f"{definition.name} {window.label()}: landing files and code unchanged "
                     "since the last settled write; not recomputed")
    return True


def _spark_output(context: dg.AssetExecutionContext, lake: LakeResource, spark: SparkResource,
                  definition: LakeAssetDef, window: Window, signature: str) -> TableOutput:
    """Landing rows read by Spark executors; only the (small) quarantine reaches the driver."""
    from idem_assets.spark import read_landing_spark

    contract = definition.landing_source
    assert contract is not None and window.start is not None and window.end is not None
    batch = read_landing_spark(spark.session(), lake.landing_path, contract, window.start,
                               window.end).persist()
    valid, bad = batch.counts()
    quarantine = batch.quarantine.toArrow()
    # The Spark reader cannot number CSV/JSON Lines rows; 0 marks "row unknown".
    numbers = pc.fill_null(quarantine.column("row_number"), 0)
    quarantine = quarantine.set_column(
        quarantine.schema.get_field_index("row_number"), "row_number", numbers)
    version = write_quarantine(lake, contract, quarantine, window)
    _add_metadata(context, {
        "engine": "spark", "landing_files": len(batch.files), "raw_rows": valid + bad,
        "valid_rows": valid, "quarantined_rows": bad, "quarantine_table_version": version,
    })
    rows = batch.rows
    if definition.derive_spark is not None:
        rows = definition.derive_spark(rows)
    return TableOutput(rows, signature, schema=definition.schema)


def warn_unread(context: dg.AssetExecutionContext, ignored: dict[str, str]) -> None:
    """Log landing files nobody reads (hidden files are in-progress writes by convention)."""
    unread = [(p, why) for p, why in sorted(ignored.items())
              if not is_hidden(PurePosixPath(p).name)]
    for relpath, why in unread[:_MAX_LISTED_FILES]:
        context.log.warning(f"landing file {relpath} was not read: {why}")


def unread_files(lake: LakeResource, contract: SourceContract, window: Window) -> dict[str, str]:
    """Files in the window's landing folders that the reader leaves alone (listing only)."""
    if contract.daily:
        found = [discover_day(lake.landing_path, contract, day) for day in window.days()]
    else:
        found = [discover_snapshot(lake.landing_path, contract)]
    return {path: why for item in found for path, why in item.ignored.items()}


def load_landing(
    context: dg.AssetExecutionContext,
    lake: LakeResource,
    contract: SourceContract,
    window: Window,
) -> pa.Table:
    """Read a source for an asset run: quarantine bad rows, record accounting, return valid rows."""
    batch = read_landing(lake, contract, window)
    version = write_quarantine(lake, contract, batch.quarantine, window)
    _add_metadata(context, landing_metadata(batch, version))
    if batch.quarantine.num_rows:
        context.log.warning(
            f"{batch.quarantine.num_rows} {contract.name} row(s) quarantined in "
            f"{QUARANTINE_TABLE} for {window.label()}"
        )
    warn_unread(context, batch.ignored_files)
    return batch.rows
