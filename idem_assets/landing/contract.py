"""The landing contract of one source: its typed columns, where its files live, how to read them.

A contract is the compiled form of a source declaration (``idem_assets.sources``); the
library itself holds no source. Raw files sit in the folders of the source's layout,
``<landing>/<source>/date=YYYY-MM-DD/*.{parquet,csv,jsonl}[.gz]`` by default, or in one
snapshot folder whose newest file is read. See docs/landing.md for every rule.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa

from idem_assets.landing.layout import DEFAULT_DAILY_LAYOUT, DEFAULT_SNAPSHOT_LAYOUT, Layout
from idem_assets.landing.raw import MAX_FIELD_BYTES
from idem_assets.landing.rules import ValueRule, rules_of

UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")
MONEY = pa.decimal128(18, 2)
FORMATS = ("parquet", "csv", "jsonl")
EpochUnit = Literal["seconds", "milliseconds"]
# Text encodings a source may declare (CSV and JSON Lines); Parquet carries its own.
ENCODINGS = ("utf-8", "utf-8-sig", "utf-16", "cp1252", "latin-1")


@dataclass(frozen=True)
class SourceContract:
    """What a landing source must provide, how its files are read and how rows are identified."""

    name: str
    schema: pa.Schema  # the columns read from files, with their lake names and types
    natural_key: tuple[str, ...]
    # Newest value wins when the same natural key arrives more than once.
    version_column: str | None
    # Column whose date must equal the day of the file's folder (None: not checked).
    date_column: str | None = None
    daily: bool = True
    layout_template: str | None = None  # None: the default for daily / snapshot sources
    formats: tuple[str, ...] = FORMATS
    # Lake column -> the name files give it, for renamed columns only.
    file_columns: Mapping[str, str] = field(default_factory=dict)
    # IANA zone of timestamps written without an offset (and of naive Parquet timestamps).
    timezone: str = "UTC"
    epoch_columns: Mapping[str, EpochUnit] = field(default_factory=dict)
    decimal_separator: str = "."
    thousands_separator: str | None = None
    csv_delimiter: str = ","
    # False: CSV files have no header line; their fields are the columns in schema order.
    csv_header: bool = True
    # True: every CSV line (the header too) ends with the delimiter; that empty last field
    # is not a column.
    csv_trailing_delimiter: bool = False
    # More file suffixes read as this source's CSV (".tbl", ".dat"; with ".gz" too).
    csv_suffixes: tuple[str, ...] = ()
    encoding: str = "utf-8"  # of CSV and JSON Lines files (one of ENCODINGS)
    # Lake column -> text spellings that mean null there (CSV and JSON Lines text).
    null_values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Date columns whose value is the day of the file's folder, not read from the files.
    folder_day_columns: tuple[str, ...] = ()
    # Date and timestamp column -> the strftime format its text is written in.
    time_formats: Mapping[str, str] = field(default_factory=dict)
    rules: tuple[ValueRule, ...] = ()
    first_day: dt.date | None = None
    max_field_bytes: int = MAX_FIELD_BYTES

    @property
    def columns(self) -> list[str]:
        """Contract column names, in schema order."""
        return list(self.schema.names)

    @property
    def file_read_columns(self) -> list[str]:
        """Contract columns read from the files (not the folder's day), in schema order."""
        return [c for c in self.schema.names if c not in self.folder_day_columns]

    @property
    def layout(self) -> Layout:
        """Where this source's folders are."""
        default = DEFAULT_DAILY_LAYOUT if self.daily else DEFAULT_SNAPSHOT_LAYOUT
        return Layout(self.layout_template or default, self.name)

    def file_name(self, column: str) -> str:
        """The name files give a contract column (itself unless it is renamed)."""
        return self.file_columns.get(column, column)

    @property
    def quarantine_rules(self) -> tuple[ValueRule, ...]:
        """Value rules whose breaking rows are kept out of the table."""
        return rules_of(self.rules, "quarantine")

    @property
    def check_rules(self) -> tuple[ValueRule, ...]:
        """Value rules reported by asset checks (rows are loaded)."""
        return rules_of(self.rules, "warn", "error")

    def day_folder(self, day: dt.date) -> str:
        """The folder holding this source's files for ``day``, relative to the landing root."""
        if not self.daily:
            raise ValueError(f"{self.name} is a snapshot source, it has no day folders")
        return self.layout.folder(day)

    def snapshot_folder(self) -> str:
        """The folder of a snapshot source's files, relative to the landing root."""
        if self.daily:
            raise ValueError(f"{self.name} is a daily source, it has no snapshot folder")
        return self.layout.folder()

    def before_first_day(self, day: dt.date) -> bool:
        """Whether ``day`` lies before the source's first partition day."""
        return self.first_day is not None and day < self.first_day


class DayBeforeFirstDayError(ValueError):
    """A day was asked for that lies before a source's first partition day."""

    def __init__(self, contract: SourceContract, days: list[dt.date]) -> None:
        first = contract.first_day
        shown = ", ".join(d.isoformat() for d in days[:5]) + (" ..." if len(days) > 5 else "")
        super().__init__(
            f"{contract.name}: day(s) {shown} are before the source's first partition day "
            f"{first}: they are not partitions of its asset. Set first_day in the source's "
            "declaration to an earlier day to load them"
        )
        self.days = days
