"""The verdict is decided once, in detect: the analysis carries the finding the verdict speaks of, what
ended the job and the tone; the report's banner formats them and decides nothing of its own."""
from __future__ import annotations

from datetime import timedelta

from forensics import report
from forensics.detect import decided
from forensics.detect.findings import Evidence, Finding
from forensics.model import events_frame
from test_report_cases import GiB, T0, leak_case, no_leak_case, opts


def _gpu_and_host_leaks() -> tuple[Finding, Finding]:
    gpu = Finding(kind="leak", severity="warning", confidence=0.6, gpu="0", series="memory.used",
                  summary="GPU 0 memory grows by 1.00 GiB/h.", start=T0, end=T0 + timedelta(hours=4),
                  rate_bytes_per_hour=GiB, growth_bytes=4 * GiB, evidence=[Evidence("smi.csv", 2, "x")])
    host = Finding(kind="leak", severity="critical", confidence=0.99, series="host.rss",
                   summary="Host memory grows by 9.00 GiB/h.", start=T0, end=T0 + timedelta(hours=4),
                   rate_bytes_per_hour=9 * GiB, growth_bytes=36 * GiB, evidence=[Evidence("rss.log", 2, "y")])
    return gpu, host


def test_the_banner_speaks_of_the_leak_the_verdict_names():
    # the verdict is about GPU memory: a host leak, however sure and severe, is not its lead
    bundle, _ = no_leak_case()
    gpu, host = _gpu_and_host_leaks()
    analysis = decided("leak", gpu.summary, [host, gpu], [], bundle.events)
    assert analysis.top_finding is gpu and analysis.tone == "critical"
    v = report.build_context(bundle, analysis, opts("UTC"))["verdict"]
    numbers = {n["label"]: n["value"] for n in v["numbers"]}
    assert numbers["Growth rate"] == "1.00 GiB/h" and v["tone"] == "critical"


def test_what_ended_the_job_makes_no_leak_a_warning_and_the_report_only_says_so():
    bundle, _ = no_leak_case()
    bundle.events = events_frame([{"time": T0 + timedelta(minutes=30), "source": "kern.log", "line": 7,
                                   "kind": "oom_kill", "pid": 77, "process": "python3", "text": "Killed process 77"}])
    analysis = decided("no_leak", "memory returns to its baseline (sawtooth)", [], [], bundle.events)
    assert analysis.tone == "warning" and analysis.ended_by["line"] == 7 and analysis.ended_by["count"] == 1
    v = report.build_context(bundle, analysis, opts("UTC"))["verdict"]
    assert v["tone"] == "warning" and v["fatal"]["line"] == 7
    assert v["label"].startswith("No GPU memory leak found; the job was ended by OOM kill")


def test_another_processs_kill_is_context_not_what_ended_the_job():
    bundle, analysis = leak_case()
    kill = next(f for f in analysis.findings if f.kind == "oom_kill")
    kill.job_event = False
    again = decided(analysis.verdict, analysis.verdict_reason, analysis.findings, analysis.series, bundle.events)
    assert again.ended_by is None or (again.ended_by["source"], again.ended_by["line"]) != (
        kill.evidence[0].path, kill.evidence[0].line)
    assert [(e["source"], e["line"]) for e in again.context_events] == [(kill.evidence[0].path, kill.evidence[0].line)]


def test_analyze_decides_the_tone_of_an_empty_bundle():
    from forensics.detect import analyze
    from forensics.model import Bundle

    assert analyze(Bundle(), None).tone == "empty"
