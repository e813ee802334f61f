"""Where the free-text training log's floor is: what searching every line costs against the polars regex scan.

    python bench/freetext_floor.py /tmp/gf-perf/month-freetext.log            # bench/perf.py --only freetext --keep
    python bench/freetext_floor.py FILE --rounds 3 --only floor,cut,look,report

The target (issue 43 item 6) is `gpu-forensics report` of a 1 GB free-text log at <= 2x bench/perf.py's
floor: polars' own scan of the lines and one `str.extract` of one key. The step-log reader cannot
know its keys before it reads, so it searches every line once for what any of its readers or the
free-text scanners may keep (StepLogReader.raw_batches: the step-log families' literals, the general
reader's memory words in any case, step markers at a line's start, the scanners' prefilters, `|`-led
rows), then reads only those lines. This times, each as a process of its own and in interleaved rounds
(a shared machine's speed drifts), the floor and the pieces of that work:

- floor       bench/perf.py's polars regex scan (one key extracted from every line);
- cut         the same scan cutting every line into a row with its number, no search;
- look        that scan filtered by the reader's one search of every line (the exact regex);
- reader      the reader's own cutting and search (io/lines.py batches, two search threads), no reading;
- read        the reader's whole read of the file: that, the kept lines read and the scanners fed, as the
              report's read stage does (no detection, no HTML);
- words       the scan filtered by the memory words alone, as literals in the casings people write
              (lower, Capitalized, Title_Case, UPPER: a literal prefilter the regex engine runs fast);
- passes      the whole search as literal passes: those words and the families' literals, the anchored
              step-marker and `|` regex, the scanners' prefilter with `rank` in those casings;
- report      `gpu-forensics report` end to end.
Printed: the median wall and CPU (user + system) seconds of each, its ratio to the floor's, lines kept
(for `read`: readings).

    POLARS_MAX_THREADS=1 python bench/freetext_floor.py FILE --parts   # what each part of the search costs

`--parts` reads the file into one frame of lines and times (CPU, best of 3) one `str.contains` pass per
part of the search over all of them: a pass that finds nothing cheaply (the cost of a pass itself),
each part of the reader's search and each scanner's prefilter, the memory words in any case (in one pass,
and in two whose case variants the regex engine searches for as literals) and as literals in those
casings, the whole search in one pass; then a pass over the lines the search finds, as a filter leaves
them and copied out of the file's buffers.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from perf import _FLOOR_REGEX, FREETEXT_KEY, _load  # noqa: E402

_SETUP = r"""
import re, sys, polars as pl
path = sys.argv[1]
t = pl.col("text")

def scan():
    return pl.scan_csv(path, has_header=False, separator="\x1f", quote_char=None, infer_schema=False,
                       new_columns=["text"]).with_row_index("line", offset=1)

def look():
    from pathlib import Path
    from forensics import parsers
    from forensics.parsers.scanners import Scanners
    from forensics.parsers.steplog import reader
    from forensics.io.sources import Source
    fmt = parsers.BY_NAME["step-markers"]
    found = {}
    class Probe(reader.StepLogReader):
        def _batches(self, regex, size):
            found["regex"] = regex
            return iter(())
    list(Probe(Source.open(Path(path)), None).raw_batches(Scanners({fmt.name, *fmt.covers})))
    return found["regex"]

def casings(words):
    return "|".join(sorted({re.escape(v) for w in words for v in (w, w.capitalize(), w.title(), w.upper())}))
"""

_QUERIES = {
    "cut": "n = scan().filter(t.str.len_bytes() > 1 << 20).collect(engine='streaming').height",
    "look": "n = scan().filter(t.str.contains(look())).collect(engine='streaming').height",
    "reader": r"""
from pathlib import Path
from forensics.io.sources import Source
from forensics.parsers.steplog import reader
r = reader.StepLogReader(Source.open(Path(path)), None)
n = sum(b.looked.result().height for b in r._batches(look(), reader.BATCH_BYTES))
""",
    "read": r"""
from pathlib import Path
from forensics import parsers
from forensics.io.sources import Source
from forensics.options import Options
from forensics.parsers.scanners import Scanners
from forensics.parsers.steplog import reader
fmt = parsers.BY_NAME["step-markers"]
sc = Scanners({fmt.name, *fmt.covers})
src = Source.open(Path(path))
src.head()
r = reader.StepLogReader(src, Options())
for b in r.raw_batches(sc):
    r.feed_raw(b, sc)
n = r.finish().samples.height
sc.finish(src, Options())
""",
    "words": r"""
from forensics.parsers.steplog import general
n = scan().filter(t.str.contains(casings(general.MEMORY_WORDS))).collect(engine='streaming').height
""",
    "passes": r"""
