"""Small frames take plain paths where a polars query's fixed cost is most of the work (a job folder of
thousands of one-line logs): each gives what the query gives."""
from __future__ import annotations

from datetime import datetime

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics import model
from forensics.model import EVENTS_SCHEMA, SAMPLES_SCHEMA, conform

# columns a reader's table may hold before it is conformed: right or wrong types, some missing
_COLUMNS = {
    "time": st.sampled_from([pl.Datetime("us"), pl.Datetime("ms", "UTC"), pl.String, pl.Null]),
    "line": st.sampled_from([pl.Int64, pl.Int32, pl.UInt32, pl.Float64, pl.String]),
    "bytes": st.sampled_from([pl.Int64, pl.Float64, pl.String, pl.UInt64, pl.Null]),
    "series": st.sampled_from([pl.String, pl.Categorical, pl.Null]),
    "gpu": st.sampled_from([pl.String, pl.Int64, pl.Null]),
    "step": st.sampled_from([pl.Int64, pl.Float64, pl.String]),
    "kind": st.sampled_from([pl.String, pl.Null]),
}
_VALUES = st.one_of(st.none(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=True), st.text(max_size=8),
                    st.sampled_from(["12", "-3", "1.5", "1e3", "2026-01-02 03:04:05", "nan"]),
                    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2300, 1, 1)))


def _column(name, dtype, values):
    try:
        return pl.Series(name, values, dtype=dtype, strict=False)
    except Exception:  # noqa: BLE001 - a value the dtype cannot hold: nulls of that dtype instead
        return pl.Series(name, [None] * len(values), dtype=dtype)


@settings(max_examples=500, deadline=None)
@given(st.data(), st.integers(0, 6))
def test_conform_column_by_column_is_the_query(data, height):
    names = data.draw(st.lists(st.sampled_from(sorted(_COLUMNS)), min_size=1, unique=True))
    df = pl.DataFrame([_column(n, data.draw(_COLUMNS[n]), data.draw(st.lists(_VALUES, min_size=height, max_size=height)))
                       for n in names])
    for schema in (SAMPLES_SCHEMA, EVENTS_SCHEMA):
        small = _outcome(conform, df, schema)
        model.SMALL_FRAME_ROWS, keep = -1, model.SMALL_FRAME_ROWS
        try:
            query = _outcome(conform, df, schema)
        finally:
            model.SMALL_FRAME_ROWS = keep
        if isinstance(query, str):   # a cast neither path makes (text to a time): the same error
            assert small == query
            continue
        assert small.schema == query.schema == pl.Schema(schema)
        assert small.height == df.height
        if set(names) & set(schema):
            assert small.equals(query, null_equal=True)
        # (else the query, all literals, gave one row whatever the frame's height)


def _outcome(fn, *args):
    try:
        return fn(*args)
    except pl.exceptions.PolarsError as e:
        return f"{type(e).__name__}: {e}"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet=st.sampled_from("0123456789 ab-é\ufeff\r\n\x00\t#\"',"),
                                             max_size=12)), max_size=12))
def test_translated_is_replace_many(texts):
    """frames.translated (the digit mask of the general reader's lines) gives what replace_many gives,
    string for string, whatever the strings hold: a byte order mark first, quotes, blanks, CR, NUL,
    newlines, nulls."""
    from forensics.frames import translated
    text = pl.Series("text", texts, pl.String)
    table = bytes.maketrans(b"123456789", b"000000000")
    want = text.str.replace_many([str(d) for d in range(1, 10)], ["0"] * 9)
    assert translated(text, table).to_list() == want.to_list()
