"""Results of the landing checks for one partition: quarantine share and value rules.

Built from counts and rows the caller has already split by partition (see
``idem_assets.lib.checks.judged``), so a range of days is read once and each day's result
is exactly what a run of that day alone would report.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dagster as dg

from idem_assets.landing.reader import LandingBatch
from idem_assets.landing.rules import ValueRule

if TYPE_CHECKING:
    import polars as pl

QUARANTINE_SHARE = "quarantine_share"
DEFAULT_QUARANTINE_SHARE = 0.01
_SAMPLE = 10
_TOP_REASONS = 5
# The value in a reason, so that rows breaking the same rule count together:
# "status: value 'x' is not ..." and "amount: -5.00 is negative ...".
_QUOTED_VALUE = re.compile(r"value '[^']*'")
_BARE_VALUE = re.compile(r"^([^:]+): \S+ is ")
_SEVERITY = {"warn": dg.AssetCheckSeverity.WARN, "error": dg.AssetCheckSeverity.ERROR}


@dataclass(frozen=True)
class DayShare:
    """One day's landing outcome: raw rows and how many were quarantined."""

    day: dt.date | None
    raw: int
    quarantined: int

    @property
    def loaded(self) -> int:
        """Valid rows (before deduplication)."""
        return self.raw - self.quarantined

    @property
    def share(self) -> float:
        """Quarantined share of the raw rows (0 for an empty day)."""
        return self.quarantined / self.raw if self.raw else 0.0


def day_shares(batch: LandingBatch) -> list[DayShare]:
    """Raw and quarantined rows per day of the batch (one entry for a snapshot)."""
    raw: Counter[dt.date | None] = Counter()
    for file in batch.files:
        raw[file.day] += file.rows
    quarantined: Counter[dt.date | None] = Counter(
        batch.quarantine.column("partition_date").to_pylist()
    )
    days: list[dt.date | None] = list(batch.day_signatures()) if batch.start else [None]
    return [DayShare(day, raw[day], quarantined[day]) for day in days]


def top_reasons(reasons: Iterable[object], limit: int = _TOP_REASONS) -> dict[str, int]:
    """The most frequent quarantine reasons, values masked so equal rules count together."""
    counts: Counter[str] = Counter()
    for reason in reasons:
        for part in str(reason).split("; "):
            masked = _BARE_VALUE.sub(r"\1: … is ", _QUOTED_VALUE.sub("value '…'", part))
            counts[masked] += 1
    return dict(counts.most_common(limit))


def quarantine_share_result(
    shares: Sequence[DayShare], reasons: Mapping[str, int], threshold: float, label: str
) -> dg.AssetCheckResult:
    """Fails (ERROR) if a day with rows loaded none; fails (WARN) above ``threshold``."""
    empty = [s for s in shares if s.raw and not s.loaded]
    high = [s for s in shares if s.raw and s.loaded and s.share > threshold]
    first = next(iter(reasons), None)
    total_raw = sum(s.raw for s in shares)
    total_bad = sum(s.quarantined for s in shares)
    if empty:
        severity, verdict = (
            dg.AssetCheckSeverity.ERROR,
            (
                f"{_days(empty)}: every one of {sum(s.raw for s in empty):,} raw row(s) was "
                "quarantined, nothing loaded"
            ),
        )
    elif high:
        severity, verdict = (
            dg.AssetCheckSeverity.WARN,
            (
                f"{_days(high)}: {max(s.share for s in high):.1%} of raw rows quarantined "
                f"(threshold {threshold:.1%})"
            ),
        )
    else:
        severity, verdict = (
            dg.AssetCheckSeverity.WARN,
            (
                f"{total_bad:,} of {total_raw:,} raw row(s) quarantined, within {threshold:.1%} "
                "per day"
            ),
        )
    if first and (empty or high):
        verdict += f"; top reason: {first}"
    return dg.AssetCheckResult(
        check_name=QUARANTINE_SHARE,
        passed=not (empty or high),
        severity=severity,
        description=verdict,
        metadata={
            "partition_range": label,
            "raw_rows": total_raw,
            "quarantined": total_bad,
            "quarantined_share": round(total_bad / total_raw, 6) if total_raw else 0.0,
            "threshold": threshold,
            "days_loading_nothing": len(empty),
            "days_above_threshold": len(high),
            "top_reasons": dg.MetadataValue.json(dict(reasons)),
            "per_day": dg.MetadataValue.json(
                [
                    {
                        "day": str(s.day) if s.day else "snapshot",
                        "raw": s.raw,
                        "quarantined": s.quarantined,
                        "share": round(s.share, 6),
                    }
                    for s in shares
                    if s.raw
                ]
            ),
        },
    )


def _days(shares: Sequence[DayShare]) -> str:
    labels = [str(s.day) if s.day else "the snapshot" for s in shares]
    return ", ".join(labels[:5]) + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")


def rule_check_names(rules: Sequence[ValueRule]) -> list[str]:
    """Check names of value rules, numbered where a column repeats a kind of rule."""
    counts = Counter(rule.name for rule in rules)
    seen: Counter[str] = Counter()
    names = []
    for rule in rules:
        seen[rule.name] += 1
        names.append(rule.name if counts[rule.name] == 1 else f"{rule.name}_{seen[rule.name]}")
    return names


def rule_severity(rule: ValueRule) -> dg.AssetCheckSeverity:
    """The severity a value rule's check fails with: WARN or ERROR, as declared."""
    return _SEVERITY[rule.severity]


def value_rule_result(
    name: str, rule: ValueRule, rows: int, broken: pl.DataFrame, key: Sequence[str], label: str
) -> dg.AssetCheckResult:
    """Counts and samples of the ``broken`` rows among ``rows`` checked, with the rule's
    severity."""
    offending = broken.height
    top, sample = [], []
    if offending:  # most days of most rules: nothing to count or sample
        values = (
            broken.group_by(rule.column)
            .len()
            .sort(["len", rule.column], descending=[True, False])
            .head(_SAMPLE)
        )
        top = [{"value": _plain(r[rule.column]), "rows": r["len"]} for r in values.to_dicts()]
        sample = [
            {k: _plain(v) for k, v in r.items()}
            for r in broken.select([*dict.fromkeys([*key, rule.column])]).head(_SAMPLE).to_dicts()
        ]
    return dg.AssetCheckResult(
        check_name=name,
        passed=offending == 0,
        severity=rule_severity(rule),
        description=(
            f"{offending:,} of {rows:,} row(s) break the rule {rule.describe()}"
            if offending
            else f"every row satisfies {rule.describe()}"
        ),
        metadata={
            "partition_range": label,
            "rule": rule.describe(),
            "rows_checked": rows,
            "offending_rows": offending,
            "offending_share": round(offending / rows, 6) if rows else 0.0,
            "top_values": dg.MetadataValue.json(top),
            "sample": dg.MetadataValue.json(sample),
        },
    )


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)
