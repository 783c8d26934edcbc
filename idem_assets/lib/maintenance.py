"""The lake's maintenance job: compact, vacuum and checkpoint every lake table.

Each table of a lake asset (and the shared quarantine table) is compacted (Z-ordered by the
columns its definition declares), vacuumed with a retention of at least seven days, and its
Delta log checkpointed. Compaction changes files, not content: fingerprints, rerun_equality
and the no-op proofs of later reruns are unaffected (the first rerun after it proves its
no-op by content and signs the new files; the next one by the checkpoint again). Each
table's outcome is an observation of its asset, shown on the asset's page.
"""

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import dagster as dg
from pydantic import Field

from idem_assets.checkpoint import CheckpointStore
from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.io_manager.erasure import erasable_sources, erasable_tables, scan_storage
from idem_assets.lake.erasure import satellites
from idem_assets.lake.maintenance import (
    MIN_RETENTION_HOURS,
    MaintenanceError,
    checkpoint,
    compact,
    vacuum,
)
from idem_assets.landing.quarantine import QUARANTINE_TABLE
from idem_assets.lib.asset_def import Z_ORDER_KEY
from idem_assets.resources import CheckpointResource, LakeResource


class MaintenanceConfig(dg.Config):
    """What one maintenance run does; every table of the lake by default."""

    tables: list[str] = Field(
        default_factory=list, description="Table names to maintain; empty: every lake table."
    )
    compact: bool = Field(default=True, description="Rewrite small files into larger ones.")
    vacuum: bool = Field(default=True, description="Delete files no recent version needs.")
    retention_hours: int = Field(
        default=MIN_RETENTION_HOURS,
        ge=MIN_RETENTION_HOURS,
        description="Vacuum keeps every file a version younger than this needs (at least "
        "seven days: time travel and running readers).",
    )
    checkpoint: bool = Field(default=True, description="Write a Delta log checkpoint.")


def lake_tables(specs: Iterable[dg.AssetSpec]) -> dict[str, tuple[str, ...]]:
    """Each lake table among ``specs`` and the columns it is Z-ordered by, plus quarantine."""
    tables: dict[str, tuple[str, ...]] = {}
    for spec in specs:
        if "idem/strategy" in spec.metadata and "dagster/table_name" in spec.metadata:
            z_order = _plain(spec.metadata.get(Z_ORDER_KEY)) or ()
            tables[_plain(spec.metadata["dagster/table_name"])] = tuple(z_order)
    tables.setdefault(QUARANTINE_TABLE, ())
    return tables


def _asset_specs(defs: dg.Definitions) -> Iterator[dg.AssetSpec]:
    """The asset specs ``defs`` declares (read without binding resources)."""
    for item in defs.assets or ():
        if isinstance(item, dg.AssetsDefinition):
            yield from item.specs
        elif isinstance(item, dg.AssetSpec):
            yield item


def _plain(value: object) -> Any:
    """A metadata entry's value, whether stored raw or as a MetadataValue."""
    return getattr(value, "value", value)


def maintain(
    context: dg.OpExecutionContext,
    config: MaintenanceConfig,
    lake: LakeResource,
    known: Mapping[str, tuple[str, ...]],
    store: CheckpointStore | None = None,
    erasable: Mapping[str, tuple[str, ...]] | None = None,
    sources: Mapping[str, tuple[str, ...]] | None = None,
) -> Iterator[dg.AssetObservation]:
    """Maintain the configured tables of ``known``; one observation per asset's table. With
    ``store``, each vacuumed table declaring ``erasable`` columns is scanned for erased keys
    afterwards (the ledger records what still holds each, and when a key is fully gone)."""
    names = config.tables or sorted(known)
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise dg.Failure(f"not lake tables of this code location: {', '.join(unknown)}")
    for name in names:
        target = lake.table(name)
        if not target.exists():
            context.log.info(f"{name}: no table yet, nothing to maintain")
            continue
        metadata: dict[str, Any] = {}
        try:
            if config.compact:
                done = compact(target, z_order=known[name])
                metadata |= {
                    "compacted": done.committed,
                    "files_removed": done.files_removed,
                    "files_added": done.files_added,
                    "z_order": ", ".join(done.z_order) or "none",
                }
            if config.vacuum:
                cleared = vacuum(target, config.retention_hours)
                # The tables kept beside it (a merge's tombstones) hold its keys too.
                beside = [
                    vacuum(t, config.retention_hours) for t in satellites(target) if t.exists()
                ]
                metadata |= {
                    "vacuumed_files": len(cleared.files) + sum(len(b.files) for b in beside),
                    "retention_hours": cleared.retention_hours,
                }
            if config.checkpoint:
                metadata["checkpoint_version"] = checkpoint(target)
        except MaintenanceError as error:
            raise dg.Failure(str(error)) from error
        opened = target.open()
        assert opened is not None
        metadata["delta_version"] = opened.version()
        quarantined = name == QUARANTINE_TABLE and bool(sources)
        if config.vacuum and store is not None and (name in (erasable or {}) or quarantined):
            scan = scan_storage(ErasureLedger(store), lake.table, erasable or {}, sources, [name])
            metadata["files_holding_erased_keys"] = sum(len(s.held) for s in scan.tables.values())
        context.log.info(f"{name}: {metadata}")
        if name != QUARANTINE_TABLE:
            yield dg.AssetObservation(asset_key=dg.AssetKey(name.split("/")), metadata=metadata)


def maintenance_definitions(defs: dg.Definitions) -> dg.Definitions:
    """The maintenance job and its nightly schedule over every lake table of ``defs``."""
    known = lake_tables(_asset_specs(defs))
    erasable = erasable_tables(defs)
    sources = erasable_sources(defs)

    @dg.op(
        name="maintain_lake_tables",
        description="Compacts, vacuums and checkpoints the lake's Delta tables.",
        out={},
    )
    def maintain_lake_tables(
        context: dg.OpExecutionContext,
        config: MaintenanceConfig,
        lake: LakeResource,
        checkpoint: CheckpointResource,
    ) -> Iterator[dg.AssetObservation]:
        with checkpoint.open() as store:
            yield from maintain(context, config, lake, known, store, erasable, sources)

    @dg.job(
        name="lake_maintenance_job",
        description="Compacts (Z-orders where declared), vacuums (retention >= 7 days) and "
        "checkpoints every lake table. Content never changes; reruns stay no-ops.",
    )
    def lake_maintenance_job() -> None:
        maintain_lake_tables()

    schedule = dg.ScheduleDefinition(
        name="lake_maintenance_schedule",
        job=lake_maintenance_job,
        cron_schedule="30 4 * * *",
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description="Every night after the daily load (02:30): compaction, vacuum, checkpoints.",
    )
    return dg.Definitions(jobs=[lake_maintenance_job], schedules=[schedule])
