"""A longer fuzzing campaign: the properties of tests/test_fuzz_parsers.py (evaluation/fuzzing.py) at high example counts.

    python bench/fuzz.py                         # 2000 cases per property, all properties
    python bench/fuzz.py --examples 20000 --budget 120 --only mutated,forced
    python bench/fuzz.py --seed 7                # another stream of cases
    python bench/fuzz.py --detect 2000           # detection only: 2000 series shapes per property
    python bench/fuzz.py --hostile pickles,redos # the hostile-input families of tests/hostile (issue 45)
    python bench/fuzz.py --hostile lines --cgroup  # each case under a 1 GB memory cgroup (root)
    python bench/fuzz.py --hostile lines,scan --cases five_million_lines,many_jobs  # some cases only

`--detect N` runs the detection properties of tests/test_detect_properties.py instead (generators and
checks in evaluation/shapes.py): random series shapes through analyze_xy, through analyze() on a
Bundle and through the report (HTML, Markdown, JSON summary), N cases per property.

`--hostile FAMILIES` (comma list, or `all`: pickles bombs lines redos inject time numbers scan) writes
each family's cases with tests/hostile/hostile_cases.py into a temporary folder (bombs: about 1.4 GB
on disk for all) and runs `report` on each (`scan -j 2` on the scan family's archives), each under a 10 s
budget (--slow) and an 8 GB address-space limit (--memory; polars reserves far more address space than
it uses, so the 1 GB target is checked on the case's peak resident memory, --max-rss): a case passes
when it ends in time with exit 0, 1 or 2, no traceback, no signal and at most --max-rss MB resident.
Prints one line per case: exit (negative: the signal), seconds, CPU seconds (user + system, its
process and the workers it waited for), its peak resident memory, first stderr line.

Unlike the test (which stops at the first failure and shrinks it), the campaign keeps going: every
case that breaks a property is counted, grouped by where it broke (exception type and the innermost
frame inside forensics/, or the failed assertion), and the first case of each group is printed so it
can be turned into a regression test. Prints a table: property, cases tried, failures, seconds.
Exit status 1 when any case failed.
"""
from __future__ import annotations

import argparse
import contextlib
import faulthandler
import subprocess
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from evaluation import fuzzing, shapes  # noqa: E402
from forensics import parsers  # noqa: E402


class _OutOfTime(BaseException):
    """Raised inside a case to end a property's run when its time budget is spent (BaseException:
    hypothesis lets it through instead of counting it as a failure)."""


class Stats:
    def __init__(self, name: str):
        self.name, self.cases, self.failures, self.seconds = name, 0, 0, 0.0
        self.kinds: Counter[str] = Counter()
        self.examples: dict[str, str] = {}
        self.claimed = 0
        self.slowest = 0.0


def _where(exc: BaseException) -> str:
    """Exception type and the innermost frame in forensics/ (or the assertion's first line)."""
    if isinstance(exc, AssertionError):
        return "AssertionError: " + str(exc).split("\n")[0][:200]
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/forensics/" in f.filename]
    at = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return f"{type(exc).__name__} at {at}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def run_property(name: str, strategy, check, examples: int, budget: float, seed_value: int,
                 slow: float = 60.0) -> Stats:
    stats = Stats(name)
    started = time.perf_counter()

    @seed(seed_value)
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def case(value):
        if time.perf_counter() - started > budget:
            raise _OutOfTime()
        stats.cases += 1
        t0 = time.perf_counter()
        # a case that hangs shows where: its stack is printed once it has run `slow` seconds
        faulthandler.dump_traceback_later(slow, repeat=False, file=sys.stderr)
        try:
            if check(value):
                stats.claimed += 1
        except Exception as e:  # noqa: BLE001 - every failure is counted, none stops the campaign
            stats.failures += 1
            key = _where(e)
            stats.kinds[key] += 1
            stats.examples.setdefault(key, repr(value)[:400])
        finally:
            faulthandler.cancel_dump_traceback_later()
        took = time.perf_counter() - t0
        if took > slow:
            stats.failures += 1
            key = f"slow case: {took:.0f} s (over --slow {slow:.0f} s)"
            stats.kinds[key] += 1
            stats.examples.setdefault(key, repr(value)[:400])
        stats.slowest = max(stats.slowest, took)

    try:
        case()
    except _OutOfTime:
        pass
    stats.seconds = time.perf_counter() - started
    return stats


