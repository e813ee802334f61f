"""The evaluation package measures what it says: the synthetic suite is drawn the same from its seed, with
truth that agrees with itself, and scoring counts a found leak, a missed one and a false alarm as such (with
a stand-in detector, so these hold whatever detection does; bench/accuracy.py runs the real one)."""
from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

from evaluation import scoring, synthetic

SEED, SCALE = 11, 0.01     # one case a family


def _draw(seed: int, family: str | None = None) -> list[synthetic.Case]:
    return list(synthetic.suite(seed, SCALE, family))


def test_the_suite_is_drawn_the_same_from_its_seed():
    a, b, other = _draw(SEED), _draw(SEED), _draw(SEED + 1)
    assert [c.name for c in a] == [c.name for c in b]
    assert all(x.samples.equals(y.samples) and x.events.equals(y.events) for x, y in zip(a, b))
    assert not all(x.samples.equals(y.samples) for x, y in zip(a, other))


def test_every_family_is_drawn_with_truth_that_agrees_with_its_verdict():
    cases = _draw(SEED)
    assert [c.family for c in cases] == [f for f, _ in synthetic.FAMILIES]
    for c in cases:
        leaking = [t for t in c.gpus.values() if t.leak]
        assert (c.verdict == "leak") == bool(leaking), c.name
        assert {g for g in c.gpus if g is not None} <= set(c.samples["gpu"].drop_nulls().unique().to_list()), c.name
        for t in leaking:
            lives = [lf for lf in t.lifetimes if lf.leak] or [t]
            for lf in lives:
                assert 0 <= lf.onset <= c.duration and lf.rate > 0, c.name
            assert t.lifetimes == [] or all(lf.start <= lf.end for lf in t.lifetimes), c.name


def _leak(gpu, x: float, rate: float | None = None, pattern: str = "linear"):
    """A leak finding as detection makes one, with only what scoring reads."""
    return SimpleNamespace(kind="leak", gpu=gpu, start=synthetic.T0 + timedelta(seconds=x), start_index=None,
                           pattern=pattern, rate_bytes_per_hour=rate * 3600 if rate else None, detail={},
                           rate_bytes_per_step=None, summary="leak")


def _score(monkeypatch, case: synthetic.Case, findings: list, verdict: str) -> scoring.Score:
    monkeypatch.setattr(scoring, "analyze",
                        lambda bundle, _: SimpleNamespace(findings=findings, verdict=verdict, verdict_reason="stand-in"))
    sc = scoring.Score()
    scoring.score_case(case, sc)
    return sc


def test_scoring_counts_found_missed_and_false_leaks(monkeypatch):
    case = _draw(SEED, "leak_linear")[0]
    leaking = {g: t for g, t in case.gpus.items() if t.leak}
    found = _score(monkeypatch, case, [_leak(g, t.onset, t.rate) for g, t in leaking.items()], "leak")
    assert (found.tp, found.fn, found.fp, found.verdict_ok) == (len(leaking), 0, 0, 1)
    assert found.onset_in_target == found.onset_n == found.pattern_ok == len(leaking)
    assert found.rate_err == [0.0] * len(leaking)

    missed = _score(monkeypatch, case, [], "no_leak")
    assert (missed.tp, missed.fn, missed.verdict_ok) == (0, len(leaking), 0)

    late = _score(monkeypatch, case, [_leak(g, t.onset + case.duration / 4, t.rate, "step") for g, t in leaking.items()],
                  "leak")
    assert late.tp == len(leaking) and late.onset_in_target == 0 and late.pattern_ok == 0

    healthy = _draw(SEED, "healthy")[0]
    gpu = next(iter(healthy.gpus))
    false = _score(monkeypatch, healthy, [_leak(gpu, 0.0)], "leak")
    assert (false.fp, false.healthy_false, false.false_leak_verdicts, false.tp) == (1, 1, 1, 0)
    prec, rec, _ = false.prf()
    assert prec == 0.0 and rec == 1.0


