"""One vocabulary for --fail-on and scan --reports (forensics.report.verdict.reaches)."""
import pytest

from forensics.report.verdict import LEVELS, reaches
from forensics.scan import _want_report


def test_an_oom_alone_is_not_a_leak():
    assert not reaches("leak", "inconclusive", ["gpu_oom"], ["critical"])
    assert reaches("oom", "inconclusive", ["gpu_oom"], ["critical"])
    assert reaches("leak", "leak", ["leak"], ["critical"])


def test_any_fails_on_an_info_finding():
    assert reaches("any", "no_leak", ["large_footprint"], ["info"])
    assert not reaches("warning", "no_leak", ["large_footprint"], ["info"])
    assert not reaches("any", "no_leak", [], [])


@pytest.mark.parametrize("level,hit", [("critical", False), ("warning", True), ("any", True), ("never", False)])
def test_severity_levels_are_floors(level, hit):
    assert reaches(level, "cache_growth", ["cache_growth"], ["warning"]) is hit


def test_old_spellings_still_read():
    assert reaches("info", "no_leak", ["x"], ["info"]) and not reaches("none", "leak", ["leak"], ["critical"])


def test_scan_reports_take_the_same_levels():
    row = {"verdict": "inconclusive", "kinds": ["gpu_oom"], "severity": "critical"}
    assert _want_report("oom", row) and not _want_report("leak", row) and _want_report("all", row)
    assert not _want_report("none", row)


def test_the_cli_offers_exactly_these_levels():
    from forensics.cli import FailOn, Reports

    assert [x.value for x in FailOn] == list(LEVELS)
    assert set(LEVELS) - {"never"} <= {x.value for x in Reports}
