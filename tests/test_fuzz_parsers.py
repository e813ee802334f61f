"""Cross-cutting property tests over EVERY parser, through `ingest.parse_one` (what users hit): whatever the
bytes, reading them raises nothing but the project's own errors, and every row points at a line of the file
that holds the number its byte count is made of (the properties and their hostile bytes: evaluation/fuzzing.py,
shared with bench/fuzz.py, which runs them at high example counts). Here the counts stay modest
(FORENSICS_FUZZ_EXAMPLES scales them) so the suite stays fast on two cores.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluation.fuzzing import (check_file, check_forced, check_sniff, encoded_lines, forced_cases, line_strategy,
                                made_of_a_number, mutated_seed, seeds_for)
from forensics import parsers

SCALE = float(os.environ.get("FORENSICS_FUZZ_EXAMPLES", "1"))


def _examples(n: int) -> int:
    return max(1, int(n * SCALE))


SETTINGS = dict(deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much, HealthCheck.large_base_example])

MODULE_IDS = [m.name for m in parsers.PARSERS]


@settings(max_examples=_examples(60), **SETTINGS)
@given(st.lists(line_strategy, max_size=30))
def test_sniff_never_raises(head):
    check_sniff(head)


@settings(max_examples=_examples(40), **SETTINGS)
@given(st.one_of(st.binary(max_size=3000), encoded_lines))
def test_arbitrary_bytes_through_parse_one(data):
    check_file(data)


@settings(max_examples=_examples(60), **SETTINGS)
@given(mutated_seed())
def test_mutated_real_snippets_through_parse_one(data):
    check_file(data)


@pytest.mark.parametrize("module", parsers.PARSERS, ids=MODULE_IDS)
def test_every_parser_on_mutations_of_what_it_claims(module):
    """A message (ForensicsError), or rows that hold."""
    seeds = seeds_for(module)
    if not seeds:
        pytest.skip(f"no seed file is claimed by {module.name}")

    @settings(max_examples=_examples(12), **SETTINGS)
    @given(forced_cases(module, seeds))
    def run(data):
        check_forced(module, data)

    run()


def test_every_parser_has_a_seed():
    """The mutation property means little for a parser no seed exercises."""
    missing = [m.name for m in parsers.PARSERS if not seeds_for(m)]
    assert not missing, f"no seed claimed by {missing}: add a small file to tests/torture/seeds/"


def test_made_of_a_number_is_strict():
    assert made_of_a_number(5 << 20, "allocated: 5 MiB")
    assert made_of_a_number(int(12.5 * (1 << 30)), "reserved 12.5 GB")
    assert made_of_a_number(1234 << 20, "used 1,234 MiB")
    assert not made_of_a_number(7 << 20, "allocated: 5 MiB")
    assert not made_of_a_number(5 << 20, "allocated: five MiB")


def test_a_derived_kv_cache_reading_holds_the_rows_invariants():
    """Found by bench/fuzz.py (2026-12-07): vLLM's stats lines after a memory profile that gives the KV cache's
    size read `GPU KV cache usage: 2.0%` as that share of the size, a number of no line: a derived series
    (fuzzing.DERIVED), like free.fall."""
    from evaluation.fuzzing import REALWORLD
    from forensics.parsers.serving import engines

    folder = REALWORLD / "serving-engine-log"
    data = (folder / "vllm_profile_one_line_workers.txt").read_bytes() + (folder / "vllm_metrics_kv_usage.txt").read_bytes()
    assert check_forced(engines.FORMAT, data)
