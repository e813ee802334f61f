"""How long reading a big PyTorch memory snapshot takes, and how much memory it needs.

    python bench/snapshot_read.py                    # ~100 MB and ~1 GB snapshots in a temporary folder
    python bench/snapshot_read.py --sizes 5000       # the 5 GB read (memory bounded: see the peak RSS)
    python bench/snapshot_read.py --sizes 100 --pickle-load   # also time pickle.load (what memory_viz does)

The snapshots are made by bench/snapshot_gen.py from the distributions of the three real snapshots
in sample_logs/ (call paths and their variants appearing through the run, sizes, lifetimes, leaks,
the action mix, segments, time gaps), as the opcodes `pickle.dump` writes; not one batch of entries
repeated. Each read runs in its own process (`gpu-forensics`'s parser, as `report` calls it), which
reports its wall time and its peak RSS; the table goes to stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import snapshot_gen  # noqa: E402  (bench/ is not a package)

ROOT = Path(__file__).resolve().parent.parent


READ = r"""
import json, resource, sys, time
from pathlib import Path
t = time.perf_counter()
cpu = time.process_time()
if sys.argv[2] == "pickle":
    import pickle
    with open(sys.argv[1], "rb") as f:
        pickle.load(f)
    out = {}
else:
    from forensics import ingest
    from forensics.io.sources import Source
    from forensics.options import Options
    info, res = ingest.parse_one(Source.open(Path(sys.argv[1])), Options(tz="UTC", max_snapshot_bytes=1 << 40))
    out = {"entries": res[0].meta["snapshot"]["entries"], "from_bytes": res[0].meta["snapshot"]["entries_read_from_bytes"],
           "samples": res[0].samples.height, "events": res[0].events.height}
out.update(seconds=time.perf_counter() - t, cpu=time.process_time() - cpu, peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
print(json.dumps(out))
"""


def read(path: Path, how: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", READ, str(path), how], capture_output=True, text=True, env=env)
    if r.returncode:
        raise SystemExit(f"{how} read of {path} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100,1000", help="snapshot sizes in MB, comma-separated (default 100,1000)")
    ap.add_argument("--stacks", type=int, default=2000, help="distinct call paths of the run (default 2000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pickle-load", action="store_true", help="also time pickle.load (memory: ~7x the file)")
    ap.add_argument("--keep", help="write the snapshots here and keep them")
    args = ap.parse_args(argv)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="snapshot-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    m = snapshot_gen.model()
    small = folder / "check.pickle"
    snapshot_gen.check(small, snapshot_gen.make(small, 2 << 20, args.stacks, args.seed, m), m)
    small.unlink()
    print(f"{'size':>7} {'entries':>11} {'stacks':>7} {'make s':>7} {'read s':>7} {'CPU s':>6} {'entries/s':>10} "
          f"{'MB/s':>5} {'peak RSS':>9} {'from bytes':>10}  read by")
    for mb in (int(x) for x in args.sizes.split(",")):
        path = folder / f"snapshot-{mb}MB.pickle"
        t = time.perf_counter()
        info = snapshot_gen.make(path, mb * 1_000_000, args.stacks, args.seed, m)
        made = time.perf_counter() - t
        for how in ("gpu-forensics", *(("pickle",) if args.pickle_load else ())):
            got = read(path, how)
            fast = f"{got['from_bytes'] / max(got['entries'], 1):10.1%}" if "entries" in got else f"{'':>10}"
            print(f"{info['bytes'] / 1e6:6.0f}M {info['entries']:11,} {info['stacks']:7,} {made:7.1f} "
                  f"{got['seconds']:7.1f} {got['cpu']:6.1f} {info['entries'] / got['seconds']:10,.0f} {info['bytes'] / 1e6 / got['seconds']:5.0f} "
                  f"{got['peak_rss'] / 2**30:8.2f}G {fast}  {how}", flush=True)
        if not args.keep:
            path.unlink()
    if not args.keep:
        folder.rmdir()


if __name__ == "__main__":
    main()
