"""What the readers keep of a batch does not hold the batch: a few lines kept of each batch of a big
file must not keep every batch in memory."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


_PINNING_PROBE = '''
import gc, sys
import polars as pl
from forensics.frames import owned
from forensics.options import Options
from forensics.parsers import scanners
from forensics.parsers.kernel import reader as kernel_reader
from forensics.parsers.steplog import markers, reader as step_reader

def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20

what, own = sys.argv[1], sys.argv[2] == "own"
if not own:
    scanners.owned = kernel_reader.owned = step_reader.owned = lambda df: df
consumer = {"step": lambda: markers.Reader(None, None), "kernel": lambda: kernel_reader.KernelReader(None, Options()),
            "scanners": lambda: scanners.Scanners(set())}[what]()
feed = consumer.feed
# one line in 1000 is one the consumer keeps: a memory reading, an OOM kill, a CUDA OOM
kept_line = {"step": "2026-10-01 00:00:00,000 INFO train: [step 7] allocated: 20480.6 MB, cached: 24576.6 MB",
             "kernel": "Oct  1 00:00:00 host kernel: Out of memory: Killed process 4242 (python) total-vm:1kB",
             "scanners": "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"}[what]
filler = "Oct  1 00:00:00 host systemd[1]: Started Session 4 of user root; nothing to see in this line at all"
base = rss_mb()
rows = 300_000
for b in range(8):
    i = pl.int_range(rows, dtype=pl.Int64)
    batch = pl.select((i + b * rows + 1).alias("line"), pl.when(i % 1000 == 7).then(pl.lit(kept_line))
                      .otherwise(pl.concat_str(pl.lit(filler), i.cast(pl.String))).alias("text"))
    feed(batch)
    del batch
    gc.collect()
print(rss_mb() - base)
'''


def _pinned_mb(what: str, own: bool) -> int:
    import os
    import subprocess
    import sys

    # freed pages go back to the OS at once: the RSS shows what is still referenced
    env = {**os.environ, "_RJEM_MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _PINNING_PROBE, what, "own" if own else "shared"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the RSS from /proc")
@pytest.mark.parametrize("what", ["step", "kernel", "scanners"])
def test_kept_lines_do_not_hold_their_batches(what):
    """Eight batches of ~35 MB each, one line in 1000 kept: the kept lines are copied out (frames.owned), so
    the batches are freed (a month of step log kept 1 GB of them before). The probe sees the
    difference: without the copy, the batches stay."""
    assert _pinned_mb(what, own=True) < 80
    assert _pinned_mb(what, own=False) > 160


