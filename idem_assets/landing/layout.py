"""Where a source's files for one day live: a path template such as ``{source}/date={date}``.

A template is a relative folder path made of plain segments and placeholders: ``{source}``
(the source name), ``{date}`` (``YYYY-MM-DD``), ``{yyyy}``, ``{mm}`` and ``{dd}``. A daily
template names the day exactly once, either as ``{date}`` or as all of ``{yyyy}``, ``{mm}``
and ``{dd}``; a snapshot template names no day at all.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from idem_assets.landing.store import Folder, LandingRoot

DEFAULT_DAILY_LAYOUT = "{source}/date={date}"
DEFAULT_SNAPSHOT_LAYOUT = "{source}"
PLACEHOLDERS = ("source", "date", "yyyy", "mm", "dd")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_PATTERNS = {
    "date": r"(?P<date>\d{4}-\d{2}-\d{2})",
    "yyyy": r"(?P<yyyy>\d{4})",
    "mm": r"(?P<mm>\d{2})",
    "dd": r"(?P<dd>\d{2})",
}
# Literal text allowed around placeholders: no path tricks, no glob characters.
_LITERAL = re.compile(r"^[A-Za-z0-9_.=-]*$")


class LayoutError(ValueError):
    """A path template that cannot name a source's folders; the message says what is allowed."""


@dataclass(frozen=True)
class Layout:
    """A parsed path template, bound to one source name."""

    template: str
    source: str

    def __post_init__(self) -> None:
        problem = _template_problem(self.template)
        if problem:
            raise LayoutError(problem)

    @property
    def daily(self) -> bool:
        """Whether the template names a day (else it is a snapshot folder)."""
        return bool(set(_names(self.template)) & {"date", "yyyy", "mm", "dd"})

    @property
    def segments(self) -> tuple[str, ...]:
        """The template's folder segments."""
        return tuple(self.template.split("/"))

    def folder(self, day: dt.date | None = None) -> str:
        """The relative folder holding the files of ``day`` (or the snapshot folder)."""
        if self.daily and day is None:
            raise ValueError(f"layout {self.template!r} names a day: give one")
        values = {"source": self.source}
        if day is not None:
            values |= {
                "date": day.isoformat(),
                "yyyy": f"{day.year:04d}",
                "mm": f"{day.month:02d}",
                "dd": f"{day.day:02d}",
            }
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.template)

    def root(self) -> str:
        """The leading segments that name no day (where listing starts)."""
        fixed = []
        for segment in self.segments:
            if set(_names(segment)) - {"source"}:
                break
            fixed.append(_PLACEHOLDER.sub(lambda m: self.source, segment))
        return "/".join(fixed)

    def regex(self) -> str:
        """A regex matching a day folder's relative path, with one named group per day part."""
        parts = []
        for piece in re.split(r"(\{[^{}]*\})", self.template):
            name = piece[1:-1] if piece.startswith("{") else None
            if name == "source":
                parts.append(re.escape(self.source))
            elif name is not None:
                parts.append(_PATTERNS[name])
            else:
                parts.append(re.escape(piece))
        return "".join(parts)

    def parse(self, folder: str) -> dt.date | None:
        """The day of a relative folder path, or None if it is not one of this layout's."""
        match = re.fullmatch(self.regex(), folder)
        if not match:
            return None
        found = match.groupdict()
        try:
            if "date" in found:
                return dt.date.fromisoformat(found["date"])
            return dt.date(int(found["yyyy"]), int(found["mm"]), int(found["dd"]))
        except ValueError:
            return None

    def days(self, root: LandingRoot) -> dict[dt.date, Folder]:
        """Every existing day folder under ``root`` (not only those holding files)."""
        fixed = self.root()
        depth = len(self.segments) - (len(fixed.split("/")) if fixed else 0)
        if depth <= 0:
            return {}
        found: dict[dt.date, Folder] = {}
        for relpath, folder in root.tree(fixed, depth).items():
            day = self.parse(relpath)
            if day is not None:
                found[day] = folder
        return found


def _names(text: str) -> list[str]:
    return _PLACEHOLDER.findall(text)


def _template_problem(template: str) -> str | None:
    """Why ``template`` is not a usable layout, or None."""
    if not template or template.startswith("/") or template.endswith("/"):
        return (
            f"layout {template!r} must be a relative folder path like "
            f"'{DEFAULT_DAILY_LAYOUT}', '{{source}}/{{yyyy}}/{{mm}}/{{dd}}' or "
            "'{source}/dt={date}'"
        )
    names = _names(template)
    unknown = sorted(set(names) - set(PLACEHOLDERS))
    if unknown:
        return (
            f"layout {template!r} has unknown placeholder(s) {', '.join(unknown)}; "
            f"allowed: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
        )
    for segment in template.split("/"):
        literal = _PLACEHOLDER.sub("", segment)
        if segment in ("", ".", "..") or not _LITERAL.match(literal):
            return (
                f"layout {template!r}: segment {segment!r} may hold only letters, digits, "
                "'_', '-', '.', '=' and placeholders"
            )
    counts = {name: names.count(name) for name in PLACEHOLDERS}
    parts = {"yyyy", "mm", "dd"}
    named_parts = {name for name in parts if counts[name]}
    if any(counts[name] > 1 for name in ("date", *parts)):
        return f"layout {template!r} names the day more than once"
    if counts["date"] and named_parts:
        return f"layout {template!r}: use either {{date}} or {{yyyy}}/{{mm}}/{{dd}}, not both"
    if named_parts and named_parts != parts:
        missing = ", ".join("{" + p + "}" for p in sorted(parts - named_parts))
        return f"layout {template!r} names part of a day: add {missing}"
    return None
