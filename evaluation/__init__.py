"""Evaluation of gpu-forensics against known truth, apart from the product (not in the wheel).

- `evaluation.recordings`: the truth files of recorded incidents (README front matter, truth.json) and what
  each view of a recording must say;
- `evaluation.synthetic`: seeded synthetic series with known leaks, onsets, rates and job lifetimes;
- `evaluation.scoring`: findings and verdicts scored against that truth;
- `evaluation.shapes`: series of every shape and the properties detection and the report must keep;
- `evaluation.fuzzing`: hostile bytes for every parser and the properties their reading must keep.

bench/ (the figures, at full size) and tests/ (the same checks, small) both import it; neither imports the
other.
"""
