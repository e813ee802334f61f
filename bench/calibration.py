"""How often a verdict is right at each confidence the report prints ("Confidence: NN %"), on every
recording (sample_logs/, tests/corpus/tune, tests/corpus/heldout) in every view that holds the
evidence, as bench/accuracy.py runs and judges them (a view holding too few readings must say
`inconclusive`, or may say `leak` where too few are of the leak).

    python bench/calibration.py [--corpus tune|heldout|all] [--recordings DIR ...]

A verdict's confidence is that of the finding it rests on (the first leak finding); verdicts with no
such finding (no_leak, cache_growth, inconclusive) are one row of their own.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluation.recordings import (VIEWS, expectation_seen, read_recordings, recording_roots,  # noqa: E402
                                   verdict_fits, view_expectation, view_files)

BINS = ((0.0, 0.5), (0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.01))


def main() -> int:
    from forensics import pipeline
    from forensics.options import Options
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", choices=("tune", "heldout", "all"), default="all")
    ap.add_argument("--recordings", action="append", default=[], metavar="DIR",
                    help="also the recordings under DIR (the held-out sets in bench/, once run)")
    args = ap.parse_args()
    rows: dict[str, list[bool]] = {}
    for base, root in recording_roots(args.corpus, args.recordings):
        for rec in read_recordings(base, root):
            files = view_files(rec.folder)
            for view in VIEWS:
                expected, _ = view_expectation(rec, view)
                if view not in files or expected is None:
                    continue
                bundle, an = pipeline.run(files[view], Options(tz=rec.tz, tz_from_user=True))
                # what the view must say given the readings it holds, as bench/accuracy.py judges it
                expected, _ = expectation_seen(rec, view, bundle.samples)
                lead = next((f for f in an.findings if f.kind == "leak" and f.confidence is not None), None)
                if an.verdict == "leak" and lead is not None:
                    lo, hi = next(b for b in BINS if b[0] <= lead.confidence < b[1])
                    key = f"leak, confidence {lo:.0%}–{min(hi, 1.0):.0%}"
                else:
                    key = f"{an.verdict} (no confidence printed)"
                rows.setdefault(key, []).append(verdict_fits(expected, an.verdict))
    print("| verdict as printed | views | right | share right |\n| --- | --- | --- | --- |")
    for key in sorted(rows):
        ok = rows[key]
        print(f"| {key} | {len(ok)} | {sum(ok)} | {sum(ok) / len(ok):.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
