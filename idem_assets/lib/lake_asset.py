"""What every lake asset declares once, so its asset, IO manager and checks agree."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import dagster as dg
import pyarrow as pa
from pydantic import Field

from idem_assets.io_manager import Window, WriteSpec
from idem_assets.landing.contract import SourceContract
from idem_assets.landing.rules import ValueRule
from idem_assets.partitions import SINGLE_RUN_BACKFILL
from idem_assets.resources import LakeResource

if TYPE_CHECKING:
    from idem_assets.lib.checks.base import LakeCheck

LAKE_IO_MANAGER_KEY = "lake_io"
# Asset metadata naming the columns the maintenance job Z-orders a table by.
Z_ORDER_KEY = "idem_maintenance/z_order"
KINDS = {"deltalake", "polars"}

# Pure recomputation of an asset's output rows for a window, before deduplication:
# the asset returns it and the rerun-equality check compares it with the table.
Compute = Callable[[LakeResource, Window], pa.Table]


@dataclass(frozen=True)
class LakeAssetDef:
    """An asset's table contract: name, write spec, schema and how to recompute it."""

    name: str
    spec: WriteSpec
    schema: pa.Schema
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
    # Checks beyond the standard ones (rerun equality, unique key, landing checks).
    checks: tuple[LakeCheck, ...] = ()
    # Blocking checks: a failed ERROR check fails the step and stops downstream assets.
    blocking_checks: bool = False
    # When the asset runs by itself (declarative automation), e.g. lib.automation's.
    automation_condition: dg.AutomationCondition | None = None
    # Columns the maintenance job Z-orders the table by (none: plain compaction).
    z_order: tuple[str, ...] = ()

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
            for field in self.schema
        ]
        z_order = {Z_ORDER_KEY: list(self.z_order)} if self.z_order else {}
        return {
            **self.spec.to_metadata(),
            "dagster/column_schema": dg.TableSchema(columns=columns),
            "dagster/table_name": self.name,
            **z_order,
        }


class EngineConfig(dg.Config):
    """Where an asset's heavy transforms run, chosen per run (or per deployment)."""

    engine: Literal["local", "spark"] = Field(
        default="local",
        description="local: Arrow/Polars in the run process. spark: executors read the landing "
        "files, deduplicate and write Parquet; delta-rs commits (see docs/spark.md).",
    )


def lake_asset(
    definition: LakeAssetDef,
    *,
    description: str,
    ins: dict[str, dg.AssetIn] | None = None,
    **kwargs: Any,
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """The asset of a lake table, written by the IO manager, with its checks per partition.

    The decorated function returns the asset's output (rows or a ``TableOutput``); it may
    take ``context``, inputs and resources like any asset function. The asset carries the
    definition's checks as partitioned check specs: after the IO manager has written the
    output, the same step evaluates each selected check for every partition of the run
    (see ``idem_assets.lib.checks.base``). A run that selects only the checks reads the
    stored table and writes nothing. Partitioned assets get a single-run backfill policy,
    so a backfill range is one run and one Delta commit per table.
    """
    from idem_assets.lib.checks.base import check_outputs, check_specs, evaluate_checks
    from idem_assets.lib.checks.factory import standard_checks

    checks = standard_checks(definition)
    blocking = definition.blocking_checks
    daily = definition.partitions_def is not None

    def decorate(fn: Callable[..., Any]) -> dg.AssetsDefinition:
        signature = inspect.signature(fn)
        takes_lake = "lake" in signature.parameters
        if not takes_lake:  # the checks need the lake whether the function does or not
            lake = inspect.Parameter(
                "lake", inspect.Parameter.KEYWORD_ONLY, annotation=LakeResource
            )
            signature = signature.replace(parameters=[*signature.parameters.values(), lake])

        @functools.wraps(fn)
        def body(context: dg.AssetExecutionContext, *args: Any, **params: Any) -> Iterator[Any]:
            lake = params["lake"] if takes_lake else params.pop("lake")
            if definition.key in context.selected_asset_keys:
                yield dg.Output(fn(context, *args, **params), output_name=definition.name)
            yield from evaluate_checks(context, definition, lake, checks, blocking)
            yield from check_outputs(context, definition)

        body.__signature__ = signature  # type: ignore[attr-defined]
        out = dg.AssetOut(
            key=definition.key,
            io_manager_key=LAKE_IO_MANAGER_KEY,
            metadata=definition.metadata(),
            code_version=definition.code_version,
            group_name=definition.group_name,
            owners=list(definition.owners),
            kinds=KINDS,
            description=description,
            is_required=False,
            automation_condition=definition.automation_condition,
        )
        return dg.multi_asset(
            name=definition.name,
            outs={definition.name: out},
            ins=ins,
            partitions_def=definition.partitions_def,
            backfill_policy=SINGLE_RUN_BACKFILL if daily else None,
            check_specs=check_specs(definition, checks, blocking),
            can_subset=True,
            pool=kwargs.pop("pool", definition.pool),
            **kwargs,
        )(body)

    return decorate