def detect_properties(only: set[str] | None):
    """Detection: series shapes through analyze_xy, analyze() and the report (evaluation/shapes.py)."""
    out = [
        ("detect: analyze_xy, every shape", "xy", shapes.series_cases(), shapes.check_series),
        ("detect: one series, analyze + report", "one", shapes.series_cases(), shapes.check_one),
        ("detect: bundles, analyze + report", "bundle", shapes.bundle_cases(), shapes.check_bundle),
    ]
    return [p for p in out if not only or p[1] in only]


def properties(only: set[str] | None, names: set[str] | None = None):
    out = [
        ("sniff: arbitrary heads", "sniff", st.lists(fuzzing.line_strategy, max_size=40), fuzzing.check_sniff),
        ("parse_one: arbitrary bytes", "bytes", st.one_of(st.binary(max_size=5000), fuzzing.encoded_lines),
         lambda d: fuzzing.check_file(d)[0] is not None),
        ("parse_one: mutated real snippets", "mutated", fuzzing.mutated_seed(), lambda d: fuzzing.check_file(d)[0] is not None),
    ]
    for m in parsers.PARSERS:
        seeds = fuzzing.seeds_for(m)
        if not seeds or (names and m.name not in names):
            continue
        out.append((f"{m.name}.parse/scan: mutations", "forced", fuzzing.forced_cases(m, seeds),
                    lambda d, m=m: fuzzing.check_forced(m, d)))
    return [p for p in out if not only or p[1] in only]


@contextlib.contextmanager
def _removed_by_rm(folder: str):
    try:
        yield
    finally:
        subprocess.run(["rm", "-rf", folder], check=False)


def _wait(proc: subprocess.Popen, deadline: float) -> tuple[int | str, int, float]:
    """(exit status, negative for a signal, or "timeout"; the case's own peak resident MB, at least
    this bench's own size, which the child had before it ran the case; its CPU seconds, user + system):
    the process group is killed at `deadline`."""
    import os

    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            os.killpg(proc.pid, 9)
            _, status, usage = os.wait4(proc.pid, 0)
            status = None
            break
        time.sleep(0.02)
    rc = os.waitstatus_to_exitcode(status) if status is not None else "timeout"
    proc.returncode = rc if isinstance(rc, int) else -9
    return rc, usage.ru_maxrss // 1024, usage.ru_utime + usage.ru_stime


