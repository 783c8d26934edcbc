"""The suite-cost table printed after ``make test``, from a hand-written JUnit report."""

from __future__ import annotations

from pathlib import Path

from idem_assets_tests.durations import main, table, timings

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="idem_assets_tests.reliability.test_soak" name="test_a" time="300.5"/>
<testcase classname="idem_assets_tests.lake.test_merge" name="test_b" time="2.0"/>
<testcase classname="idem_assets_tests.lake.test_merge" name="test_c" time="8.0"/>
<testcase classname="idem_assets_tests.test_layers" name="test_d" time="1.5"/>
</testsuite></testsuites>
"""


def test_suites_are_summed_and_ordered_by_cost(tmp_path: Path, capsys) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(REPORT)
    cases = timings(report)
    assert {(c.suite, c.name) for c in cases} >= {
        ("reliability", "test_soak::test_a"),
        ("test_layers.py", "test_layers::test_d"),
    }
    rows = table(cases).splitlines()
    assert rows[2] == "| reliability | 1 | 300 | 96% | test_soak::test_a (300) |"
    assert rows[3] == "| lake | 2 | 10 | 3% | test_merge::test_c (8) |"
    assert rows[5] == "| all | 4 | 312 | 100% | |"
    assert main([str(report)]) == 0 and "| 300.5 | reliability/test_soak::test_a |" in (
        capsys.readouterr().out
    )
    assert main([str(tmp_path / "missing.xml")]) == 2


def test_the_longest_files_handed_out_first_exist() -> None:
    """A renamed file would silently fall back to the default order."""
    from idem_assets_tests.conftest import LONGEST_FIRST

    here = Path(__file__).parent
    assert [name for name in LONGEST_FIRST if not (here / name).is_file()] == []