def test_the_gpu_total_does_not_hold_a_leak_another_job_moves():
    from evaluation.recordings import shared_total

    def job(pid, start, end, onset=None):
        return {"pid": pid, "start": f"2026-12-01T22:34:{start:02d}Z", "end": f"2026-12-01T22:34:{end:02d}Z",
                "leaks": onset is not None,
                "leak_onset_time": f"2026-12-01T22:34:{onset:02d}Z" if onset is not None else None}

    # a co-tenant exits during the leak; the leaking job dies first while the co-tenant goes on
    assert "ended during the leak" in shared_total([job(980, 10, 40), job(991, 15, 50, onset=25)])
    assert "after the leaking job" in shared_total([job(1008, 10, 50), job(1019, 15, 40, onset=25)])
    # a co-tenant that came and went before the leak began, or jobs one after the other: the total holds it
    assert shared_total([job(980, 10, 20), job(991, 15, 50, onset=25)]) is None
    assert shared_total([job(1, 0, 10, onset=5), job(2, 12, 20, onset=15)]) is None


def test_a_view_with_too_few_readings_of_the_leak_must_not_say_no_leak():
    from datetime import datetime, timezone

    import polars as pl

    from evaluation import recordings

    t = [datetime(2026, 12, 1, 22, 41, s, 550000, tzinfo=timezone.utc) for s in (6, 11, 16, 21, 26, 31, 36)]
    # heldout/linear_late_oom's 5 s CSV, MiB: the leak began at :26.4 and the job died at :34.3
    mib = [0, 561, 8761, 8761, 8961, 12961, 0]
    samples = pl.DataFrame({"time": t, "bytes": [m << 20 for m in mib], "source": "gpu-mem-5s.csv",
                            "series": "memory.used", "gpu": "0", "pid": None},
                           schema_overrides={"pid": pl.Int64})
    rec = recordings.Recording("linear_late_oom", "heldout", None, "leak", ["leak"],
                               jobs=[(t[0], t[6])], leak_spans=[(datetime(2026, 12, 1, 22, 41, 26, 377000,
                                                                          tzinfo=timezone.utc), t[6])])
    assert recordings.readings_of_leak(samples, rec.leak_spans) == 2
    exp, why = recordings.expectation_seen(rec, "smi_l1", samples)
    assert exp == "inconclusive or leak" and "2 readings of the leak" in why
    assert recordings.verdict_fits(exp, "inconclusive") and recordings.verdict_fits(exp, "leak")
    assert not recordings.verdict_fits(exp, "no_leak")
    # with a third reading of the leak the view holds the trend
    rec.leak_spans = [(t[3], t[6])]
    assert recordings.expectation_seen(rec, "smi_l1", samples)[0] == "leak"


def test_a_pool_that_rose_once_during_the_leak_is_no_evidence_for_device_views():
    """One jump of the allocator's pool, then a level while the leak goes on inside it, is a one-off
    allocation's shape to device memory (tests/corpus/tune/infer_cache_leak_sigkill: three rises
    within 0.8 s; bench/heldout5/jax_leak_oom_slow: one, at XLA's cap)."""
    from evaluation.recordings import pool_grew_at_once

    def job(rise_s, rises, leaks=True):
        return {"pid": 1, "leaks": leaks, "leak_growth_bytes": 2 << 30, "pool_rise_seconds": rise_s,
                "pool_rises_after_onset": rises}

    assert "one jump" in pool_grew_at_once([job(0.787, 3)])
    assert pool_grew_at_once([job(6.0, 12)]) is None            # a pool that grew along with the leak
    assert pool_grew_at_once([{"pid": 1, "leaks": True, "leak_growth_bytes": 1}]) is None   # pool never rose
    assert pool_grew_at_once([job(0.5, 1), job(6.0, 12)]) is None   # another leaking job's pool shows it
