"""Start-up: how long `gpu-forensics --help`, `--version` and the report of a one-line log take, against
the floor of any typer and rich command line, `python -c "import typer, rich"`.

    python bench/startup.py            # 11 rounds
    python bench/startup.py --runs 21

Each round runs every command once, in turn, so that the floor and the commands see the same load; the
table gives the median and the fastest run of each, and each median against the floor's. Two rows in
parentheses show what is not ours to cut: typer's own help (a two-command app), and the libraries a
report needs (polars, numpy, jinja2) imported with typer and rich. The one-line log is a real kern.log
line (tests/samples/kernel-log/kernlog_oom_04.txt, line 2: an OOM kill). The command is the installed
`gpu-forensics` script beside this Python, else `python -m forensics`.

The commands run as an installed package runs, from compiled .pyc files: PYTHONDONTWRITEBYTECODE is
dropped from their environment, so the unmeasured first round writes them (each later run would
otherwise compile every module it imports again, typer's and polars' too).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "tests/samples/kernel-log/kernlog_oom_04.txt"


# typer's own help, for comparison: an app of two commands with rich markup, as the real one
MINI_APP = """import typer
app = typer.Typer(rich_markup_mode="rich", help="Two commands.")
@app.command()
def report(paths: list[str], output: str = "report.html"):
    \"\"\"Analyze logs.\"\"\"
@app.command()
def sniff(paths: list[str]):
    \"\"\"Show parsers.\"\"\"
app()
"""
# the libraries a report cannot do without, imported as the command line imports them (one OpenBLAS thread)
LIBRARIES = "import os; os.environ.setdefault('OPENBLAS_NUM_THREADS', '1'); import typer, rich, polars, numpy, jinja2"


def commands(folder: Path) -> dict[str, list[str]]:
    log = folder / "kern.log"
    log.write_text(SAMPLE.read_text().splitlines()[1] + "\n")
    (folder / "mini.py").write_text(MINI_APP)
    script = Path(sys.executable).with_name("gpu-forensics")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "forensics"]
    return {
        'floor: python -c "import typer, rich"': [sys.executable, "-c", "import typer, rich"],
        "gpu-forensics --help": [*cli, "--help"],
        "gpu-forensics --version": [*cli, "--version"],
        "gpu-forensics report (a one-line kern.log)": [*cli, "report", str(log), "-o", str(folder / "report.html"),
                                                      "--json", str(folder / "summary.json"), "-q"],
        "(a two-command typer app's --help)": [sys.executable, str(folder / "mini.py"), "--help"],
        "(import typer, rich, polars, numpy, jinja2)": [sys.executable, "-c", LIBRARIES],
    }


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def seconds(argv: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    took = time.perf_counter() - t0
    if done.returncode not in (0, 1):   # 1: the report found something (the OOM), which is not a failure
        sys.exit(f"{' '.join(argv)}: exit status {done.returncode}\n{done.stderr.decode(errors='replace')}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=11, help="rounds (each runs every command once)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cmds = commands(Path(tmp))
        for argv in cmds.values():   # once unmeasured: the .pyc files written, the page cache warm
            seconds(argv)
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(args.runs):
            for name, argv in cmds.items():
                times[name].append(seconds(argv))
    floor = statistics.median(next(iter(times.values())))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.runs} interleaved rounds, python {sys.version.split()[0]}, {os.cpu_count()} cores, "
          f"load average {load}\n")
    print(f"| {'command':44} | median s | fastest s | × floor |")
    print(f"| {'-' * 44} | -------- | --------- | ------- |")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name:44} | {med:8.3f} | {min(ts):9.3f} | {med / floor:7.1f} |")


if __name__ == "__main__":
    main()
