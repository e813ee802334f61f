"""The CLI end to end on a small incident folder written here (all four kinds of input)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=120)


def write_incident(folder: Path) -> Path:
    """GPU 0 leaks 64 MiB per sample from sample 60 on, GPU 1 is flat; the job is OOM-killed at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    t0 = datetime(2026, 11, 30, 3, 0, 0)
    rows = ["timestamp, index, name, memory.total [MiB], memory.used [MiB]"]
    for i in range(240):
        t = (t0 + timedelta(seconds=i)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        used0 = 20000 + (64 * (i - 60) if i >= 60 else 0) + (i * 7) % 5
        rows.append(f"{t}, 0, NVIDIA H200, 143771 MiB, {used0} MiB")
        rows.append(f"{t}, 1, NVIDIA H200, 143771 MiB, {30000 + (i * 3) % 4} MiB")
    (folder / "gpu.csv").write_text("\n".join(rows) + "\n")
    lines = []
    for s in range(240):
        t = (t0 + timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        alloc = 18000 + (64 * (s - 60) if s >= 60 else 0)
        lines.append(f"{t} INFO train: [step {s}] allocated: {alloc:.2f} MB, cached: {alloc + 2048:.2f} MB")
    (folder / "train.log").write_text("\n".join(lines) + "\n")
    (folder / "kern.log").write_text(
        "2026-11-30T03:04:01.100000+00:00 gpuhost kernel: python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n"
        "2026-11-30T03:04:01.200000+00:00 gpuhost kernel: oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/job,task_memcg=/job,task=python3,pid=4242,uid=0\n"
        "2026-11-30T03:04:01.300000+00:00 gpuhost kernel: Memory cgroup out of memory: Killed process 4242 (python3) total-vm:53312244kB, anon-rss:31451456kB, file-rss:74816kB, shmem-rss:12296kB, UID:0 pgtables:69000kB oom_score_adj:0\n"
    )
    (folder / "sanitizer.txt").write_text(
        "========= COMPUTE-SANITIZER\n"
        "========= Leaked 1,048,576 bytes at 0x7f0000000000\n"
        "=========     Saved host backtrace up to driver entry point at allocation time\n"
        "=========         Host Frame: cudaMalloc [0x527bb] in leaky\n"
        "=========         Host Frame: make_buffer(int) [0x89bb] in leaky\n"
        "=========         Host Frame: main [0x8a00] in leaky\n"
        "========= \n"
        "========= LEAK SUMMARY: 1048576 bytes leaked in 1 allocations\n"
        "========= ERROR SUMMARY: 1 error\n"
    )
    (folder / "notes.bin").write_bytes(b"\x00\x01\x02" * 100)
    (folder / "README.txt").write_text("this job ran the nightly fine-tune\n")
    return folder


@pytest.fixture(scope="module")
def incident(tmp_path_factory) -> Path:
    return write_incident(tmp_path_factory.mktemp("job") / "job-1")


@pytest.fixture(scope="module")
def reported(incident, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    res = run_cli("report", str(incident), "-o", str(out / "r.html"), "--json", str(out / "s.json"),
                  "--md", str(out / "s.md"), "--tz", "UTC")
    return res, out


def test_report_exit_code_and_outputs(reported):
    res, out = reported
    assert res.returncode == 0, res.stderr
    assert (out / "r.html").stat().st_size > 1000
    assert (out / "s.md").read_text().strip()


def test_json_summary_contract(reported):
    _, out = reported
    s = json.loads((out / "s.json").read_text())
    assert s["tool"] == "gpu-forensics"
    assert s["verdict"] == "leak"
    assert set(s) >= {"tool", "version", "verdict", "inputs", "findings"}
    for i in s["inputs"]:
        assert set(i) >= {"path", "format", "lines", "records", "skipped", "start", "end", "error"}
    kinds = {f["kind"] for f in s["findings"]}
    assert {"leak", "oom_kill", "sanitizer_leak"} <= kinds
    for f in s["findings"]:
        assert set(f) >= {"kind", "severity", "summary", "gpu", "pid", "series", "pattern", "start", "end",
                          "start_index", "rate_bytes_per_hour", "rate_bytes_per_step", "growth_bytes", "bytes",
                          "evidence"}
        assert f["severity"] in ("critical", "warning", "info")
        assert f["evidence"], f"finding without evidence: {f['summary']}"
        for e in f["evidence"]:
            assert set(e) == {"path", "line", "text"} and e["line"] >= 1
    leak = next(f for f in s["findings"] if f["kind"] == "leak" and f["gpu"] == "0")
    assert leak["pattern"] == "linear"
    # 64 MiB per second from 03:01:00
    assert abs(leak["rate_bytes_per_hour"] - 64 * MiB * 3600) / (64 * MiB * 3600) < 0.05
    onset = datetime.fromisoformat(leak["start"].replace("Z", "+00:00"))
    assert abs((onset.replace(tzinfo=None) - datetime(2026, 11, 30, 3, 1, 0)).total_seconds()) <= 6
    assert leak["start"].endswith("Z")
    kill = next(f for f in s["findings"] if f["kind"] == "oom_kill")
    assert kill["pid"] == 4242
    formats = {Path(i["path"]).name: i["format"] for i in s["inputs"]}
    assert formats["gpu.csv"] == "nvidia-smi-csv"
    assert formats["kern.log"] == "kernel-log"
    assert formats["sanitizer.txt"] == "compute-sanitizer"
    assert formats["README.txt"] is None  # listed as skipped, not an error
    binary = next(i for i in s["inputs"] if i["path"].endswith("notes.bin"))
    assert binary["error"] and "binary" in binary["error"]


def test_html_is_self_contained(reported):
    _, out = reported
    html = (out / "r.html").read_text()
    # nothing loaded from outside: no src/href to another place, no @import, no url() to a remote
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?!#|data:)[a-z]+:""", html, re.I)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?!#|data:|javascript:)[^"'\s>]+\.(?:js|css|png|svg|woff2?)""", html, re.I)
    assert "@import" not in html
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", html)
    assert "<svg" in html


def test_fail_on_leak_exits_1(incident, tmp_path):
    res = run_cli("report", str(incident), "-o", str(tmp_path / "r.html"), "--fail-on", "leak", "--tz", "UTC")
    assert res.returncode == 1, res.stderr


def test_json_to_stdout(incident, tmp_path):
    res = run_cli("report", str(incident), "-o", "", "--json", "-", "--tz", "UTC")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verdict"] == "leak"


def test_missing_path_is_usage_error(tmp_path):
    res = run_cli("report", str(tmp_path / "nope"), "-o", str(tmp_path / "r.html"))
    assert res.returncode == 2
    assert "no such file or folder" in res.stderr
    assert "Traceback" not in res.stderr


def test_unknown_option_is_usage_error(tmp_path):
    res = run_cli("report", str(tmp_path), "--no-such-option")
    assert res.returncode == 2, res.stderr
    assert "No such option: --no-such-option" in res.stderr
    assert "Traceback" not in res.stderr and "\u256d" not in res.stderr   # no (rich) traceback box


def test_missing_argument_is_usage_error():
    res = run_cli("report")
    assert res.returncode == 2, res.stderr
    assert "Missing argument" in res.stderr
    assert "Traceback" not in res.stderr and "\u256d" not in res.stderr


def test_bad_zone_is_usage_error(incident, tmp_path):
    res = run_cli("report", str(incident), "-o", str(tmp_path / "r.html"), "--tz", "Mars/Olympus")
    assert res.returncode == 2
    assert "unknown time zone" in res.stderr


def test_sniff_names_each_parser(incident):
    res = run_cli("sniff", str(incident))
    assert res.returncode == 0, res.stderr
    table = {Path(line.split("\t")[0]).name: line.split("\t")[1] for line in res.stdout.splitlines() if "\t" in line}
    assert table["gpu.csv"] == "nvidia-smi-csv"
    assert table["train.log"] == "step-markers"
    assert table["README.txt"] == "-"
    assert table["notes.bin"] == "-"


def test_timeline_writes_tables(incident, tmp_path):
    res = run_cli("timeline", str(incident), "-o", str(tmp_path / "aligned.parquet"), "--tz", "UTC")
    assert res.returncode == 0, res.stderr
    assert list(tmp_path.glob("aligned*.parquet"))


def test_usage_error_needs_no_click_package(tmp_path):
    """typer 0.2x no longer installs click: telling a usage error must not import it."""
    code = ("import sys; sys.modules['click'] = None\n"   # `import click` now fails, as without the package
            "from forensics.cli import main\n"
            f"sys.argv = ['gpu-forensics', 'report', {str(tmp_path)!r}, '--no-such-option']\n"
            "main()")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "No such option: --no-such-option" in res.stderr
    assert "Traceback" not in res.stderr and "\u256d" not in res.stderr


def test_every_option_of_every_command_says_what_it_does():
    """`scan --help` and `timeline --help` showed --tz and --year with no word on them."""
    import typer.main

    from forensics.cli import app

    commands = typer.main.get_command(app).commands
    assert {"report", "sniff", "timeline", "scan"} <= set(commands)
    bare = [(name, p.opts) for name, cmd in commands.items() for p in cmd.params
            if p.param_type_name == "option" and "--help" not in p.opts and not (p.help or "").strip()]
    assert bare == []


def test_command_help_paragraphs_are_not_broken_mid_sentence():
    """typer's help keeps a docstring's line breaks: `scan --help` showed "or a job" and "could not be
    read" on two short lines. A paragraph of a command's help is one line of its docstring."""
    import typer.main

    from forensics.cli import app

    for name, cmd in typer.main.get_command(app).commands.items():
        for paragraph in (cmd.help or "").split("\n\n"):
            assert "\n" not in paragraph.strip(), (name, paragraph)


# ---- #29: the CLI as typer/rich users expect ----------------------------------------------------------

def help_text(*args: str) -> str:
    """The help as words, without rich's box lines (a sentence wraps inside the box)."""
    res = run_cli(*args, "--help")
    assert res.returncode == 0, res.stderr
    return " ".join(re.sub("[\u2500-\u257f]", " ", res.stdout).split())


@pytest.mark.parametrize("command", ["report", "sniff", "timeline", "scan"])
def test_every_command_help_has_examples_and_exit_codes(command):
    text = help_text(command)
    assert "Examples:" in text and text.count(f"gpu-forensics {command} ") >= 2
    assert "Exit codes: 0" in text and "2 usage error" in text


def test_workers_default_is_said_once():
    text = help_text("scan")
    assert "[default: 0]" not in text and "the cores this process may use" in text


def test_shell_completion_is_available():
    res = run_cli("--help")
    assert "--install-completion" in res.stdout and "--show-completion" in res.stdout


def test_quiet_prints_nothing_but_errors_and_verbose_times_each_stage(incident, tmp_path):
    quiet = run_cli("report", str(incident), "-o", str(tmp_path / "r.html"), "--tz", "UTC", "-q")
    # only the error: notes.bin cannot be read (the "not recognized" README, verdict and counts are not errors)
    assert quiet.returncode == 0 and quiet.stderr.splitlines() == [
        f"{incident / 'notes.bin'}: binary file, it is not text (control characters, invalid UTF-8 or NUL bytes), "
        "pass the text log instead (for a journal: journalctl -o short-iso > kern.txt)"], quiet.stderr
    loud = run_cli("report", str(incident), "-o", str(tmp_path / "r.html"), "--tz", "UTC", "-v")
    assert loud.returncode == 0, loud.stderr
    for stage in ("read", "align", "detect", "write"):
        assert re.search(rf"^{stage}: .* \(\d+\.\d\d s\)$", loud.stderr, re.M), (stage, loud.stderr)
    both = run_cli("report", str(incident), "-q", "-v")
    assert both.returncode == 2 and "pick one" in both.stderr


@pytest.mark.parametrize("args, words", [
    (["--start", "2026-11-30T03:00:00Z"], "--start 2026-11-30T03:00:00Z: needs --interval"),
    (["--end", "2026-11-30T03:00:00Z"], "--end 2026-11-30T03:00:00Z: needs --interval"),
    (["--start", "2026-11-30T03:00:00Z", "--end", "2026-11-30T04:00:00Z", "--interval", "1"], "both given"),
    (["--tz", "nothing-like-this.log=UTC"], "--tz nothing-like-this.log=UTC: matches no input file"),
    (["--json", "-", "--md", "-"], "only one output can go to stdout"),
], ids=["start", "end", "start-and-end", "tz-file", "two-stdouts"])
def test_options_that_go_together_are_checked_together(incident, tmp_path, args, words):
    res = run_cli("report", str(incident), "-o", str(tmp_path / "r.html"), "--tz", "UTC", *args)
    assert res.returncode == 2, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and words in errors[0], res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "r.html").exists()


def test_timeline_never_creates_folders(incident, tmp_path):
    res = run_cli("timeline", str(incident), "-o", str(tmp_path / "no" / "x.parquet"))
    assert res.returncode == 2 and "does not exist" in res.stderr and not (tmp_path / "no").exists()
