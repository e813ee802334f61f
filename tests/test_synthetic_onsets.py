"""The synthetic suite's onset truth says how far off its own samples leave an onset (`onset_spread`), and
scoring allows that much, never less than max(5 s, 2 % of the lifetime) (issue 40)."""
from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import numpy as np

from evaluation import scoring, synthetic

MiB = synthetic.MiB


def _best_hinge(x, y) -> float:
    """The least-squares onset of a level-then-ramp hinge, on a fine grid (any method does no better)."""
    cands = np.linspace(x[0], x[-3], 2000)
    h = np.maximum(0.0, x[None, :] - cands[:, None])
    yc = y - y.mean()
    sh, shh, shy = h.sum(axis=1), (h * h).sum(axis=1), h @ yc
    det = x.size * shh - sh * sh
    return float(cands[int(np.argmax(shy * shy * x.size / det))])


def test_a_slow_ramp_under_noise_places_its_onset_no_closer_than_its_spread():
    # the spread is honest (the least-squares hinge lands within it on nearly every draw) and not lenient
    # (it is 3 standard errors: at most ~3.5 times the spread of the draws' errors)
    x = np.arange(2000) * 1.0
    onset, rate, sigma = 700.0, 40 * MiB / 1000, 30 * MiB
    spread = synthetic.onset_spread(x, onset, rate, sigma)
    assert spread > max(5.0, 0.02 * x[-1])           # beyond the 5 s / 2 % target: the case it is for
    errors = np.array([_best_hinge(x, 1e9 + rate * np.maximum(0.0, x - onset)
                                   + np.random.default_rng(seed).normal(0, sigma, x.size)) - onset
                       for seed in range(60)])
    assert np.mean(np.abs(errors) <= spread) >= 0.95
    assert spread <= 3.5 * float(np.std(errors))


def test_a_steep_or_quiet_ramp_leaves_the_target_as_it_is():
    x = np.arange(600) * 2.0
    assert synthetic.onset_spread(x, 300.0, 50 * MiB, 10 * MiB) < 1.0
    assert synthetic.onset_spread(x, 300.0, 1 * MiB, 0.0) < 5.0        # 1-MiB rounding only


def test_a_sawtooth_floor_is_known_to_a_tooth():
    case = list(synthetic.suite(11, 0.01, "leak_sawtooth"))[0]
    x = (case.samples["time"].unique().sort() - synthetic.T0).dt.total_seconds().to_numpy()
    for t in (t for t in case.gpus.values() if t.leak):
        assert t.onset_spread >= 12 * float(np.median(np.diff(x)))


def test_scoring_allows_the_spread_and_no_more(monkeypatch):
    x = np.arange(5000) * 1.0
    spread = synthetic.onset_spread(x, 1500.0, 20 * MiB / 3600, 40 * MiB)
    target = scoring.onset_target(x[-1])
    assert spread > target
    case = synthetic.Case("000-stand_in", "leak_below_noise", "leak",
                          {"0": synthetic.GpuTruth(True, "linear", 1500.0, 20 * MiB / 3600, onset_spread=spread)},
                          True, float(x[-1]), synthetic._frame(x, {"0": np.full(x.size, 1e9)}, True))

    def score(at: float) -> scoring.Score:
        found = SimpleNamespace(kind="leak", gpu="0", start=synthetic.T0 + timedelta(seconds=at), start_index=None,
                                pattern="linear", rate_bytes_per_hour=None, detail={}, rate_bytes_per_step=None,
                                summary="leak")
        monkeypatch.setattr(scoring, "analyze", lambda bundle, _: SimpleNamespace(
            findings=[found], verdict="leak", verdict_reason="stand-in"))
        sc = scoring.Score()
        scoring.score_case(case, sc)
        return sc

    inside, beyond = score(1500.0 + 0.9 * spread), score(1500.0 + 1.1 * spread)
    assert (inside.onset_in_spread, inside.onset_in_target) == (1, 0)
    assert (beyond.onset_in_spread, beyond.onset_in_target) == (0, 0)
