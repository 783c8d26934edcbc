"""One file's raw rows to contract-typed valid rows plus quarantine rows with reasons."""

from __future__ import annotations

import datetime as dt
import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from idem_assets._lazy import lazy_module
from idem_assets.landing.coerce import Coerced, ReadAs, coerce
from idem_assets.landing.contract import SourceContract
from idem_assets.landing.raw import RawRows, raw_record_json, unique_names

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pl = lazy_module("polars")


@functools.cache
def quarantine_schema() -> pa.Schema:
    """The quarantine table's columns (batch and stream alike)."""
    return pa.schema(
        [
            pa.field("source", pa.string(), nullable=False),
            pa.field("partition_date", pa.date32()),  # the folder date; null for snapshots
            pa.field("source_file", pa.string(), nullable=False),  # relpath in the landing dir
            pa.field("row_number", pa.int64(), nullable=False),  # 1-based data row in the file
            pa.field("reason", pa.string(), nullable=False),
            pa.field("raw_record", pa.string(), nullable=False),  # JSON of the raw field values
        ]
    )


def __getattr__(name: str) -> Any:
    # QUARANTINE_SCHEMA, built on first use (Arrow is not imported with this module).
    if name == "QUARANTINE_SCHEMA":
        return quarantine_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_PRESENT = "\x00present:"
_PARSED = "\x00parsed"
_RULE = "\x00rule:"
_ERROR = "\x00error:"
_FOLDER_DAY = "\x00folder_day"


@dataclass(frozen=True)
class Normalised:
    """A file's outcome: valid rows, quarantined rows, and the extra columns dropped."""

    rows: pa.Table
    quarantine: pa.Table
    dropped_columns: tuple[str, ...]
    # Column -> {null spelling: values read as null}, for the declared spellings seen.
    null_spellings: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Rule:
    violated: pl.Expr  # over typed columns named after the contract
    message: pl.Expr


def _row_rules(contract: SourceContract, dated: bool) -> list[_Rule]:
    """Rules on typed values: keys, version, folder date, and quarantine-severity value rules.

    ``dated``: the rows come from a day folder, whose day is the column ``_FOLDER_DAY``.
    """
    rules: list[_Rule] = []
    for key in contract.natural_key:
        value = pl.col(key)
        is_text = pa.types.is_string(contract.schema.field(key).type)
        missing = value.is_null() | (value.str.strip_chars() == "" if is_text else pl.lit(False))
        rules.append(_Rule(missing, pl.lit(f"{key}: natural key is null or blank")))
    version = contract.version_column
    if version and version not in contract.natural_key:
        rules.append(
            _Rule(
                pl.col(version).is_null(),
                pl.lit(f"{version}: version column is null, so newest-wins cannot order this row"),
            )
        )
    if contract.date_column and dated:
        column, folder = pl.col(contract.date_column), pl.col(_FOLDER_DAY)
        rules.append(
            _Rule(
                column.is_null(),
                pl.format(
                    f"{contract.date_column}: is null but must equal the partition folder "
                    "date={}",
                    folder.cast(pl.String),
                ),
            )
        )
        rules.append(
            _Rule(
                column != folder,
                pl.format(
                    f"{contract.date_column}: {{}} is outside the partition folder date={{}}",
                    column.cast(pl.String),
                    folder.cast(pl.String),
                ),
            )
        )
    for declared in contract.schema:
        if not declared.nullable and declared.name not in contract.natural_key:
            rules.append(
                _Rule(
                    pl.col(declared.name).is_null(),
                    pl.lit(f"{declared.name}: is null but the column is declared not nullable"),
                )
            )
    for rule in contract.quarantine_rules:
        rules.append(_Rule(rule.violated(), rule.reason()))
    return rules


@dataclass(frozen=True)
class _Split:
    valid: pa.Table
    invalid: pl.Series  # bool per raw row
    reasons: list[str]  # one per invalid row, in row order


@dataclass(frozen=True)
class _Judgement:
    """How rows of one raw shape are typed and judged: built once, used for every file.

    The expressions depend on the contract, the raw column types and whether values are
    text, not on the file or its day (the folder's day is a column), so the thousands of
    small files of a long history share one judgement instead of building one each.
    """

    coerced: dict[str, Coerced]
    typed: tuple[pl.Expr, ...]
    parse_bad: pl.Expr
    invalid: pl.Expr
    reasons: tuple[pl.Expr, ...]
    errors: tuple[pl.Expr, ...]


