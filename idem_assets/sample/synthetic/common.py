"""What every source simulation shares: the calendar, time helpers, formats and counts."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal

from idem_assets.sample.writers import TIMESTAMP_FORMS, FileStyle, PlannedFile

FORMATS = ("parquet", "csv", "jsonl")


@dataclass(frozen=True)
class Calendar:
    """The simulated days and the knobs every source reads."""

    start: dt.date
    days: int
    seed: int
    scale: float = 1.0
    clean: bool = False

    @property
    def dates(self) -> list[dt.date]:
        """Every simulated day, ascending."""
        return [self.start + dt.timedelta(days=k) for k in range(self.days)]

    def count(self, base: int, minimum: int = 1) -> int:
        """``base`` scaled, never below ``minimum``."""
        return max(minimum, round(base * self.scale))

    def rng(self, source: str) -> random.Random:
        """One seeded stream per source, so sources do not disturb each other's draws."""
        return random.Random(f"idem-assets/{self.seed}/{source}")


@dataclass
class SourcePlan:
    """A source's planned files plus counts of the realistic defects they carry."""

    files: list[PlannedFile] = field(default_factory=list)
    defects: Counter[str] = field(default_factory=Counter)

    @property
    def rows(self) -> int:
        """Data rows over all planned files."""
        return sum(len(f.rows) for f in self.files)


def share(items: int, fraction: float) -> int:
    """About ``fraction`` of ``items``, at least one (when there is one to take)."""
    return min(items, max(1, round(items * fraction)))


def at(day: dt.date, seconds: int, micros: int = 0) -> dt.datetime:
    """The UTC instant ``seconds`` (+ ``micros``) after midnight of ``day``."""
    midnight = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    return midnight + dt.timedelta(seconds=seconds, microseconds=micros)


def some_micros(rng: random.Random) -> int:
    """Sub-second part for about a third of timestamps, so fractions show up in files."""
    return rng.randrange(1, 1_000_000) if rng.random() < 0.3 else 0


def money(cents: int) -> Decimal:
    """An exact two-decimal amount."""
    sign = "-" if cents < 0 else ""
    return Decimal(f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}")


def file_format(day_index: int, file_index: int) -> str:
    """Formats rotate so every day mixes Parquet, CSV and JSON Lines."""
    return FORMATS[(day_index + file_index) % len(FORMATS)]


def file_style(day_index: int, file_index: int) -> FileStyle:
    """Per-file spelling drift: timestamp forms, money and id types, Parquet zones."""
    turn = day_index + file_index
    forms = (TIMESTAMP_FORMS, ("z",), ("offset", "naive"))[turn % 3]
    return FileStyle(
        timestamp_forms=forms,
        money_as_number=turn % 2 == 1,
        ids_as_text=turn % 4 == 1,
        parquet_tz=("UTC", "Europe/Berlin", None)[(day_index + 2 * file_index) % 3],
        narrow_ints=turn % 2 == 0,
    )


def planned(
    relpath: str, columns: tuple[str, ...], rows: list[dict], day_index: int, file_index: int
) -> PlannedFile:
    """A planned file whose format and style follow the rotation."""
    fmt = file_format(day_index, file_index)
    return PlannedFile(f"{relpath}.{fmt}", columns, tuple(rows), file_style(day_index, file_index))