from forensics import parsers
from forensics.parsers.scanners import Scanners
from forensics.parsers.steplog import families, general, generic
fmt = parsers.BY_NAME["step-markers"]
sc = Scanners({fmt.name, *fmt.covers})
words = casings(general.MEMORY_WORDS + ["occupied"])
literals = "|".join([words, generic.READING_LITERALS, families.FAMILY_PLAIN_LITERALS, " = | =\t|\t= |\t=\t"])
passes = [literals, generic.MARKER_PREFILTER + r"|^\s*\|", sc.prefilter.replace("(?i:rank)", "rank|Rank|RANK")]
n = scan().filter(pl.any_horizontal([t.str.contains(p) for p in passes])).collect(engine='streaming').height
""",
}


def _command(name: str, path: Path, work: Path) -> list[str]:
    if name == "floor":
        return [sys.executable, "-c", _FLOOR_REGEX, str(path), FREETEXT_KEY]
    if name == "report":
        return [sys.executable, "-m", "forensics", "report", str(path), "-o", str(work / "report.html")]
    return [sys.executable, "-c", _SETUP + _QUERIES[name] + "\nprint(n)", str(path)]


def _timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the process and its threads, the last line it printed)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = proc.stdout.read()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status:
        raise SystemExit(f"{' '.join(cmd[:3])}...: exit status {status}")
    lines = out.strip().splitlines()
    return wall, ru.ru_utime + ru.ru_stime, lines[-1] if lines else ""


def parts(path: Path) -> None:
    """One `str.contains` pass per part of the search over the file's lines (`--parts`)."""
    import polars as pl

    from forensics import parsers
    from forensics.frames import owned
    from forensics.parsers.scanners import Scanners
    from forensics.parsers.steplog import general, generic, reader
    ns: dict = {"path": str(path), "pl": pl}
    exec(_SETUP, ns)
    lines = pl.read_csv(path, has_header=False, separator="\x1f", quote_char=None, infer_schema=False,
                        new_columns=["text"])
    fmt = parsers.BY_NAME["step-markers"]
    todo = [("a pass that finds nothing (`\\s=\\s`)", r"\s=\s")]
    todo += [(f"reader: {p[:40]}", p) for p in reader._PREFILTER_PARTS]
    # (the first seven words and the other five: two alternations whose case variants the regex engine takes
    # as literals to search for; six and six is not such a split, nor is one of twelve)
    half = 7
    todo += [("memory words in any case", general.CANDIDATE_REGEX),
             ("memory words, 4 casings as literals", ns["casings"](general.MEMORY_WORDS)),
             ("memory words in any case, in two passes",
              [f"(?i:{'|'.join(general.MEMORY_WORDS[:half])})", f"(?i:{'|'.join(general.MEMORY_WORDS[half:])})"])]
    todo += [(f"scanner {f.name}", f.scan.prefilter) for f in Scanners({fmt.name, *fmt.covers}).mods]
    todo += [("the whole search, one pass", ns["look"]())]
    print(f"{path}: {lines.height:,} lines, POLARS_MAX_THREADS={os.environ.get('POLARS_MAX_THREADS', '(all)')}")
    t = pl.col("text")
    for name, regex in todo:
        found = pl.any_horizontal(t.str.contains(r) for r in regex) if isinstance(regex, list) else t.str.contains(regex)
        print(f"{_best(lambda: lines.select(found.sum())):7.3f} CPU s  {name}")
    # the lines the search finds, as a filter leaves them (their strings where they were, one in tens over the
    # file's buffers) and copied out (reader._looked): a pass over them costs several times as much in place
    found = lines.filter(t.str.contains(ns["look"]()))
    for name, frame in (("in place", found), ("copied out", owned(found))):
        print(f"{_best(lambda: frame.select(t.str.contains(generic.NOT_OURS).sum())):7.3f} CPU s  "
              f"a pass of generic.NOT_OURS over the {frame.height:,} found lines, {name}")


def _best(fn) -> float:
    """The least CPU seconds of three calls of fn."""
    return min(_cpu(fn) for _ in range(3))


def _cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def main() -> None:
    names = ["floor", "cut", "look", "reader", "read", "words", "passes", "report"]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", type=Path, help="the free-text log (bench/perf.py --only freetext --keep makes one)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are printed")
    ap.add_argument("--only", default=",".join(names), help="comma list of " + ", ".join(names))
    ap.add_argument("--parts", action="store_true", help="time each part of the search instead (one pass each)")
    args = ap.parse_args()
    if args.parts:
        parts(args.path)
        return
    chosen = [n for n in args.only.split(",") if n]
    if set(chosen) - set(names):
        ap.error("unknown measurement")
    if "floor" not in chosen:
        chosen.insert(0, "floor")
    runs: dict[str, list[tuple[float, float, str]]] = {n: [] for n in chosen}
    loads = [_load()]
    with tempfile.TemporaryDirectory(prefix="gf-floor-") as work:
        for _ in range(args.rounds):
            for name in chosen:
                runs[name].append(_timed(_command(name, args.path, Path(work))))
            loads.append(_load())
    med = {n: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for n, v in runs.items()}
    fw, fc = med["floor"]
    print(f"{args.path} ({args.path.stat().st_size / 1e6:.0f} MB), {args.rounds} rounds, load {' -> '.join(loads)}")
    print(f"{'':8s} {'wall s':>7s} {'CPU s':>7s} {'wall x':>7s} {'CPU x':>7s}  lines kept")
    for n in chosen:
        w, c = med[n]
        kept = runs[n][-1][2] if n != "report" else ""
        print(f"{n:8s} {w:7.2f} {c:7.2f} {w / fw:7.2f} {c / fc:7.2f}  {kept}")


if __name__ == "__main__":
    main()