# Judgements by (contract, raw column types, text, dated); the contract is kept with its
# entry so an id is never mistaken for another contract's.
_JUDGEMENTS: dict[
    tuple[int, tuple[tuple[str, Any], ...], bool, bool], tuple[SourceContract, _Judgement]
] = {}
_MAX_JUDGEMENTS = 256


def _judgement(contract: SourceContract, schema: pl.Schema, text: bool, dated: bool) -> _Judgement:
    """The judgement of rows with this raw ``schema`` (cached)."""
    key = (id(contract), tuple(schema.items()), text, dated)
    found = _JUDGEMENTS.get(key)
    if found is not None and found[0] is contract:
        return found[1]
    coerced = {}
    for f in contract.schema:
        if f.name in contract.folder_day_columns:
            day = pl.col(_FOLDER_DAY) if dated else pl.lit(None, pl.Date)
            coerced[f.name] = Coerced(day, pl.lit(None, pl.String), pl.lit(False))
            continue
        dtype = schema[f.name]
        raw = pl.col(f.name)
        spellings = contract.column(f.name).null_values if text else None
        if spellings and dtype == pl.String:
            raw = pl.when(raw.str.strip_chars().is_in(list(spellings))).then(None).otherwise(raw)
        coerced[f.name] = coerce(f.name, f.type, dtype, ReadAs.of(contract, f.name), raw)
    parse_bad = pl.any_horizontal(
        pl.col(f"{_PRESENT}{name}") & pl.col(name).is_null() for name in coerced
    )
    rules = _row_rules(contract, dated)
    broken = pl.any_horizontal(rule.violated.fill_null(False) for rule in rules)
    judgement = _Judgement(
        coerced=coerced,
        typed=(
            *(c.value.alias(name) for name, c in coerced.items()),
            *(c.present.alias(f"{_PRESENT}{name}") for name, c in coerced.items()),
            *((pl.col(_FOLDER_DAY),) if dated else ()),
        ),
        parse_bad=parse_bad,
        invalid=parse_bad | broken,
        reasons=tuple(
            pl.when(pl.col(_PARSED) & rule.violated).then(rule.message).alias(f"{_RULE}{i}")
            for i, rule in enumerate(rules)
        ),
        errors=tuple(c.error.alias(f"{_ERROR}{name}") for name, c in coerced.items()),
    )
    if len(_JUDGEMENTS) >= _MAX_JUDGEMENTS:
        _JUDGEMENTS.clear()
    _JUDGEMENTS[key] = (contract, judgement)
    return judgement


def _split(
    frame: pl.DataFrame, contract: SourceContract, partition_date: dt.date | None, text: bool
) -> _Split:
    """Type every contract column, judge every row, and explain only the rejected ones.

    ``frame`` holds the contract columns read from files under their contract names, as
    the file gave them; the folder's day fills its columns. ``text``: the file is CSV or
    JSON Lines, whose text values may spell null (the declared ``null_values``).
    """
    dated = partition_date is not None
    judgement = _judgement(contract, frame.schema, text, dated)
    if dated:
        frame = frame.with_columns(pl.lit(partition_date, pl.Date).alias(_FOLDER_DAY))
    typed = frame.select(*judgement.typed)
    flags = typed.select(judgement.parse_bad.alias("parse"), judgement.invalid.alias("invalid"))
    invalid = flags.get_column("invalid")
    valid = typed.filter(~invalid).select(contract.columns).to_arrow().cast(contract.schema)
    if not invalid.any():
        return _Split(valid, invalid, [])
    # Parse errors explain their row; row rules only judge rows whose values all parsed.
    errors = frame.filter(invalid).select(*judgement.errors)
    parsed = ~flags.get_column("parse").filter(invalid)
    judged = (
        typed.filter(invalid).with_columns(pl.Series(_PARSED, parsed)).select(*judgement.reasons)
    )
    reasons = pl.concat([errors, judged], how="horizontal")
    joined = reasons.select(pl.concat_str(pl.all(), separator="; ", ignore_nulls=True))
    return _Split(valid, invalid, joined.to_series().to_list())


def _quarantine(
    contract: SourceContract,
    relpath: str,
    partition_date: dt.date | None,
    row_numbers: list[int],
    reasons: list[str],
    raw_records: list[str],
) -> pa.Table:
    count = len(row_numbers)
    return pa.table(
        {
            "source": [contract.name] * count,
            "partition_date": [partition_date] * count,
            "source_file": [relpath] * count,
            "row_number": row_numbers,
            "reason": reasons,
            "raw_record": raw_records,
        },
        schema=quarantine_schema(),
    )