def hostile(families: list[str], slow: float, memory_mb: int, max_rss_mb: int, cgroup: bool = False,
            cases: set[str] | None = None) -> int:
    """Each hostile case through the CLI, with a time and an address-space budget; 1 when any failed.
    With `cgroup`, each case runs in a memory cgroup of `max_rss_mb` instead of being judged on its peak
    resident memory: a case passes when it finishes under that limit (the allocator may keep freed pages
    where memory is free; under a limit the package hands them back, forensics/allocator.py)."""
    import os
    import resource
    import tempfile

    import hostile_cases

    names = list(hostile_cases.FAMILIES) if families == ["all"] else families
    failed = 0
    group = hostile_cases.memory_cgroup(max_rss_mb << 20, "fuzz") if cgroup else None
    if cgroup and group is None:
        print("--cgroup: no writable cgroup v1 memory hierarchy here (needs root)", file=sys.stderr)
        return 2
    # (the scan family's folder 1,000+ deep is more than shutil.rmtree's recursion can remove)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp, _removed_by_rm(tmp):
        base = Path(tmp)
        for fam in names:
            hostile_cases.FAMILIES[fam](base / "cases")
            root = base / "cases" / fam
            for case in sorted(c for c in root.iterdir() if not cases or c.name in cases):
                out = base / "out"
                out.mkdir(exist_ok=True)
                # (two workers, as the reliability pass ran `many_jobs`: a scan of a 2-core machine)
                cmd = ([sys.executable, "-m", "forensics", "scan", str(case), "-o", str(out / "scan"), "-j", "2", "-q"]
                       if fam == "scan" else
                       [sys.executable, "-m", "forensics", "report", str(case), "-o", str(out / "c.html"),
                        "--json", str(out / "c.json"), "-q"])

                def limit():
                    resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
                    if group is not None:
                        (group / "cgroup.procs").write_text(str(os.getpid()))

                with tempfile.TemporaryFile() as errors:
                    t0 = time.perf_counter()
                    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=errors,
                                            preexec_fn=limit, start_new_session=True)
                    rc, peak, cpu = _wait(proc, t0 + slow)
                    secs = time.perf_counter() - t0
                    errors.seek(0)
                    text = errors.read().decode("utf-8", "replace")
                ok = rc in (0, 1, 2) and "Traceback" not in text and (group is not None or peak <= max_rss_mb)
                failed += not ok
                first = text.strip().splitlines()[0][:120] if text.strip() else ""
                print(f"{'ok  ' if ok else 'FAIL'} {fam}/{case.name}: exit {rc}, {secs:.1f} s, {cpu:.1f} s CPU, "
                      f"peak {peak} MB, {first}", flush=True)
    if group is not None:
        group.rmdir()
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=2000, help="cases per property (default 2000)")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds per property at most (default 300)")
    ap.add_argument("--only", default="", help="comma list of: sniff, bytes, mutated, forced "
                    "(with --detect: xy, one, bundle)")
    ap.add_argument("--detect", type=int, default=0, metavar="N",
                    help="run the detection properties instead, N cases each (claimed = cases found leaking)")
    ap.add_argument("--parsers", default="", help="comma list of parser NAMEs for the forced properties")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slow", type=float, default=None,
                    help="a case running longer counts as a failure, and its stack is printed (default 60 s; "
                         "with --hostile 10 s)")
    ap.add_argument("--hostile", default="", metavar="FAMILIES",
                    help="run the hostile-input families instead (comma list, or all)")
    ap.add_argument("--memory", type=int, default=8192, help="with --hostile: MB of address space per case")
    ap.add_argument("--max-rss", type=int, default=1024,
                    help="with --hostile: a case whose peak resident memory passes this many MB fails (default 1024)")
    ap.add_argument("--cases", default="", help="with --hostile: a comma list of case names to run (default every "
                    "case of the families)")
    ap.add_argument("--cgroup", action="store_true",
                    help="with --hostile: run each case in a memory cgroup of --max-rss MB (root only) and pass it "
                         "when it finishes there, instead of judging its peak resident memory")
    args = ap.parse_args(argv)
    if args.hostile:
        sys.path.insert(0, str(ROOT / "tests" / "hostile"))
        cases = {c.strip() for c in args.cases.split(",") if c.strip()} or None
        return hostile([f.strip() for f in args.hostile.split(",")], args.slow or 10.0, args.memory, args.max_rss,
                       args.cgroup, cases)
    args.slow = args.slow or 60.0
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    rows = []
    names = {s.strip() for s in args.parsers.split(",") if s.strip()} or None
    plan = detect_properties(only) if args.detect else properties(only, names)
    examples = args.detect or args.examples
    for title, _, strategy, check in plan:
        s = run_property(title, strategy, check, examples, args.budget, args.seed, args.slow)
        rows.append(s)
        extra = f" (claimed {s.claimed})" if s.claimed else ""
        print(f"  {title}: {s.cases} cases, {s.failures} failures, {s.seconds:.0f} s (slowest case {s.slowest:.1f} s){extra}",
              file=sys.stderr, flush=True)
        for key, n in s.kinds.most_common():
            print(f"    {n} x {key}", file=sys.stderr, flush=True)
    width = max(len(r.name) for r in rows) if rows else 10
    print(f"\n{'property':<{width}}  {'cases':>8}  {'failures':>8}  {'seconds':>8}  {'slowest':>8}")
    print(f"{'-' * width}  {'-' * 8}  {'-' * 8}  {'-' * 8}  {'-' * 8}")
    for r in rows:
        print(f"{r.name:<{width}}  {r.cases:>8}  {r.failures:>8}  {r.seconds:>8.1f}  {r.slowest:>8.2f}")
    total_cases, total_fail = sum(r.cases for r in rows), sum(r.failures for r in rows)
    print(f"{'total':<{width}}  {total_cases:>8}  {total_fail:>8}  {sum(r.seconds for r in rows):>8.1f}  "
          f"{max((r.slowest for r in rows), default=0):>8.2f}")
    for r in rows:
        for key, n in r.kinds.most_common():
            print(f"\n[{r.name}] {n} x {key}\n  first case: {r.examples[key]}")
    return 1 if total_fail else 0


if __name__ == "__main__":
    sys.exit(main())
