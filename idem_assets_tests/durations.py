"""What each suite of the test run cost: ``python -m idem_assets_tests.durations REPORT.xml``.

Reads the JUnit report pytest writes (``--junitxml``) and prints one table: per suite (the
folder under ``idem_assets_tests``, or the file for top-level tests) the number of tests,
their summed time and the slowest test in it, then the slowest tests overall. With two
workers the summed time is about twice the wall time; what matters is the share.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

_SLOWEST = 15


@dataclass(frozen=True)
class Timed:
    suite: str
    name: str
    seconds: float


def timings(report: Path) -> list[Timed]:
    """Every test case of the report with its suite and time."""
    out = []
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "")
        parts = module.split(".")
        if parts and parts[0] == "idem_assets_tests":
            parts = parts[1:]
        suite = parts[0] if len(parts) > 1 else (parts[0] + ".py" if parts else "?")
        short = ".".join(parts[1:] if len(parts) > 1 else parts)
        out.append(Timed(suite, f"{short}::{case.get('name')}", float(case.get("time") or 0)))
    return out


def table(cases: list[Timed]) -> str:
    """The per-suite table and the slowest tests, as Markdown."""
    by_suite: dict[str, list[Timed]] = defaultdict(list)
    for case in cases:
        by_suite[case.suite].append(case)
    total = sum(c.seconds for c in cases) or 1.0
    lines = [
        "| suite | tests | seconds | share | slowest test (s) |",
        "|---|---:|---:|---:|---|",
    ]
    for suite, members in sorted(by_suite.items(), key=lambda kv: -sum(c.seconds for c in kv[1])):
        spent = sum(c.seconds for c in members)
        slowest = max(members, key=lambda c: c.seconds)
        lines.append(
            f"| {suite} | {len(members)} | {spent:.0f} | {spent / total:.0%} | "
            f"{slowest.name} ({slowest.seconds:.0f}) |"
        )
    lines.append(f"| all | {len(cases)} | {total:.0f} | 100% | |")
    lines += ["", f"The {_SLOWEST} slowest tests:", "", "| seconds | test |", "|---:|---|"]
    for case in sorted(cases, key=lambda c: -c.seconds)[:_SLOWEST]:
        lines.append(f"| {case.seconds:.1f} | {case.suite}/{case.name} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m idem_assets_tests.durations REPORT.xml", file=sys.stderr)
        return 2
    report = Path(argv[0])
    if not report.is_file():
        print(f"no test report at {report}", file=sys.stderr)
        return 2
    print(table(timings(report)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
