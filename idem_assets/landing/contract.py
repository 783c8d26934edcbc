"""The landing contract of one source: its typed columns, where its files live, how to read them.

A contract is the compiled form of a source declaration (``idem_assets.sources``); the
library itself holds no source. Raw files sit in the folders of the source's layout,
``<landing>/<source>/date=YYYY-MM-DD/*.{parquet,csv,jsonl}[.gz]`` by default, or in one
snapshot folder whose newest file is read. See docs/landing.md for every rule.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from idem_assets.landing.column_types import TypedColumn, arrow_schema
from idem_assets.landing.layout import DEFAULT_DAILY_LAYOUT, DEFAULT_SNAPSHOT_LAYOUT, Layout
from idem_assets.landing.numbers import Separators
from idem_assets.landing.raw import MAX_FIELD_BYTES
from idem_assets.landing.rules import ValueRule, rules_of

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("parquet", "csv", "jsonl")
EpochUnit = Literal["seconds", "milliseconds"]
# Text encodings a source may declare (CSV and JSON Lines); Parquet carries its own.
ENCODINGS = ("utf-8", "utf-8-sig", "utf-16", "cp1252", "latin-1")


@dataclass(frozen=True)
class ContractColumn(TypedColumn):
    """One column read for a source: its lake name and type, and how its files spell it."""

    file_name: str | None = None  # the name files give it, when it is renamed
    epoch: EpochUnit | None = None  # timestamps written as epoch seconds or milliseconds
    format: str | None = None  # strftime format of date and timestamp text
    # Text spellings that mean null here (CSV and JSON Lines text).
    null_values: tuple[str, ...] = ()
    # A date column whose value is the day of the file's folder, not read from the files.
    folder_day: bool = False


@dataclass(frozen=True)
class SourceContract:
    """What a landing source must provide, how its files are read and how rows are identified."""

    name: str
    # The columns read (from files, or the folder's day), in schema order.
    fields: tuple[ContractColumn, ...]
    natural_key: tuple[str, ...]
    # Newest value wins when the same natural key arrives more than once.
    version_column: str | None
    # Column whose date must equal the day of the file's folder (None: not checked).
    date_column: str | None = None
    daily: bool = True
    layout_template: str | None = None  # None: the default for daily / snapshot sources
    formats: tuple[str, ...] = FORMATS
    # IANA zone of timestamps written without an offset (and of naive Parquet timestamps).
    timezone: str = "UTC"
    separators: Separators = Separators()
    csv_delimiter: str = ","
    # False: CSV files have no header line; their fields are the columns in schema order.
    csv_header: bool = True
    # True: every CSV line (the header too) ends with the delimiter; that empty last field
    # is not a column.
    csv_trailing_delimiter: bool = False
    # More file suffixes read as this source's CSV (".tbl", ".dat"; with ".gz" too).
    csv_suffixes: tuple[str, ...] = ()
    encoding: str = "utf-8"  # of CSV and JSON Lines files (one of ENCODINGS)
    rules: tuple[ValueRule, ...] = ()
    first_day: dt.date | None = None
    # The last partition day, included (None: partitions run up to today).
    last_day: dt.date | None = None
    max_field_bytes: int = MAX_FIELD_BYTES

    @functools.cached_property
    def schema(self) -> pa.Schema:
        """The rows read: every column's lake name and Arrow type (keys never null)."""
        keys = set(self.natural_key)
        return arrow_schema(
            dataclasses.replace(c, nullable=c.nullable and c.name not in keys) for c in self.fields
        )

    @functools.cached_property
    def _by_name(self) -> dict[str, ContractColumn]:
        return {c.name: c for c in self.fields}

    def column(self, name: str) -> ContractColumn:
        """The contract column called ``name``."""
        return self._by_name[name]

    @property
    def columns(self) -> list[str]:
        """Contract column names, in schema order."""
        return [c.name for c in self.fields]

    @property
    def file_read_columns(self) -> list[str]:
        """Contract columns read from the files (not the folder's day), in schema order."""
        return [c.name for c in self.fields if not c.folder_day]

    @property
    def folder_day_columns(self) -> tuple[str, ...]:
        """Date columns holding the day of the file's folder."""
        return tuple(c.name for c in self.fields if c.folder_day)

    @property
    def layout(self) -> Layout:
        """Where this source's folders are."""
        default = DEFAULT_DAILY_LAYOUT if self.daily else DEFAULT_SNAPSHOT_LAYOUT
        return Layout(self.layout_template or default, self.name)

    def file_name(self, column: str) -> str:
        """The name files give a contract column (itself unless it is renamed)."""
        return self._by_name[column].file_name or column

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

    def after_last_day(self, day: dt.date) -> bool:
        """Whether ``day`` lies after the source's last partition day (when it has one)."""
        return self.last_day is not None and day > self.last_day


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
