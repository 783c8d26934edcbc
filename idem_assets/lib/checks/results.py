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

from idem_assets.landing.rules import ValueRule
from idem_assets.lib.checks.samples import shown_rows, shown_value

if TYPE_CHECKING:
    import polars as pl

QUARANTINE_SHARE = "quarantine_share"
DEFAULT_QUARANTINE_SHARE = 0.01
_SAMPLE = 10
_TOP_REASONS = 5
# The value in a reason, so that rows breaking the same rule count together and no value
# reaches the event log: "status: value 'x' is not ..." (up to the quote before the rule's
# words: a value may hold quotes or "; ") and "amount: -5.00 is negative ...".
_QUOTED_VALUE = re.compile(r"value '.*?'(?= (?:is|does) )")
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


def top_reasons(reasons: Iterable[object], limit: int = _TOP_REASONS) -> dict[str, int]:
    """The most frequent quarantine reasons, values masked so equal rules count together."""
    counts: Counter[str] = Counter()
    for reason in reasons:
        # Values masked before the reason is split into its parts (a value may hold "; ").
        for part in _QUOTED_VALUE.sub("value '…'", str(reason)).split("; "):
            counts[_BARE_VALUE.sub(r"\1: … is ", part)] += 1
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


VALUE_RULES = "value_rules"


def rule_names(rules: Sequence[ValueRule]) -> list[str]:
    """Each rule's name in the ``value_rules`` check (``<column>_<kind>``), numbered where a
    column repeats a kind of rule."""
    counts = Counter(rule.name for rule in rules)
    seen: Counter[str] = Counter()
    names = []
    for rule in rules:
        seen[rule.name] += 1
        names.append(rule.name if counts[rule.name] == 1 else f"{rule.name}_{seen[rule.name]}")
    return names


def rule_severity(rule: ValueRule) -> dg.AssetCheckSeverity:
    """The severity a value rule fails with: WARN or ERROR, as declared."""
    return _SEVERITY[rule.severity]


def rules_severity(rules: Sequence[ValueRule]) -> dg.AssetCheckSeverity:
    """The most severe outcome of the ``value_rules`` check: ERROR if any rule can fail so."""
    errors = any(rule_severity(rule) == dg.AssetCheckSeverity.ERROR for rule in rules)
    return dg.AssetCheckSeverity.ERROR if errors else dg.AssetCheckSeverity.WARN


def value_rules_result(
    rules: Sequence[tuple[str, ValueRule, pl.DataFrame]],
    rows: int,
    key: Sequence[str],
    label: str,
    erasable: Sequence[str] = (),
) -> dg.AssetCheckResult:
    """Every declared rule of one partition in one result: fails when any rule is broken,
    with the severity of the most severe broken rule; each rule's counts and samples in
    the metadata (``rules``), the broken ones first.

    ``rules`` are (name, rule, the checked rows breaking it); values of the ``erasable``
    columns are shown by digest (see ``samples``).
    """
    judged = [_judged_rule(name, rule, broken, rows, key, erasable) for name, rule, broken in rules]
    broken = [entry for entry in judged if entry["offending_rows"]]
    failing = [rule for _, rule, frame in rules if frame.height]
    if broken:
        named = ", ".join(f"{e['rule']} ({e['offending_rows']:,} rows)" for e in broken[:5])
        more = f" and {len(broken) - 5} more" if len(broken) > 5 else ""
        description = (
            f"{len(broken)} of {len(judged)} rule(s) broken in {rows:,} row(s): {named}{more}"
        )
    else:
        description = f"{rows:,} row(s) satisfy every rule ({len(judged)})"
    return dg.AssetCheckResult(
        check_name=VALUE_RULES,
        passed=not broken,
        severity=rules_severity(failing or [rule for _, rule, _ in rules]),
        description=description,
        metadata={
            "partition_range": label,
            "rows_checked": rows,
            "rules_checked": len(judged),
            "rules_broken": [entry["rule"] for entry in broken],
            "offending_rows": sum(entry["offending_rows"] for entry in broken),
            "rules": dg.MetadataValue.json(
                sorted(judged, key=lambda entry: entry["offending_rows"] == 0)
            ),
        },
    )


def _judged_rule(
    name: str,
    rule: ValueRule,
    broken: pl.DataFrame,
    rows: int,
    key: Sequence[str],
    erasable: Sequence[str],
) -> dict[str, Any]:
    """One rule's entry in the ``value_rules`` metadata: counts, and for a broken rule its
    most frequent offending values and a sample of rows."""
    offending = broken.height
    entry: dict[str, Any] = {
        "rule": name,
        "asserts": rule.describe(),
        "severity": rule.severity,
        "offending_rows": offending,
        "offending_share": round(offending / rows, 6) if rows else 0.0,
    }
    if offending:  # most days of most rules: nothing to count or sample
        values = (
            broken.group_by(rule.column)
            .len()
            .sort(["len", rule.column], descending=[True, False])
            .head(_SAMPLE)
        )
        entry["top_values"] = [
            {"value": shown_value(rule.column, r[rule.column], erasable), "rows": r["len"]}
            for r in values.to_dicts()
        ]
        sample = broken.select([*dict.fromkeys([*key, rule.column])]).head(_SAMPLE)
        entry["sample"] = shown_rows(sample.to_dicts(), erasable)
    return entry
