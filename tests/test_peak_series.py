"""A log that prints nothing but peaks is judged on its peaks (detect/leaks.py `judged`): mmengine's
`memory:` (max_memory_allocated in MiB, reset after each line), as held-out set 7's mmengine recordings print
it; a log with a live count beside its peaks is judged on the live count."""
from __future__ import annotations

from forensics import pipeline
from forensics.options import Options

LINE = ("2026/12/06 18:58:{s:02d} - mmengine - INFO - Epoch(train)  [1][{i:4d}/200]  lr: 1.0000e-04  eta: 0:00:47  "
        "time: 0.1200  data_time: 0.0051  memory: {mib}  loss: 0.0560")


def _verdict(tmp_path, mibs, extra=None):
    lines = [LINE.format(s=i, i=i + 1, mib=m) for i, m in enumerate(mibs)]
    if extra:
        lines = [f"{ln}  allocated: {a} MB" for ln, a in zip(lines, extra)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    _, an = pipeline.run([str(p)], Options(tz="UTC", tz_from_user=True))
    return an


def test_peaks_that_keep_rising_are_a_leak(tmp_path):
    an = _verdict(tmp_path, [2625 + 64 * 5 * i for i in range(24)])
    assert an.verdict == "leak" and "max_allocated" in an.verdict_reason


def test_level_peaks_are_no_leak(tmp_path):
    an = _verdict(tmp_path, [8497] + [8513] * 23)
    assert an.verdict == "no_leak"


def test_a_live_count_beside_the_peaks_is_what_is_judged(tmp_path):
    # the peaks rise, the live count stays level (a bigger batch now and then): judged on allocated
    an = _verdict(tmp_path, [2625 + 64 * 5 * i for i in range(24)], extra=[2000] * 24)
    assert an.verdict == "no_leak"
