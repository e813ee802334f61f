"""`gpu-forensics record`: with fake nvidia-smi and dmesg on PATH (tests/fakebin), the command's output,
both nvidia-smi logs, the kernel log's new lines and job.json are written, the tool reads them back,
the exit code and signals pass through, and no logger process outlives the recorder."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forensics import pipeline
from forensics.options import Options

ROOT = Path(__file__).resolve().parent.parent
FAKEBIN = ROOT / "tests" / "fakebin"
INTERVAL = "0.2"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and /proc: Linux")

# the job: markers a step, a line on stderr, then its own exit status
JOB = """
import sys, time
from forensics.markers import marker_line
for i in range(1, 13):
    print(marker_line("train", (1000 + 64 * i) << 20, 4096 << 20, step=i, device=0), flush=True)
    time.sleep(0.05)
print("done", file=sys.stderr)
print("step 13 [train] allocated: 1900.00 MB, cached: 4096.00 MB", flush=True)   # a print without a clock
sys.exit(3)
"""


def _env(tmp_path: Path, *bins: Path) -> dict:
    pids = tmp_path / "pids"
    pids.mkdir(exist_ok=True)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([*map(str, bins), str(FAKEBIN), env.get("PATH", "")])
    env["FAKE_NVSMI_PIDS"] = str(pids)
    return env


def _record(out: Path, env: dict, *command: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics", "record", "-o", str(out), "--interval", INTERVAL,
                           "--", *command], env=env, capture_output=True, text=True, timeout=120, **kw)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _survivors(tmp_path: Path) -> list[int]:
    started = [int(p.name) for p in (tmp_path / "pids").iterdir()]
    assert started, "the fake loggers never ran"
    return [pid for pid in started if _alive(pid)]


def test_record_writes_every_log_and_returns_the_exit_code(tmp_path):
    out = tmp_path / "run"
    r = _record(out, _env(tmp_path), sys.executable, "-c", JOB)
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr
    assert not _survivors(tmp_path)
    # every captured line carries its arrival time; a marker keeps its own
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\] done\n", (out / "stderr.log").read_text())
    # record's own output is never reported as a file the tool does not recognize
    assert "stderr.log" not in r.stderr and "stdout.log" not in r.stderr, r.stderr
    assert (out / "report.html").is_file()
    job = json.loads((out / "job.json").read_text())
    assert job["exit_code"] == 3 and job["signal"] is None and job["command"][0] == sys.executable
    assert job["pid"] > 0 and job["start"].endswith("Z") and job["end"] >= job["start"]
    assert job["gpus"] == [{"index": 0, "uuid": "GPU-0d1e2f30-4a5b-6c7d-8e9f-a0b1c2d3e4f5",
                            "name": "NVIDIA Fake GPU", "memory_total_bytes": 81559 << 20}]
    assert job["kernel_log"].startswith("dmesg")
    # only the kernel's lines of the run, not the ring buffer from before it
    kernel = (out / "kernel.log").read_text().splitlines()
    assert len(kernel) == 1 and "a line of the run" in kernel[0]

    bundle, analysis = pipeline.run([str(out)], Options(tz=job["tz"]))
    formats = {Path(i.path).name: i.format for i in bundle.inputs}
    assert formats["nvidia-smi.csv"] == "nvidia-smi-csv"
    assert formats["compute-apps.csv"] == "nvidia-smi-apps"
    assert formats["stdout.log"] == "step-markers"
    assert formats["kernel.log"] is not None
    steps = bundle.samples.filter(bundle.samples["series"] == "allocated")["step"].to_list()
    assert steps == list(range(1, 14))
    allocated = bundle.samples.filter(bundle.samples["series"] == "allocated")
    assert allocated["time"].null_count() == 0   # step 13, printed without a time, placed by its arrival
    used = bundle.samples.filter(bundle.samples["series"] == "memory.used")
    assert used.height >= 3 and used["time"].null_count() == 0


def test_signals_are_forwarded_and_nothing_is_left_running(tmp_path):
    out = tmp_path / "run"
    job = ("import signal, sys, time\n"
           "signal.signal(signal.SIGTERM, lambda *a: (print('got TERM', flush=True), sys.exit(7)))\n"
           "print('ready', flush=True)\n"
           "time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-m", "forensics", "record", "-o", str(out), "--interval", INTERVAL,
                             "--", sys.executable, "-c", job], env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "ready" not in ((out / "stdout.log").read_text()
                                                          if (out / "stdout.log").exists() else ""):
        time.sleep(0.05)
    pid = json.loads((out / "job.json").read_text())["pid"]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 7, err
    assert "got TERM" in (out / "stdout.log").read_text()
    job_json = json.loads((out / "job.json").read_text())
    assert job_json["signals_forwarded"] == ["SIGTERM"] and job_json["exit_code"] == 7
    assert not _alive(pid)
    assert not _survivors(tmp_path)


def test_a_command_killed_by_a_signal_exits_128_plus_n(tmp_path):
    r = _record(tmp_path / "run", _env(tmp_path), sys.executable, "-c", "import os; os.kill(os.getpid(), 9)")
    assert r.returncode == 128 + 9, r.stderr
    assert json.loads((tmp_path / "run" / "job.json").read_text())["signal"] == "SIGKILL"
    assert not _survivors(tmp_path)


@pytest.mark.parametrize("given", [None, "4"])
def test_the_command_gets_the_environment_it_was_given(tmp_path, given):
    # the command line runs numpy with one OpenBLAS thread (cli.main); the user's job keeps its own setting
    env = _env(tmp_path)
    env.pop("OPENBLAS_NUM_THREADS", None)
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    out = tmp_path / "run"
    r = _record(out, env, sys.executable, "-c", "import os; print('blas', os.environ.get('OPENBLAS_NUM_THREADS'))")
    assert r.returncode == 0, r.stderr
    assert f"] blas {given}\n" in (out / "stdout.log").read_text()


def test_unreadable_kernel_log_is_said_and_the_run_goes_on(tmp_path):
    deny = tmp_path / "deny"
    deny.mkdir()
    for name in ("dmesg", "journalctl"):
        p = deny / name
        p.write_text("#!/bin/sh\necho \"$0: read kernel buffer failed: Operation not permitted\" >&2\nexit 1\n")
        p.chmod(0o755)
    out = tmp_path / "run"
    r = _record(out, _env(tmp_path, deny), sys.executable, "-c", "print('hi')")
    assert r.returncode == 0, r.stderr
    assert "kernel log: not readable here" in r.stderr and "Operation not permitted" in r.stderr
    job = json.loads((out / "job.json").read_text())
    assert job["kernel_log"] is None and "Operation not permitted" in job["kernel_log_missing"]
    assert not (out / "kernel.log").exists()


def test_missing_nvidia_smi_is_one_clear_line(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = dict(os.environ, PATH=str(empty))
    out = tmp_path / "run"
    r = _record(out, env, sys.executable, "-c", "print('never')")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: nvidia-smi: not found on PATH"), r.stderr
    assert not out.exists()


@pytest.mark.parametrize("case", ["not empty", "no command", "unknown command"])
def test_usage_errors_before_anything_runs(tmp_path, case):
    out = tmp_path / "run"
    command = [sys.executable, "-c", "print(1)"]
    if case == "not empty":
        out.mkdir()
        (out / "old.log").write_text("x\n")
    elif case == "no command":
        command = []
    else:
        command = ["no-such-command-here"]
    r = _record(out, _env(tmp_path), *command)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    if case == "no command":   # the command line's own usage error, as for every command
        assert "Missing argument 'COMMAND...'" in r.stderr
    else:
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not list((tmp_path / "pids").iterdir())


def test_a_logger_that_dies_is_reported(tmp_path):
    out = tmp_path / "run"
    env = _env(tmp_path)
    env["FAKE_DMESG_DIES"] = "1"
    r = _record(out, env, sys.executable, "-c", "import time; time.sleep(1.5)")
    assert r.returncode == 0, r.stderr
    failed = json.loads((out / "job.json").read_text())["loggers_failed"]
    assert len(failed) == 1 and "stopped during the run" in failed[0], failed
