"""How a source's files are spelled, and the checks and sensor it gets: the parts of a
declaration that are options (each with its default)."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from idem_assets.landing.numbers import DECIMAL_SEPARATORS, THOUSANDS_SEPARATORS, Separators
from idem_assets.sources.columns import Declared

_DELIMITER_NAMES = {"tab": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}
_RESERVED_SUFFIXES = (".parquet", ".jsonl", ".gz")


class CsvOptions(Declared):
    """How the source's CSV files are written."""

    delimiter: str = Field(
        default=",", description="Field delimiter: one character, or tab, comma, semicolon, pipe."
    )
    header: bool = Field(
        default=True,
        description="false: files have no header line; their fields are the columns in "
        "declared order (no from: then).",
    )
    trailing_delimiter: bool = Field(
        default=False,
        description="true: every line ends with the delimiter (TPC-H's .tbl); that empty last "
        "field is not a column, and a line without it is a ragged row.",
    )
    suffixes: tuple[str, ...] = Field(
        default=(),
        description="More file suffixes read as this source's CSV, e.g. [.tbl, .dat, .txt] "
        "(and the same plus .gz).",
    )

    @field_validator("suffixes")
    @classmethod
    def _suffixes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for suffix in value:
            plain = suffix[1:]
            if (
                not suffix.startswith(".")
                or not 1 <= len(plain) <= 10
                or not (plain.isascii() and plain.isalnum())
                or suffix.lower() in _RESERVED_SUFFIXES
            ):
                raise ValueError(
                    f"suffix {suffix!r} must be a dot and letters or digits (like .tbl), and "
                    "not one of .parquet, .jsonl, .gz"
                )
        return tuple(s.lower() for s in value)

    @field_validator("delimiter")
    @classmethod
    def _delimiter(cls, value: str) -> str:
        value = _DELIMITER_NAMES.get(value, value)
        if len(value) != 1 or value in '"\r\n':
            raise ValueError(
                f"delimiter {value!r} must be one character other than a quote "
                "or a line break (or one of: tab, comma, semicolon, pipe)"
            )
        return value


class NumberOptions(Declared):
    """How number text is spelled in the source's files (every format)."""

    decimal: str = Field(default=".", description=f"Decimal separator: {DECIMAL_SEPARATORS}.")
    thousands: str | None = Field(
        default=None, description=f"Thousands separator, if any: {THOUSANDS_SEPARATORS}."
    )

    @property
    def separators(self) -> Separators:
        """The declared separators."""
        return Separators(self.decimal, self.thousands)

    @model_validator(mode="after")
    def _separators(self) -> NumberOptions:
        self.separators  # noqa: B018 - raises for a pair that cannot be read
        return self


class DeleteMarker(Declared):
    """Merge sources: the column that marks a row as a delete of its key."""

    column: str = Field(description="The marking column (read from the files, not stored).")
    value: str | bool = Field(
        default=True, description="The value that means delete: e.g. D for an op column."
    )


class CheckOptions(Declared):
    """The asset checks every declared source gets."""

    blocking: bool = Field(
        default=False, description="A failing ERROR check blocks downstream assets."
    )
    quarantine_share: float = Field(
        default=0.01,
        gt=0,
        le=1,
        description="The quarantine_share check warns when more than this share of a day's "
        "raw rows is quarantined (it fails when a non-empty day loads nothing).",
    )


class SensorOptions(Declared):
    """The landing sensor every declared source gets."""

    also_request: tuple[str, ...] = Field(
        default=(),
        description="Downstream assets (same partitions) to materialize in the same run.",
    )
    minimum_interval_seconds: int = Field(default=30, ge=5, description="Tick interval.")


class BackfillOptions(Declared):
    """How a backfill range of a daily source is split into runs, and how many may write."""

    max_days_per_run: int | None = Field(
        default=None,
        ge=1,
        description="A backfill range longer than this runs as several runs of at most this "
        "many days (Dagster's multi-run backfill policy; launch it from the UI or a backfill). "
        "Unset: one run and one commit per range, however long.",
    )
    writers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="How many runs may write the table at once (disjoint days): the limit of "
        "the table's pool, applied to the instance by `idem-assets pools`.",
    )
