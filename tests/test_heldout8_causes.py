"""Two causes held-out set 8 (bench/heldout8, its run in docs/benchmarks.md) found, each as its recording
printed it: torchtitan's metrics line in its default colors, and another job's flat allocator count taken
as this job's."""
from __future__ import annotations

from forensics import pipeline
from forensics.options import Options
from forensics.parsers.steplog import general

TITAN = ("[titan] 2026-12-06 22:12:{s:02d},311 - root - INFO - \x1b[31mstep: {i:2d}  \x1b[32mloss:  0.0560  "
         "\x1b[38;2;255;165;0mgrad_norm:  1.2500  \x1b[38;2;54;234;195mmemory: {g:5.2f}GiB({p:.2f}%)  "
         "\x1b[34mtps: 8,302  \x1b[36mtflops: 120.31  \x1b[35mmfu: 12.16%\x1b[39m")
D2 = ("[12/06 22:12:{s:02d} d2.utils.events]:  eta: 0:00:47  iter: {i}  total_loss: 0.058  loss_cls: 0.412  "
      "time: 0.1200  last_time: 0.1198  data_time: 0.0031  last_data_time: 0.0029  lr: 0.0001  max_mem: 209M")


def _titan(first_s: int, n: int) -> str:
    return "".join(TITAN.format(s=first_s + k, i=k + 1, g=2.07 + 0.125 * k, p=2.6 + 0.15 * k) + "\n" for k in range(n))


def test_torchtitan_s_colored_line_is_its_documented_max_reserved(tmp_path):
    # a terminal's colors are stripped before reading; `{:5.2f}` pads a value under 10 GiB after `memory:`
    p = tmp_path / "train.log"
    p.write_text(_titan(30, 8))
    _, an = pipeline.run([str(p)], Options(tz="UTC", tz_from_user=True))
    assert an.verdict == "leak" and "max_reserved" in an.verdict_reason
    plan = general.plan_line("step:  1  loss:  0.0560  memory:  2.07GiB(2.61%)  tps: 8,302")
    assert [(r.series, r.source is not None) for r in plan.readings] == [("max_reserved", True)]


def test_another_job_s_flat_count_before_this_one_is_no_cache_growth(tmp_path):
    # held-out set 8's host_kill_then_torchtitan_leak_oom: a first job's flat `max_mem` (killed), then 4 s
    # later a second job whose memory grows: the first job's count says nothing of the second's growth
    (tmp_path / "job1.log").write_text("".join(D2.format(s=s, i=i) + "\n" for i, s in enumerate(range(10, 20))))
    (tmp_path / "job2.log").write_text(_titan(24, 12).replace("\x1b[38;2;54;234;195mmemory:", "mem used:"))
    _, an = pipeline.run([str(tmp_path / "job1.log"), str(tmp_path / "job2.log")], Options(tz="UTC", tz_from_user=True))
    assert an.verdict == "leak", an.verdict_reason
