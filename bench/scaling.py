"""Cost against input size and number of series (issue 45 item 4): is it linear?

    python bench/scaling.py                          # series 500, 5000, 50000; logs 64, 256, 1024 MB; files 250, 1000
    python bench/scaling.py --series 1000,10000 --sizes 32,128 --kinds blank,junk --files ''

Generates under a temporary folder (never in the repo), seeded:
- `series`: a Prometheus query_range JSON export (DCGM_FI_DEV_FB_USED, 20 points a series at 15 s) of N
  series, one per (host, GPU); one series in a hundred grows. Past --max-series (default 5000) the
  report keeps the series that grow most, with a note.
- `blank`, `junk`, `events`: a job folder with a small nvidia-smi CSV (so the job has something to
  analyze) and one big log: blank lines; printable junk lines of 20-200 characters (no memory
  vocabulary); a kern.log of syslog lines, one in ten an NVRM Xid 79 and the rest ordinary kernel lines.
- `files`: a job folder of N step logs of one line each (the hostile case many_files_N): the cost per
  file, which is the readers' fixed cost (claiming, reading, checking a file) and not its size.
Each input is reported once (`gpu-forensics report DIR -o OUT --json OUT`, a process of its own), with
wall time, CPU time (user + system) and peak RSS by /usr/bin/time; the table gives CPU milliseconds per
series, per MB or per file, so linear cost shows as a flat column (the fixed start-up cost weighs on the smallest
inputs). The load average is printed with it (a shared machine's wall seconds are slower).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perf import ROOT, _load, measure  # noqa: E402

T0 = 1_767_618_000
MB = 1 << 20
CHUNK = 16 * MB


def gen_series(path: Path, n: int, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    with path.open("w") as f:
        f.write('{"status":"success","data":{"resultType":"matrix","result":[')
        for i in range(n):
            base = int(rng.integers(1000, 60000))
            slope = 40 if i % 100 == 0 else 0
            vals = ",".join(f'[{T0 + 15 * k},"{base + slope * k + int(rng.integers(0, 3))}"]' for k in range(20))
            sep = "," if i else ""
            f.write(f'{sep}{{"metric":{{"__name__":"DCGM_FI_DEV_FB_USED","gpu":"{i % 8}",'
                    f'"Hostname":"node-{i // 8:05d}","job":"dcgm-exporter"}},"values":[{vals}]}}')
        f.write("]}}\n")


def _small_csv(folder: Path) -> None:
    rows = ["timestamp, index, memory.used [MiB], memory.total [MiB]"]
    rows += [f"2026/01/05 10:{m:02d}:{s:02d}.000, 0, {2000 + (m * 60 + s) % 7} MiB, 81559 MiB"
             for m in range(2) for s in range(60)]
    (folder / "nvidia-smi.csv").write_text("\n".join(rows) + "\n")


def _junk_chunk(rng: np.random.Generator, size: int) -> bytes:
    # letters, digits and punctuation without a memory word: lines of 20-200 characters
    alphabet = np.frombuffer(b"qwrtzpsdfghjkl xcvbn QWRTZPSDFGHJKL XCVBN0123456789.,;-_/()", dtype=np.uint8)
    buf = alphabet[rng.integers(0, alphabet.size, size)]
    ends = np.cumsum(rng.integers(20, 201, size // 20 + 1))
    buf[ends[ends < size]] = ord("\n")
    buf[-1] = ord("\n")
    return buf.tobytes()


def _kern_chunk(rng: np.random.Generator, size: int, start: int) -> bytes:
    lines = []
    total = 0
    k = start
    while total < size:
        sec = k // 50
        stamp = f"Jan  5 {10 + sec // 3600 % 10:02d}:{sec // 60 % 60:02d}:{sec % 60:02d} node-1 kernel:"
        if k % 10 == 0:
            line = f"{stamp} NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
        else:
            line = f"{stamp} [{k * 0.02:12.6f}] eth0: link up, 100000 Mbps, full duplex, flow control rx/tx {k}\n"
        lines.append(line)
        total += len(line)
        k += 1
    return "".join(lines).encode()


def gen_log(folder: Path, kind: str, megabytes: int, seed: int = 11) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _small_csv(folder)
    rng = np.random.default_rng(seed)
    name = {"blank": "train.log", "junk": "train.log", "events": "kern.log"}[kind]
    left, k = megabytes * MB, 0
    with (folder / name).open("wb") as f:
        while left > 0:
            size = min(CHUNK, left)
            if kind == "blank":
                data = b"\n" * size
            elif kind == "junk":
                data = _junk_chunk(rng, size)
            else:
                data = _kern_chunk(rng, size, k)
                k += data.count(b"\n")
            f.write(data)
            left -= len(data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--series", default="500,5000,50000", help="series counts (comma list; '' for none)")
    ap.add_argument("--sizes", default="64,256,1024", help="log sizes in MB (comma list; '' for none)")
    ap.add_argument("--kinds", default="blank,junk,events", help="log kinds (comma list)")
    ap.add_argument("--files", default="250,1000", help="numbers of one-line files in a job (comma list; '' for none)")
    ap.add_argument("--dir", default=None, help="work folder (default: a temporary one, removed)")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        work = Path(tmp)
        cmd = [sys.executable, "-m", "forensics", "report"]
        for n in [int(x) for x in args.series.split(",") if x]:
            p = work / f"series_{n}.json"
            gen_series(p, n)
            r = measure([*cmd, str(p), "-o", str(work / "r.html"), "--json", str(work / "r.json"), "--tz", "UTC"],
                        check=False)
            cpu = r.cpu if r.cpu is not None else r.seconds
            rows.append((f"series {n}", p.stat().st_size / MB, r.seconds, cpu, r.peak_mb, r.status, cpu / n * 1000,
                         "ms/series"))
            p.unlink()
        for kind in [k for k in args.kinds.split(",") if k]:
            for mb in [int(x) for x in args.sizes.split(",") if x]:
                folder = work / f"{kind}_{mb}"
                gen_log(folder, kind, mb)
                r = measure([*cmd, str(folder), "-o", str(work / "r.html"), "--json", str(work / "r.json"),
                             "--tz", "UTC", "--year", "2026"], check=False)
                cpu = r.cpu if r.cpu is not None else r.seconds
                rows.append((f"{kind} {mb} MB", float(mb), r.seconds, cpu, r.peak_mb, r.status, cpu / mb * 1000, "ms/MB"))
                for f in folder.iterdir():
                    f.unlink()
                folder.rmdir()
        for n in [int(x) for x in args.files.split(",") if x]:
            folder = work / f"files_{n}"
            folder.mkdir()
            for i in range(n):
                (folder / f"f{i:06d}.log").write_text(f"[step {i}] allocated: {i} MB\n")
            r = measure([*cmd, str(folder), "-o", str(work / "r.html"), "--json", str(work / "r.json"), "--tz", "UTC"],
                        check=False)
            cpu = r.cpu if r.cpu is not None else r.seconds
            rows.append((f"files {n}", 0.0, r.seconds, cpu, r.peak_mb, r.status, cpu / n * 1000, "ms/file"))
            for f in folder.iterdir():
                f.unlink()
            folder.rmdir()
    print(f"load average {_load()}; {ROOT}")
    print("| input | MB | wall s | CPU s | peak MB | exit | CPU cost | unit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, size, wall, cpu, peak, rc, cost, unit in rows:
        print(f"| {name} | {size:.0f} | {wall:.2f} | {cpu:.2f} | {peak:.0f} | {rc} | {cost:.3f} | {unit} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
