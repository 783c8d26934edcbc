"""The day range a write, read or check covers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    """The ``[start, end)`` days a write or check covers; both None when unpartitioned."""

    start: dt.date | None = None
    end: dt.date | None = None

    @classmethod
    def day(cls, day: dt.date) -> Window:
        """The window of one day."""
        return cls(day, day + dt.timedelta(days=1))

    @property
    def partitioned(self) -> bool:
        """Whether this window restricts the table to a day range."""
        return self.start is not None and self.end is not None

    def record_key(self) -> str:
        """The window's part of a checkpoint record id: ``2024-03-01..2024-03-04``, or
        ``all`` for the whole table. Every write record of the window starts with it."""
        return f"{self.start}..{self.end}" if self.partitioned else "all"

    def label(self) -> str:
        """Human-readable form for metadata and logs."""
        return f"[{self.start}, {self.end})" if self.partitioned else "whole table"

    def days(self) -> Iterator[dt.date]:
        """Each day of the window (none when unpartitioned)."""
        if self.start is None or self.end is None:
            return
        day = self.start
        while day < self.end:
            yield day
            day += dt.timedelta(days=1)
