"""Print the reliability report: one row per scenario of a session's results file.

``python -m idem_assets_tests.reliability.report [RESULTS.jsonl] [--markdown]`` reads the
given file (default: $IDEM_RELIABILITY_RESULTS, else the newest file under
test-artifacts/reliability/) and prints the table.
It exits with 1 when a scenario did not end equal to its clean run, or duplicated or
lost rows, so that a broken guarantee is never only a line in a table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPORT_DIR = Path(__file__).resolve().parents[2] / "test-artifacts" / "reliability"
# Set by `make reliability` to name the session's results file.
RESULTS_ENV = "IDEM_RELIABILITY_RESULTS"
COLUMNS = (
    "suite",
    "scenario",
    "runs",
    "faults injected",
    "final state equal",
    "duplicates",
    "lost rows",
)
_TEXT_FAULTS_WIDTH = 72


def newest_results(folder: Path = REPORT_DIR) -> Path | None:
    """The most recently written results file, if any."""
    files = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    return files[-1] if files else None


def load_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a results file, the last one per (suite, scenario), in suite order."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            latest[(row["suite"], row["scenario"])] = row
    order = {"crash": 0, "concurrency": 1, "bad_input": 2, "security": 3}
    return sorted(latest.values(), key=lambda r: (order.get(r["suite"], 9), r["suite"]))


def cells(row: dict[str, Any]) -> list[str]:
    """A row's values in column order."""
    return [
        row["suite"],
        row["scenario"],
        str(row["runs"]),
        row["faults"],
        "yes" if row["final_state_equal"] else "NO",
        str(row["duplicates"]),
        str(row["lost_rows"]),
    ]


def holds(row: dict[str, Any]) -> bool:
    """Whether a scenario kept every guarantee."""
    return bool(row["final_state_equal"]) and row["duplicates"] == 0 and row["lost_rows"] == 0


def render(rows: Sequence[dict[str, Any]], markdown: bool) -> str:
    """The table as Markdown or aligned text, with a summary line."""
    table = [cells(r) for r in rows]
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table]
    else:
        for row in table:
            if len(row[3]) > _TEXT_FAULTS_WIDTH:
                row[3] = row[3][: _TEXT_FAULTS_WIDTH - 3] + "..."
        widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(COLUMNS)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(COLUMNS, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        lines += [
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in table
        ]
    broken = [r["scenario"] for r in rows if not holds(r)]
    lines.append("")
    lines.append(
        f"{len(rows)} scenarios, {sum(r['runs'] for r in rows)} runs: "
        + (
            "every final state equal to its clean run, no duplicates, no lost rows"
            if not broken
            else f"BROKEN: {', '.join(broken)}"
        )
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; 1 if a scenario broke a guarantee, 2 if there is nothing to report."""
    parser = argparse.ArgumentParser(prog="python -m idem_assets_tests.reliability.report")
    parser.add_argument("results", nargs="?", type=Path, help="a results .jsonl file")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    named = os.environ.get(RESULTS_ENV)
    path = args.results or (Path(named) if named else newest_results())
    if path is None or not path.exists() or not load_rows(path):
        print(f"no reliability results in {path or REPORT_DIR}", file=sys.stderr)
        return 2
    rows = load_rows(path)
    print(render(rows, args.markdown))
    return 0 if all(holds(r) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
