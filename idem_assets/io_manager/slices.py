"""The partitions an output writes (or an input reads) as typed conditions on table columns.

Every kind of Dagster partition maps to conditions built from validated values only:

- a time window of any cadence, on a date column (``[start day, end day)``; the window
  must fall on day boundaries of its zone) or a timestamp column (``[start, end)``; naive
  timestamp columns compare wall-clock times in the partitions' zone), or on a text or
  integer column that spells each partition's start in a format (``column IN (...)`` of
  the window's partitions so spelled: exact for any format, sortable or not). The format
  is the partitions definition's ``fmt`` (dagster-delta's rule: ``%Y-%m-%d`` for daily
  partitions), or the output's ``partition_format`` metadata (a format, or a mapping of
  column to format) when the column spells it otherwise;
- static or dynamic partition keys, on a text, integer or date column (``column IN (...)``);
- multi-partitions: one condition per dimension, from ``partition_expr`` as a mapping of
  dimension name to column. The run's keys must form the full product of its dimensions'
  keys (and time keys a contiguous range), or the slice would replace partitions the run
  does not hold.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg

from idem_assets._lazy import lazy_module
from idem_assets.io_manager.window import Window
from idem_assets.lake.frames import is_text
from idem_assets.lake.predicates import Condition, In, Range, date_range

if TYPE_CHECKING:
    import pyarrow as pa

    TypeOf = Callable[[str], pa.DataType | None]
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy

_LABEL_CHARS = 120


class PartitionSliceError(ValueError):
    """Partitions that cannot be expressed as a slice of the table; the message says why."""


@dataclass(frozen=True)
class PartitionSlice:
    """What one write replaces or one read returns, and how to name it."""

    conditions: tuple[Condition, ...]
    partition_by: tuple[str, ...]
    label: str  # stable: checkpoint record ids and metadata use it
    window: Window = Window()  # the UTC-day window, when the slice is whole UTC days
    empty: bool = False  # a mapped input whose upstream partitions do not exist

    @property
    def display(self) -> str:
        """The slice for people: ``[start, end)`` for days, the label otherwise."""
        if self.window.partitioned:
            return self.window.label()
        return "whole table" if self.label == "all" else self.label

    @classmethod
    def whole_table(cls) -> PartitionSlice:
        """No partitions: the whole table."""
        return cls((), (), "all")

    @classmethod
    def of_window(cls, column: str, window: Window) -> PartitionSlice:
        """UTC days ``[start, end)`` of a date column (the daily lake assets' slice)."""
        assert window.start is not None and window.end is not None
        return cls(
            (date_range(column, window.start, window.end),),
            (column,),
            window.record_key(),
            window,
        )


def _safe_label(text: str) -> str:
    text = text.replace("/", "%2F")
    if len(text) <= _LABEL_CHARS:
        return text
    return f"{text[:40]}...#{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def _utc_days(window: dg.TimeWindow) -> Window | None:
    start, end = window.start.astimezone(dt.UTC), window.end.astimezone(dt.UTC)
    if start.timetz() == end.timetz() == dt.time(0, tzinfo=dt.UTC):
        return Window(start.date(), end.date())
    return None


def time_condition(
    column: str,
    window: dg.TimeWindow,
    kind: pa.DataType | None,
    partitions_def: dg.TimeWindowPartitionsDefinition | None = None,
    fmt: str | None = None,
) -> Condition:
    """``[start, end)`` of a time window over ``column`` of Arrow type ``kind``; on a text
    or integer column, the window's partitions of ``partitions_def`` spelled in ``fmt``
    (default: the definition's own ``fmt``)."""
    if kind is not None and (is_text(kind) or pa.types.is_integer(kind)):
        if partitions_def is None:
            raise PartitionSliceError(
                f"{column!r} is {kind}: time partitions on a text or integer column need "
                "their partitions definition to spell them"
            )
        return spelled_partitions(column, window, kind, partitions_def, fmt)
    start, end = window.start, window.end
    midnight = (
        start.timetz().replace(tzinfo=None) == end.timetz().replace(tzinfo=None) == dt.time(0)
    )
    if kind is None:
        kind = pa.date32() if midnight else pa.timestamp("us", tz="UTC")
    if pa.types.is_date(kind):
        if not midnight:
            raise PartitionSliceError(
                f"partitions [{start}, {end}) do not fall on whole days, but {column!r} is a "
                "date column: store them in a timestamp column"
            )
        return date_range(column, start.date(), end.date())
    if pa.types.is_timestamp(kind):
        return Range(column, start, end, wall_clock=kind.tz is None)
    raise PartitionSliceError(
        f"time partitions need a date, timestamp, text or integer column; {column!r} is {kind}"
    )


def spelled_partitions(
    column: str,
    window: dg.TimeWindow,
    kind: pa.DataType,
    partitions_def: dg.TimeWindowPartitionsDefinition,
    fmt: str | None = None,
) -> In:
    """``column IN (...)``: the start of each partition of ``window`` spelled in ``fmt``
    (text), or that spelling as a number (an integer column such as 20240301)."""
    spelling = fmt or partitions_def.fmt
    keys = partitions_def.get_partition_keys_in_time_window(window)
    if not keys:
        raise PartitionSliceError(f"no partition of {column!r} in [{window.start}, {window.end})")
    texts = [
        key
        if spelling == partitions_def.fmt
        else partitions_def.start_time_for_partition_key(key).strftime(spelling)
        for key in keys
    ]
    shown = f"{texts[0]!r}" if len(texts) == 1 else f"{texts[0]!r} .. {texts[-1]!r}"
    described = f"the run's {len(texts)} partition(s) spelled {spelling!r} ({shown})"
    if is_text(kind):
        return In(column, tuple(texts), described)
    try:
        numbers = tuple(int(text) for text in texts)
    except ValueError:
        raise PartitionSliceError(
            f"{column!r} is {kind}, but partitions spelled {spelling!r} are not numbers (e.g. "
            f"{texts[0]!r}): set the output's partition_format metadata to a format of digits "
            "only, such as '%Y%m%d'"
        ) from None
    return In(column, numbers, described)


def key_condition(column: str, keys: Sequence[str], kind: pa.DataType | None) -> Condition:
    """``column IN (keys)`` with keys typed like ``column`` (text, integers or dates)."""
    values: tuple[str | int | dt.date, ...]
    try:
        if kind is not None and pa.types.is_integer(kind):
            values = tuple(int(k) for k in keys)
        elif kind is not None and pa.types.is_date(kind):
            values = tuple(dt.date.fromisoformat(k) for k in keys)
        elif (
            kind is None
            or pa.types.is_string(kind)
            or pa.types.is_large_string(kind)
            or pa.types.is_string_view(kind)
        ):
            values = tuple(keys)
        else:
            raise PartitionSliceError(
                f"partition keys need a text, integer or date column; {column!r} is {kind}"
            )
    except ValueError as exc:
        if isinstance(exc, PartitionSliceError):
            raise
        raise PartitionSliceError(
            f"partition keys {list(keys)[:5]} do not fit {column!r} ({kind})"
        ) from exc
    return In(column, tuple(sorted(set(values))))  # type: ignore[type-var]


def _columns(
    partition_expr: str | Mapping[str, str] | None,
    asset: str,
    partitions_def: dg.PartitionsDefinition,
) -> dict[str, str]:
    """Dimension name -> column (a single-dimension definition has the name "")."""
    if partition_expr is None:
        raise PartitionSliceError(
            f"Asset '{asset}' has partitions, but no 'partition_expr' metadata value, so it is "
            "not known which column holds them. Set it, e.g. "
            '@asset(metadata={"partition_expr": "your_partition_column"})'
        )
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        if not isinstance(partition_expr, Mapping):
            raise PartitionSliceError(
                f"Asset '{asset}' is multi-partitioned: 'partition_expr' must map each "
                f"dimension ({', '.join(partitions_def.partition_dimension_names)}) to a column"
            )
        missing = [d for d in partitions_def.partition_dimension_names if d not in partition_expr]
        if missing:
            raise PartitionSliceError(
                f"Asset '{asset}' has partition dimension(s) {', '.join(missing)}, but its "
                "'partition_expr' metadata has no entry for them"
            )
        return {d: str(partition_expr[d]) for d in partitions_def.partition_dimension_names}
    if isinstance(partition_expr, Mapping):
        if len(partition_expr) != 1:
            raise PartitionSliceError(
                f"Asset '{asset}' has one partition dimension; 'partition_expr' is a column name"
            )
        return {"": str(next(iter(partition_expr.values())))}
    return {"": str(partition_expr)}


def _contiguous(
    partitions_def: dg.TimeWindowPartitionsDefinition, keys: Sequence[str]
) -> dg.TimeWindow:
    windows = sorted(
        (partitions_def.time_window_for_partition_key(k) for k in keys), key=lambda w: w.start
    )
    first, last = windows[0], windows[-1]
    every = partitions_def.get_partition_keys_in_range(
        dg.PartitionKeyRange(
            partitions_def.get_partition_key_for_timestamp(first.start.timestamp()),
            partitions_def.get_partition_key_for_timestamp(last.start.timestamp()),
        )
    )
    if len(every) != len(set(keys)):
        raise PartitionSliceError(
            f"time partitions {sorted(keys)[:5]} are not a contiguous range: one write "
            "replaces a contiguous range, so run them in separate runs"
        )
    return dg.TimeWindow(first.start, last.end)


def arrow_type_of(schema: pa.Schema | None) -> Callable[[str], pa.DataType | None]:
    """The type of a column by name in ``schema`` (None when unknown), for slice conditions."""

    def type_of(column: str) -> pa.DataType | None:
        if schema is None or column not in schema.names:
            return None
        return schema.field(column).type

    return type_of


def partitions_label(context: dg.OutputContext | dg.InputContext) -> tuple[str, Window]:
    """A stable name for the run's partitions, and their UTC-day window when they are days.

    Checkpoint record ids start with it: ``2024-03-01..2024-03-04`` for whole UTC days,
    ISO instants for other windows, sorted keys for static or dynamic partitions,
    ``dimension=...`` joined by ``|`` for multi-partitions.
    """
    partitions_def = context.asset_partitions_def
    keys = list(context.asset_partition_keys)
    if not keys:
        return "none", Window()
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        window = context.asset_partitions_time_window
        days = _utc_days(window)
        if days is not None:
            return days.record_key(), days
        return _safe_label(f"{window.start.isoformat()}..{window.end.isoformat()}"), Window()
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        parts = []
        for dimension in partitions_def.partition_dimension_names:
            values = sorted({k.keys_by_dimension[dimension] for k in keys})  # type: ignore[attr-defined]
            parts.append(f"{dimension}={','.join(values)}")
        return _safe_label("|".join(parts)), Window()
    return _safe_label(",".join(sorted(map(str, keys)))), Window()


def partition_slice(
    context: dg.OutputContext | dg.InputContext,
    partition_expr: str | Mapping[str, str] | None,
    type_of: TypeOf,
) -> PartitionSlice:
    """The slice of a partitioned output or input; ``type_of`` gives a column's Arrow type."""
    partitions_def = context.asset_partitions_def
    asset = context.asset_key.to_user_string() if context.has_asset_key else "output"
    columns = _columns(partition_expr, asset, partitions_def)
    label, days = partitions_label(context)
    keys = list(context.asset_partition_keys)
    if not keys:
        # A mapped input before the upstream's first partition: nothing to read.
        return PartitionSlice((), tuple(columns.values()), label, empty=True)
    formats = partition_formats(context, columns)
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        conditions = _multi_conditions(partitions_def, keys, columns, type_of, formats)
        return PartitionSlice(conditions, tuple(columns.values()), label)
    column = columns[""]
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        condition = time_condition(
            column,
            context.asset_partitions_time_window,
            type_of(column),
            partitions_def,
            formats.get(column),
        )
        on_dates = isinstance(condition, Range) and not isinstance(condition.start, dt.datetime)
        return PartitionSlice((condition,), (column,), label, days if on_dates else Window())
    return PartitionSlice((key_condition(column, keys, type_of(column)),), (column,), label)


def partition_formats(
    context: dg.OutputContext | dg.InputContext, columns: Mapping[str, str]
) -> dict[str, str]:
    """Column -> format from the asset's ``partition_format`` metadata (an input reads its
    upstream output's): one format for a single column, or a mapping of column to format."""
    if isinstance(context, dg.InputContext):
        upstream = context.upstream_output
        metadata = (upstream.definition_metadata if upstream is not None else None) or {}
    else:
        metadata = context.definition_metadata or {}
    raw = metadata.get("partition_format")
    raw = getattr(raw, "value", raw) if isinstance(raw, dg.MetadataValue) else raw
    if raw is None:
        return {}
    if isinstance(raw, str):
        targets = list(columns.values())
        if len(targets) != 1:
            raise PartitionSliceError(
                "partition_format is one format, but the asset has several partition columns: "
                "map each column to its format"
            )
        found = {targets[0]: raw}
    elif isinstance(raw, Mapping):
        found = {str(k): str(v) for k, v in raw.items()}
    else:
        raise PartitionSliceError(
            f"partition_format must be a format such as '%Y%m%d' or a mapping of column to "
            f"format, not {type(raw).__name__}"
        )
    for column, spelling in found.items():
        if "%" not in spelling:
            raise PartitionSliceError(
                f"partition_format for {column!r} is {spelling!r}: a strftime format such as "
                "'%Y%m%d' is expected"
            )
    return found


def _multi_conditions(
    partitions_def: dg.MultiPartitionsDefinition,
    keys: Sequence[object],
    columns: Mapping[str, str],
    type_of: TypeOf,
    formats: Mapping[str, str],
) -> tuple[Condition, ...]:
    by_dimension: dict[str, set[str]] = {d: set() for d in columns}
    for key in keys:
        assert isinstance(key, dg.MultiPartitionKey)
        for dimension, value in key.keys_by_dimension.items():
            by_dimension[dimension].add(value)
    product = 1
    for values in by_dimension.values():
        product *= len(values)
    if product != len(set(keys)):
        raise PartitionSliceError(
            f"the run's {len(set(keys))} multi-partition keys are not every combination of "
            f"its dimensions' keys ({product}): one write replaces such a product, so run the "
            "others separately"
        )
    conditions: list[Condition] = []
    for dimension in partitions_def.partition_dimension_names:
        column, values = columns[dimension], sorted(by_dimension[dimension])
        inner = partitions_def.get_partitions_def_for_dimension(dimension)
        if isinstance(inner, dg.TimeWindowPartitionsDefinition):
            window = _contiguous(inner, values)
            conditions.append(
                time_condition(column, window, type_of(column), inner, formats.get(column))
            )
        else:
            conditions.append(key_condition(column, values, type_of(column)))
    return tuple(conditions)
