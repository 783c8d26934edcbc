"""The outcomes of a check run as an aligned text table and as JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from idem_assets.cli.run import Outcome, RunReport


def table(outcomes: Sequence[Outcome]) -> str:
    """The outcomes as an aligned text table."""
    header = ("asset", "partition", "check", "passed", "severity", "metadata")
    rows = [
        (
            o.asset,
            o.partition or "-",
            o.check,
            "yes" if o.passed else "NO",
            o.severity,
            o.key_metadata(),
        )
        for o in outcomes
    ]
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def junit_xml(report: RunReport) -> str:
    """JUnit XML: a test case per (asset, check, partition); ERROR failures fail it."""
    failures = sum(o.fails_ci for o in report.outcomes)
    suite = ET.Element(
        "testsuite",
        name="idem-assets check",
        tests=str(len(report.outcomes) + len(report.errors)),
        failures=str(failures),
        errors=str(len(report.errors)),
    )
    for outcome in report.outcomes:
        name = outcome.check + (f"[{outcome.partition}]" if outcome.partition else "")
        case = ET.SubElement(suite, "testcase", classname=outcome.asset, name=name)
        properties = ET.SubElement(case, "properties")
        ET.SubElement(properties, "property", name="severity", value=outcome.severity)
        ET.SubElement(properties, "property", name="partition", value=outcome.partition or "")
        text = "\n".join(f"{k}: {v}" for k, v in outcome.metadata.items())
        if outcome.fails_ci:
            failure = ET.SubElement(
                case,
                "failure",
                type="ERROR",
                message=(
                    f"{outcome.asset} {name} failed"
                    + (f": {outcome.description}" if outcome.description else "")
                ),
            )
            failure.text = text
        elif not outcome.passed:
            ET.SubElement(case, "system-out").text = f"WARN (not failing CI)\n{text}"
    for error in report.errors:
        case = ET.SubElement(
            suite, "testcase", classname="idem-assets check", name=error.split(":", 1)[0]
        )
        ET.SubElement(case, "error", message=error)
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