def empty_rows(contract: SourceContract) -> pa.Table:
    """A zero-row table with exactly the contract schema."""
    return contract.schema.empty_table()


def _null_spellings(frame: pl.DataFrame, contract: SourceContract) -> dict[str, dict[str, int]]:
    """How many values of each column were each declared null spelling."""
    out: dict[str, dict[str, int]] = {}
    for declared in contract.fields:
        column, spellings = declared.name, declared.null_values
        if not spellings or declared.folder_day or frame.schema.get(column) != pl.String:
            continue
        found = (
            frame.select(pl.col(column).str.strip_chars().alias("v"))
            .filter(pl.col("v").is_in(list(spellings)))
            .group_by("v")
            .len()
        )
        if found.height:
            out[column] = dict(
                sorted(zip(found["v"].to_list(), found["len"].to_list(), strict=True))
            )
    return out


def file_problem(names: list[str], contract: SourceContract) -> str | None:
    """A whole-file problem for a file with these column names: missing or doubled columns."""
    counts = Counter(names)
    read = contract.file_read_columns
    wanted = {contract.file_name(c): c for c in read}
    missing = [shown_column(c, contract) for c in read if contract.file_name(c) not in counts]
    doubled = sorted(
        shown_column(wanted[n], contract) for n, k in counts.items() if k > 1 and n in wanted
    )
    problems = []
    if missing:
        problems.append(
            f"file lacks contract column(s) {', '.join(missing)} (it has: {', '.join(names)})"
        )
    if doubled:
        problems.append(f"contract column(s) {', '.join(doubled)} appear more than once")
    return " and ".join(problems) or None


def shown_column(column: str, contract: SourceContract) -> str:
    """A contract column as a file problem names it: ``amt (for amount)`` when renamed."""
    name = contract.file_name(column)
    return name if name == column else f"{name} (for {column})"


def normalise(
    raw: RawRows,
    contract: SourceContract,
    relpath: str,
    partition_date: dt.date | None,
    file_names: Sequence[str] | None = None,
    fmt: str = "csv",
) -> Normalised:
    """Type, validate and split one file's rows; every raw row lands on exactly one side.

    ``file_names`` are the columns the whole file has when ``raw`` is one piece of it (JSON
    Lines keys vary by line): a column the file has but this piece lacks reads as null.
    ``fmt`` is the file's format (null spellings apply to CSV and JSON Lines text).
    """
    names = raw.table.column_names
    read = contract.file_read_columns
    wanted = {contract.file_name(c) for c in read}
    dropped = tuple(dict.fromkeys(n for n in names if n not in wanted))
    unique = unique_names(names)
    frame = pl.from_arrow(raw.table.rename_columns(unique))
    assert isinstance(frame, pl.DataFrame)
    numbers = pl.Series(raw.row_numbers, dtype=pl.Int64)
    present = list(names) if file_names is None else list(file_names)
    problem = file_problem(present, contract) if raw.table.num_rows else None
    absent = [n for n in dict.fromkeys(present) if n in wanted and n not in names]
    if problem is None and absent and frame.height:
        frame = frame.with_columns(pl.lit(None, pl.String).alias(n) for n in absent)
        ordered = [n for n in dict.fromkeys(present) if n in frame.columns]
        frame = frame.select([*ordered, *(c for c in frame.columns if c not in ordered)])
    spellings: dict[str, dict[str, int]] = {}
    if problem is not None:
        valid, reasons = empty_rows(contract), [problem] * frame.height
        bad_frame, bad_numbers = frame, numbers
    elif frame.height:
        # The file's own names for the contract columns (unique, so each appears once).
        contract_frame = frame.select(pl.col(contract.file_name(c)).alias(c) for c in read)
        text = fmt != "parquet"
        spellings = _null_spellings(contract_frame, contract) if text else {}
        split = _split(contract_frame, contract, partition_date, text)
        valid, reasons = split.valid, split.reasons
        bad_frame, bad_numbers = frame.filter(split.invalid), numbers.filter(split.invalid)
    else:
        valid, reasons = empty_rows(contract), []
        bad_frame, bad_numbers = frame, numbers
    records = [raw_record_json(r) for r in bad_frame.to_dicts()]
    rows = sorted(
        [
            *zip(bad_numbers.to_list(), reasons, records, strict=True),
            *((r.row_number, r.reason, r.raw_record) for r in raw.rejected),
        ]
    )
    quarantine = _quarantine(
        contract,
        relpath,
        partition_date,
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
    )
    return Normalised(valid, quarantine, dropped, spellings)
