"""Cheaper checks on the step-log reader's paths, each the same answer as the one it replaced (issue 45:
five_million_lines runs them on every line of a part, many_files_100k once for each of its files). The literal
searches are regexes of literals where polars' contains_any took 3-5 times as long: each must find exactly the
lines contains_any finds, ASCII case folding included and nothing more (`(?i)` alone would also take the
Kelvin sign for a `k` and the long s for an `s`). free.with_fall counts its series' readings. A batch's kept lines
leave out the general reader's copies of the generic shapes' lines before their union."""
from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from forensics.parsers import free, ranks
from forensics.parsers.steplog import families, reader

# (regex, literals, ascii_case_insensitive)
SEARCHES = {
    "rank prefixes": (ranks._ANY_PREFIX_SIGN, ranks.PREFIX_SIGNS, False),
    "family literals": (families.FAMILY_PLAIN_LITERALS, list(families._HELD), False),
    "wider words": (reader._WIDER_WORDS_ASCII_CI, reader._WIDER_WORDS, True),
}
_PIECES = sorted({x for _, words, _ in SEARCHES.values() for x in words}
                 | {"USED", "Peak", "In Use", "IN_USE", "VRAM", "uſed", "\u212aB", "pea\u212a", "] :", "pid =", "|local"})


def _same(texts: list[str | None], name: str) -> None:
    regex, words, ci = SEARCHES[name]
    s = pl.Series("text", texts, dtype=pl.String)
    got = s.to_frame().select(pl.col("text").str.contains(regex)).to_series()
    want = s.to_frame().select(pl.col("text").str.contains_any(words, ascii_case_insensitive=ci)).to_series()
    assert got.to_list() == want.to_list(), name


@pytest.mark.parametrize("name", SEARCHES)
def test_each_search_finds_the_lines_contains_any_finds(name):
    _same(["[step 3] allocated: 5 MB", "[default1]:[rank1]: x", "(WorkerDict pid=12, ip=1.2.3.4) y",
           "[Rank 0 | Local Rank 0] z", "a [repeated 3x across cluster]", "Max_MA 1 GB", "iteration 5",
           "***** train metrics *****", "GPU memory USED: 3 GB", "Peak VRAM 2 GiB", "in use 1 GB", "uſed 1 GB",
           "pea\u212a 1 GB", "", None], name)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=6)), max_size=6).map("".join),
                max_size=20))
def test_each_search_finds_the_lines_contains_any_finds_in_any_text(texts):
    for name in SEARCHES:
        _same(texts, name)


@pytest.mark.parametrize("series, falls", [
    (["free", "free"], True), (["free", None], True), ([None, None], False), (["free", "allocated"], False),
    (["allocated"], False), ([], False)])
def test_free_memory_alone_gets_its_fall_series(series, falls):
    """free.with_fall counts the readings of the free series instead of listing the distinct series (a
    query that cost more than the rest of a one-line file's reading): the fall is added exactly where the
    free series is the only one, nulls aside."""
    s = pl.DataFrame({"line": range(len(series)), "series": series, "bytes": [10 << 20] * len(series)},
                     schema={"line": pl.Int64, "series": pl.String, "bytes": pl.Int64})
    out = free.with_fall(s, "free")
    assert (out.height > s.height) == falls
    if falls:
        assert out.filter(pl.col("series") == free.FALL)["line"].to_list() == s.filter(
            pl.col("series") == "free")["line"].to_list()


def _kept(lines: list[int], generic: bool) -> pl.DataFrame:
    lines = sorted(set(lines))
    return pl.DataFrame({"line": lines, "text": [f"text of {x}" for x in lines], "generic": [generic] * len(lines)},
                        schema={"line": pl.Int64, "text": pl.String, "generic": pl.Boolean})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(1, 60), min_size=1, max_size=40), st.booleans()), min_size=1,
                max_size=4))
def test_a_batchs_kept_lines_are_the_union_without_the_general_rows_of_generic_lines(frames):
    """The general reader's rows of lines that a generic frame holds are left out before the union, which
    keeps the generic row of such a line anyway: the same lines, texts and flags."""
    frames = [_kept(lines, generic) for lines, generic in frames]
    assert_frame_equal(reader._union(reader._general_only_once(frames)),
                       reader._union(frames))


def test_a_log_of_readings_keeps_each_line_once_without_a_sort():
    """five_million_lines: every line is a reading (kept for the generic shapes) and holds a memory word (kept
    for the general reader); the union sorted twice each batch's lines to drop the second copies."""
    lines = list(range(1, 1001))
    generic = _kept(lines, True)
    assert reader._general_only_once([generic, _kept(lines, False)]) == [generic]
