"""What every lake asset declares once, so its asset, IO manager and checks agree.

A leaf of ``lib``: the checks, the landing output and the asset decorator
(``lib.lake_asset``) all read a ``LakeAssetDef``; it imports none of them.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import dagster as dg
from pydantic import Field

from idem_assets._version import __version__
from idem_assets.io_manager import Window, WriteSpec
from idem_assets.io_manager.delta_modes import TABLE_CONFIGURATION_KEY
from idem_assets.io_manager.spec import LANDING_SOURCE
from idem_assets.lake.change_data import CHANGE_DATA_FEED
from idem_assets.lake.history import IS_CURRENT, VALID_FROM, VALID_TO
from idem_assets.landing.column_types import TypedColumn, arrow_schema
from idem_assets.landing.contract import SourceContract
from idem_assets.landing.rules import ValueRule
from idem_assets.partitions import SINGLE_RUN_BACKFILL
from idem_assets.resources import LakeResource

if TYPE_CHECKING:
    import pyarrow as pa

    # Pure recomputation of an asset's output rows for a window, before deduplication:
    # the asset returns it and the rerun-equality check compares it with the table.
    Compute = Callable[[LakeResource, Window], pa.Table]

LAKE_IO_MANAGER_KEY = "lake_io"
# Asset metadata naming the columns the maintenance job Z-orders a table by.
Z_ORDER_KEY = "idem_maintenance/z_order"
# Asset metadata naming how many runs may write the table at once (its pool's limit), and
# the longest run of a backfill (``idem-assets pools`` reads the first).
WRITERS_KEY = "idem_backfill/writers"
MAX_DAYS_KEY = "idem_backfill/max_days_per_run"
KINDS = {"deltalake", "polars"}


@dataclass(frozen=True)
class LakeAssetDef:
    """An asset's table contract: name, write spec, schema and how to recompute it."""

    name: str
    spec: WriteSpec
    # The table's columns: an Arrow schema, or typed columns (then Arrow is imported only
    # when a run needs the schema, not when the code location loads).
    schema: pa.Schema | tuple[TypedColumn, ...]
    compute: Compute
    column_descriptions: dict[str, str]
    # The landing source the asset loads, if any (enables the conservation check).
    landing_source: SourceContract | None = None
    # Columns derived from the landing rows before writing (e.g. a partition column),
    # on the local engine and on Spark (a function of a Spark DataFrame).
    derive: Callable[[pa.Table], pa.Table] | None = None
    derive_spark: Callable[[Any], Any] | None = None
    # Bump when the transform changes: reruns skip only on unchanged inputs AND code.
    code_version: str = "1"
    # Daily partitions of the asset (None: an unpartitioned table).
    partitions_def: dg.PartitionsDefinition | None = None
    group_name: str = "lake"
    owners: tuple[str, ...] = ()
    # Value rules reported by checks (warn / error), over the rows the asset writes.
    value_rules: tuple[ValueRule, ...] = ()
    # The quarantine_share check warns above this share of a day's raw rows.
    quarantine_share: float = 0.01
    # Blocking checks: a failed ERROR check fails the step and stops downstream assets.
    blocking_checks: bool = False
    # When the asset runs by itself (declarative automation), e.g. lib.automation's.
    automation_condition: dg.AutomationCondition | None = None
    # Columns the maintenance job Z-orders the table by (none: plain compaction).
    z_order: tuple[str, ...] = ()
    # Keep a Delta change data feed (each write feeds only the rows it changes).
    change_data_feed: bool = False
    # A backfill range longer than this runs as several runs of at most this many days
    # (Dagster's multi-run backfill policy); None: one run, one commit, whatever its length.
    max_days_per_run: int | None = None
    # How many runs may write the table at once (its pool's limit; disjoint days).
    writers: int = 1
    # The declaration the definition was built from (its JSON), when it came from one: a
    # change to it changes what the checks are judged by.
    declaration: str | None = None

    def __post_init__(self) -> None:
        if self.max_days_per_run is not None and self.max_days_per_run < 1:
            raise ValueError(f"max_days_per_run must be at least 1, got {self.max_days_per_run}")
        if self.writers < 1:
            raise ValueError(f"writers must be at least 1, got {self.writers}")
        if self.max_days_per_run is not None and self.partitions_def is None:
            raise ValueError(f"{self.name} has no partitions: max_days_per_run does not apply")

    @functools.cached_property
    def arrow_schema(self) -> pa.Schema:
        """The table's Arrow schema."""
        if isinstance(self.schema, tuple):
            return arrow_schema(self.schema)
        return self.schema

    @property
    def backfill_policy(self) -> dg.BackfillPolicy | None:
        """One run per backfill range, or runs of at most ``max_days_per_run`` days."""
        if self.partitions_def is None:
            return None
        if self.max_days_per_run is None:
            return SINGLE_RUN_BACKFILL
        return dg.BackfillPolicy.multi_run(max_partitions_per_run=self.max_days_per_run)

    @functools.cached_property
    def definition_digest(self) -> str:
        """Digest of what the asset's outputs and checks are judged by: the declaration (or
        code version), write spec, columns, rules and the library's version."""
        described = {
            "library": __version__,
            "name": self.name,
            "code_version": self.code_version,
            "declaration": self.declaration,
            "spec": self.spec.model_dump(mode="json"),
            "schema": [repr(column) for column in self.schema],
            "rules": [(rule.name, rule.describe(), rule.severity) for rule in self.value_rules],
            "quarantine_share": self.quarantine_share,
            "blocking": self.blocking_checks,
        }
        text = json.dumps(described, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def pool(self) -> str:
        """The concurrency pool of the table's writers: with a limit of 1 (dagster.yaml),
        two runs writing it queue instead of racing for the commit."""
        return f"lake/{self.name}"

    @property
    def key(self) -> dg.AssetKey:
        """The asset key (equal to the table path)."""
        return dg.AssetKey(self.name)

    def metadata(self) -> dict[str, Any]:
        """Definition metadata: the write spec plus a column schema for the UI."""
        columns = [
            dg.TableColumn(
                name=field.name,
                type=str(field.type),
                description=self.column_descriptions.get(field.name),
                constraints=dg.TableColumnConstraints(
                    nullable=field.nullable, unique=(self.spec.natural_key == (field.name,))
                ),
            )
            # Typed columns show their declared types (decimal(18,2)); an Arrow schema, Arrow's.
            # A delete marker is read, never stored.
            for field in self.schema
            if field.name != self.spec.delete_column
        ]
        if self.spec.strategy == "history":
            version = next(c.type for c in columns if c.name == self.spec.version_column)
            columns += [
                dg.TableColumn(
                    name=VALID_FROM, type=version, description="the version, valid from then"
                ),
                dg.TableColumn(
                    name=VALID_TO,
                    type=version,
                    description="the next version or delete; null: current",
                ),
                dg.TableColumn(name=IS_CURRENT, type="bool", description="valid_to is null"),
            ]
        z_order = {Z_ORDER_KEY: list(self.z_order)} if self.z_order else {}
        # dagster-delta's key: the table configuration of a table-creating write (an
        # existing table is given the property by its next write).
        feed = (
            {TABLE_CONFIGURATION_KEY: {CHANGE_DATA_FEED: "true"}} if self.change_data_feed else {}
        )
        source = {LANDING_SOURCE: self.landing_source.name} if self.landing_source else {}
        return {
            **self.spec.to_metadata(),
            **source,
            "dagster/column_schema": dg.TableSchema(columns=columns),
            "dagster/table_name": self.name,
            WRITERS_KEY: self.writers,
            **({MAX_DAYS_KEY: self.max_days_per_run} if self.max_days_per_run else {}),
            **z_order,
            **feed,
        }


class EngineConfig(dg.Config):
    """Where an asset's heavy transforms run, chosen per run (or per deployment)."""

    engine: Literal["local", "spark"] = Field(
        default="local",
        description="local: Arrow/Polars in the run process. spark: executors read the landing "
        "files, deduplicate and write Parquet; delta-rs commits (see docs/spark.md).",
    )
