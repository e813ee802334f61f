"""`--columns`: the columns of a headerless nvidia-smi CSV declared on the command line; without it they
are inferred from the values, and the report says which."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def write_noheader(path: Path) -> Path:
    """`--query-gpu=timestamp,index,memory.used,memory.total --format=csv,noheader,nounits -l 1`: GPU 1
    leaks from sample 100 on; neither GPU is ever idle."""
    t0 = datetime(2026, 11, 30, 3, 0, 0)
    rows = []
    for i in range(400):
        t = (t0 + timedelta(seconds=i)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        rows.append(f"{t}, 0, {60000 + (i * 7) % 5}, 143771")
        rows.append(f"{t}, 1, {61000 + (64 * (i - 100) if i >= 100 else 0) + (i * 3) % 4}, 143771")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_noheader_nounits_used_and_total_is_read(tmp_path):
    p = run_cli("report", str(write_noheader(tmp_path / "gpu.csv")), "-o", "", "--json", "-")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["verdict"] == "leak" and out["inputs"][0]["records"] == 800
    assert any(f["kind"] == "leak" and f["gpu"] == "1" for f in out["findings"])


def test_declared_columns_are_said_in_the_report(tmp_path):
    html = tmp_path / "r.html"
    p = run_cli("report", str(write_noheader(tmp_path / "gpu.csv")), "-o", str(html),
                "--columns", "timestamp,index,memory.used,memory.total")
    assert p.returncode == 0, p.stderr
    assert "declared with --columns: timestamp, index, memory.used, memory.total" in html.read_text()


@pytest.mark.parametrize("cmd", ["report", "timeline", "scan"])
@pytest.mark.parametrize("spec, why", [("timestamp,index,memry.used", "memry.used is not an nvidia-smi"),
                                       ("timestamp,index", "no memory.used"), ("timestamp,,memory.used", "empty"),
                                       ("index,memory.used,index", "index named twice")])
def test_bad_columns_get_a_one_line_error(tmp_path, cmd, spec, why):
    src = write_noheader(tmp_path / "gpu.csv")
    args = {"report": ["-o", ""], "timeline": ["-o", str(tmp_path / "a.csv")], "scan": ["-o", str(tmp_path / "out")]}
    p = run_cli(cmd, str(src if cmd != "scan" else tmp_path), *args[cmd], "--columns", spec)
    assert p.returncode == 2
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1 and why in err and "--columns timestamp,index,memory.used,memory.total" in err, err


def test_declared_columns_leave_a_header_alone(tmp_path):
    # a file with its own header is read by it; the notes do not claim declared columns
    from conftest import parse_file
    from forensics.options import Options

    path = tmp_path / "gpu.csv"
    path.write_text("timestamp, index, memory.used [MiB]\n2026/11/30 03:00:00.000, 0, 5 MiB\n")
    p = parse_file(path, Options(tz="UTC", columns=["timestamp", "index", "memory.free"]), expect="nvidia-smi-csv")[1]
    assert p.samples["series"].to_list() == ["memory.used"] and p.samples["bytes"].to_list() == [5 << 20]
    assert not any("--columns" in n for n in p.notes)


def write_four_gpus(path: Path, units: bool, extra: bool, seconds: int = 3221, start: int = 200) -> Path:
    """`--query-gpu=timestamp,index,[name,pci.bus_id,]memory.used,memory.total[,utilization.gpu]
    --format=csv,noheader[,nounits] -l 1` on 4 GPUs: GPU 2 leaks from `start` on, the others (and GPU 2
    before it) idle at 0-65 MiB, as a node reads before and beside a one-GPU job."""
    t0 = datetime(2026, 11, 30, 3, 0, 0)
    mib, pct = (" MiB", " %") if units else ("", "")
    rows = []
    for i in range(seconds):
        t = (t0 + timedelta(seconds=i)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        for g in range(4):
            used = 2000 + 8 * (i - start) + (i * 7) % 13 if g == 2 and i >= start else (0, 3, 65, 1)[g] * (i % 50 > 0)
            if extra:
                rows.append(f"{t}, {g}, NVIDIA A100-SXM4-80GB, 00000000:{0x10 + g:02X}:00.0, {used}{mib}, 81920{mib}, "
                            f"{97 if g == 2 and i >= start else 0}{pct}")
            else:
                rows.append(f"{t}, {g}, {used}{mib}, 81920{mib}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("units", [True, False], ids=["units", "nounits"])
@pytest.mark.parametrize("extra", [False, True], ids=["4cols", "name-bus-util"])
def test_four_gpus_idle_at_first_one_leaking_is_read(tmp_path, units, extra):
    # the first rows of such a log show only idle GPUs (0-65 MiB, no more than a percentage): the
    # values of later rows tell memory.used
    from conftest import parse_file
    from forensics.options import Options

    p = parse_file(write_four_gpus(tmp_path / "gpu.csv", units, extra), Options(tz="UTC"), expect="nvidia-smi-csv")[1]
    assert p.samples.filter(p.samples["series"] == "memory.used").height == 4 * 3221
    top = p.samples.group_by("gpu").agg(pl.col("bytes").max()).sort("gpu")["bytes"].to_list()
    assert top[2] > 20 << 30 and max(top[0], top[1], top[3]) <= 65 << 20
    out = run_cli("report", str(tmp_path / "gpu.csv"), "-o", "", "--json", "-")
    verdict = json.loads(out.stdout)
    assert verdict["verdict"] == "leak" and {f["gpu"] for f in verdict["findings"] if f["kind"] == "leak"} == {"2"}


def test_undecidable_columns_say_what_was_seen_and_the_columns_to_pass(tmp_path):
    # every GPU idle throughout: column 3 could be memory.used or a percentage; the one-line message says
    # what the columns read and the --columns value that reads it
    src = write_four_gpus(tmp_path / "gpu.csv", units=False, extra=False, seconds=300, start=1000)
    p = run_cli("report", str(src), "-o", "")
    assert p.returncode == 0
    lines = [ln for ln in p.stderr.splitlines() if "gpu.csv" in ln]
    assert len(lines) == 1, p.stderr
    assert "4 GPUs: column 3 reads 0–65, column 4 reads 81920 throughout" in lines[0]
    assert "if column 3 is memory.used, pass `--columns timestamp,index,memory.used,memory.total`" in lines[0]
    q = run_cli("report", str(src), "-o", "", "--json", "-", "--columns", "timestamp,index,memory.used,memory.total")
    assert json.loads(q.stdout)["inputs"][0]["records"] == 1200


def _lone_column(path: Path, values: list[int]) -> Path:
    """`--query-gpu=timestamp,index,<one memory property> --format=csv,noheader,nounits -l 1` of one GPU."""
    t0 = datetime(2026, 12, 1, 22, 29, 43)
    path.write_text("".join(f"{(t0 + timedelta(seconds=i)).strftime('%Y/%m/%d %H:%M:%S.%f')[:-3]}, 0, {v}\n"
                            for i, v in enumerate(values)))
    return path


def _message(path: Path) -> str:
    p = run_cli("report", str(path), "-o", "")
    (line,) = [ln for ln in p.stderr.splitlines() if path.name in ln]
    return line


def test_a_headerless_free_column_alone_is_offered_as_memory_free(tmp_path):
    """#40: `timestamp, index, memory.free` without header or units (the recorded rows of
    tests/samples/nvidia-smi-csv/nvsmi_csv_free_only_leak.txt) is not read without --columns, a lone column's
    values not telling used from free; its message offers memory.free first, its values starting and ending at
    their highest as free memory does around a job, and that value reads the leak."""
    rows = (ROOT / "tests" / "samples" / "nvidia-smi-csv" / "nvsmi_csv_free_only_leak.txt").read_text().splitlines()[2:]
    src = tmp_path / "free.csv"
    src.write_text("".join(row.removesuffix(" MiB") + "\n" for row in rows))
    line = _message(src)
    assert ("column 3 starts and ends at its highest, as free memory does on a GPU idle before and after a job: "
            "if it is memory.free, pass `--columns timestamp,index,memory.free`; if memory.used, "
            "`--columns timestamp,index,memory.used`") in line
    q = run_cli("report", str(src), "-o", "", "--json", "-", "--columns", "timestamp,index,memory.free")
    assert json.loads(q.stdout)["verdict"] == "leak"


@pytest.mark.parametrize("values, first", [
    ([3] * 5 + [2000 + 300 * i for i in range(30)] + [3] * 5, "memory.used"),   # idle, a job, idle
    ([2000 + 300 * i for i in range(30)], None),                              # mid-job: nothing tells
])
def test_a_headerless_lone_column_offers_the_order_its_values_fit(tmp_path, values, first):
    line = _message(_lone_column(tmp_path / "gpu.csv", values))
    if first == "memory.used":
        assert ("column 3 starts and ends at its lowest, as used memory does on a GPU idle before and after a job: "
                "if it is memory.used, pass `--columns timestamp,index,memory.used`; if memory.free, "
                "`--columns timestamp,index,memory.free`") in line
    else:
        assert ("if column 3 is memory.used, pass `--columns timestamp,index,memory.used`; if memory.free, "
                "`--columns timestamp,index,memory.free`") in line
