"""forensics.markers: the marker line is read back by the step-marker parser with its clock, device,
step and tag; the module imports without torch and says so clearly when torch is needed."""
from __future__ import annotations

import io
import subprocess
import sys
import types
from datetime import datetime, timezone

import pytest

from forensics import markers
from conftest import parse_file

MiB = 1 << 20


def test_marker_lines_parse_back_exactly(tmp_path):
    t0 = datetime(2026, 11, 30, 3, 4, 8, 405000, tzinfo=timezone.utc)
    lines = [markers.marker_line("train", (1000 + 128 * i) * MiB, 2048 * MiB, step=i, device=1,
                                 when=t0.replace(second=8 + i)) for i in range(1, 6)]
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    module, parsed = parse_file(log, expect="step-markers")
    s = parsed.samples.sort("line", "series")
    assert s.height == 10
    alloc = s.filter(s["series"] == "allocated")
    assert alloc["bytes"].to_list() == [(1000 + 128 * i) * MiB for i in range(1, 6)]
    assert alloc["step"].to_list() == [1, 2, 3, 4, 5]
    assert set(s["label"]) == {"train"}                 # the tag, the same on every line: one series
    assert set(s["gpu"]) == {"1"}
    assert set(s.filter(s["series"] == "reserved")["bytes"]) == {2048 * MiB}   # cached -> reserved
    assert alloc["time"][0] == t0.replace(second=9)     # UTC with its zone: no --tz needed


def test_a_tag_with_brackets_stays_one_tag(tmp_path):
    line = markers.marker_line("eval [val]", 5 * MiB, 6 * MiB, step=3)
    log = tmp_path / "train.log"
    log.write_text(line + "\n")
    _, parsed = parse_file(log, expect="step-markers")
    assert set(parsed.samples["label"]) == {"eval (val)"}
    assert set(parsed.samples["step"]) == {3}


def test_import_does_not_need_torch_and_use_says_so():
    code = ("import sys; sys.modules['torch'] = None\n"     # an import of torch now fails
            "import forensics.markers as m\n"
            "try:\n    m.log_memory('train', step=1)\n"
            "except RuntimeError as e:\n    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ERR forensics.markers.log_memory: needs PyTorch")
    assert "Traceback" not in out.stderr


def _fake_torch(allocated: int, reserved: int, available: bool = True):
    cuda = types.SimpleNamespace(is_available=lambda: available, current_device=lambda: 0,
                                 memory_allocated=lambda i: allocated, memory_reserved=lambda i: reserved)

    class Device:
        def __init__(self, kind, index=None):
            if ":" in str(kind):
                kind, index = str(kind).split(":")
            self.index = None if index is None else int(index)
    return types.SimpleNamespace(cuda=cuda, device=Device)


def test_log_memory_prints_the_current_device(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(1536 * MiB, 2048 * MiB))
    buf = io.StringIO()
    line = markers.log_memory("train", step=7, file=buf)
    assert buf.getvalue() == line + "\n"
    assert line.endswith(" cuda:0 step 7 [train] allocated: 1536.00 MB, cached: 2048.00 MB")
    assert "cuda:2 " in markers.log_memory("train", device="cuda:2", file=io.StringIO())


def test_log_memory_without_a_gpu_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(0, 0, available=False))
    with pytest.raises(RuntimeError, match="no CUDA device"):
        markers.log_memory("train")
