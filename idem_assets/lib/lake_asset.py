"""The asset of a lake table: ``lake_asset`` turns a ``LakeAssetDef`` into a Dagster asset
written by the IO manager, with its checks evaluated per partition in the same step."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import dagster as dg

from idem_assets.io_manager import TableOutput
from idem_assets.lib.asset_def import KINDS, LAKE_IO_MANAGER_KEY, LakeAssetDef
from idem_assets.lib.checks.factory import standard_checks
from idem_assets.lib.checks.per_partition import (
    LakeCheck,
    check_outputs,
    check_specs,
    evaluate_checks,
)
from idem_assets.lib.landing_io import shared_landing_reads
from idem_assets.resources import CheckpointResource, LakeResource


def lake_asset(
    definition: LakeAssetDef,
    *,
    description: str,
    ins: dict[str, dg.AssetIn] | None = None,
    checks: Sequence[LakeCheck] = (),
    **kwargs: Any,
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """The asset of a lake table, written by the IO manager, with its checks per partition.

    The decorated function returns the asset's output (rows or a ``TableOutput``); it may
    take ``context``, inputs and resources like any asset function. The asset carries the
    definition's standard checks, then ``checks``, as partitioned check specs: after the IO
    manager has written the output, the same step evaluates each selected check for every
    partition of the run (see ``idem_assets.lib.checks.per_partition``). A run that selects
    only the checks reads the stored table and writes nothing. A backfill range is one run
    and one Delta commit per table, or runs of at most ``definition.max_days_per_run`` days
    each.

    Example:
        >>> import datetime as dt
        >>> import tempfile
        >>> import dagster as dg
        >>> import pyarrow as pa
        >>> from idem_assets import (
        ...     CheckpointResource, LakeAssetDef, LakeResource, Window, WriteSpec,
        ...     daily_partitions, default_resources, lake_asset, partition_dates,
        ... )
        >>> SCHEMA = pa.schema([("refund_id", pa.int64()), ("refund_date", pa.date32()),
        ...                     ("updated_at", pa.int64()), ("amount", pa.float64())])
        >>> def refunds_rows(lake: LakeResource, window: Window) -> pa.Table:
        ...     day = window.start  # the same window gives the same rows
        ...     return pa.table({"refund_id": [1, 2, 2], "refund_date": [day] * 3,
        ...                      "updated_at": [1, 1, 2], "amount": [5.0, 7.0, 8.0]},
        ...                     schema=SCHEMA)
        >>> REFUNDS = LakeAssetDef(
        ...     name="refunds",
        ...     spec=WriteSpec(strategy="overwrite", natural_key=("refund_id",),
        ...                    version_column="updated_at", partition_column="refund_date"),
        ...     schema=SCHEMA, compute=refunds_rows, column_descriptions={},
        ...     partitions_def=daily_partitions(dt.date(2024, 3, 1)),
        ... )
        >>> @lake_asset(REFUNDS, description="Refunds per day, overwritten per partition.")
        ... def refunds(context: dg.AssetExecutionContext, lake: LakeResource) -> pa.Table:
        ...     return refunds_rows(lake, Window(*partition_dates(context)))
        >>> root = tempfile.mkdtemp()
        >>> resources = default_resources(
        ...     LakeResource(landing_dir=root, lake_dir=root),
        ...     CheckpointResource(url=f"sqlite:///{root}/checkpoint.db"),
        ... )
        >>> done = dg.materialize([refunds], resources=resources, partition_key="2024-03-01")
        >>> meta = done.asset_materializations_for_node("refunds")[0].metadata
        >>> meta["dagster/row_count"].value, meta["duplicates_dropped"].value
        (2, 1)
        >>> sorted((e.check_name, e.passed) for e in done.get_asset_check_evaluations())
        [('rerun_equality', True), ('unique_natural_key', True)]
    """
    checks = [*standard_checks(definition), *checks]
    blocking = definition.blocking_checks

    def decorate(fn: Callable[..., Any]) -> dg.AssetsDefinition:
        # Annotations resolved where fn was written (Dagster reads them off this signature).
        signature = inspect.signature(fn, eval_str=True)
        # The checks need the lake and the checkpoint store whether the function does or not.
        added = {
            name: annotation
            for name, annotation in (("lake", LakeResource), ("checkpoint", CheckpointResource))
            if name not in signature.parameters
        }
        signature = signature.replace(
            parameters=[
                *signature.parameters.values(),
                *(
                    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
                    for name, annotation in added.items()
                ),
            ]
        )

        @functools.wraps(fn)
        def body(context: dg.AssetExecutionContext, *args: Any, **params: Any) -> Iterator[Any]:
            lake, checkpoint = params["lake"], params["checkpoint"]
            for name in added:
                params.pop(name)
            # The checks recompute the window from the files the write just read: while no
            # file changed (same paths and stamps), they judge that read instead of another.
            with shared_landing_reads():
                if definition.key in context.selected_asset_keys:
                    yield output_of(definition, fn(context, *args, **params))
                yield from evaluate_checks(context, definition, lake, checkpoint, checks, blocking)
            yield from check_outputs(context, definition)

        body.__signature__ = signature  # type: ignore[attr-defined]
        # Dagster before 1.13.2x finds resource parameters through typing.get_type_hints,
        # which reads __annotations__ rather than the signature: both name the added ones.
        body.__annotations__ = {
            name: parameter.annotation
            for name, parameter in signature.parameters.items()
            if parameter.annotation is not inspect.Parameter.empty
        }
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
            backfill_policy=definition.backfill_policy,
            check_specs=check_specs(definition, checks, blocking),
            can_subset=True,
            pool=kwargs.pop("pool", definition.pool),
            **kwargs,
        )(body)

    return decorate


def output_of(definition: LakeAssetDef, value: Any) -> dg.Output[Any]:
    """The step's output; its data version is the input signature when the asset gives one.

    A rerun on unchanged inputs keeps the partition's data version, so automation that
    follows data versions (``follows_upstream``) requests nothing downstream; changed
    inputs give a new one, whether or not the write then finds the rows unchanged.
    """
    signature = value.input_signature if isinstance(value, TableOutput) else None
    with warnings.catch_warnings():
        # Output's data_version is marked beta; the notice would repeat in every run's log.
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.Output(
            value,
            output_name=definition.name,
            data_version=dg.DataVersion(signature) if signature else None,
        )
