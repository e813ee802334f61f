"""The plain-data pickle reader (parsers/torch/snapshot_pickle.py): what `pickle.dumps` writes for
plain data reads back equal in every protocol, whatever the chunking; everything else is refused or
called damaged, never run, never a traceback of another kind."""
from __future__ import annotations

import io
import pickle

import pytest
from hypothesis import given, settings, strategies as st

from forensics.parsers.torch.snapshot_pickle import Malformed, PlainUnpickler, Refused, TooBig

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 80), 1 << 80), st.floats(allow_nan=False),
                    st.text(max_size=40), st.text(min_size=300, max_size=400))
# (integers that hash alike are refused as keys: multiples of 2^61-1)
keys = st.one_of(st.text(max_size=12), st.integers(-5, 5), st.tuples(st.integers(-(1 << 60), 1 << 60), st.text(max_size=3)))
plain = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=6), st.tuples(inner, inner), st.tuples(inner, inner, inner, inner),
    st.dictionaries(keys, inner, max_size=6)), max_leaves=40)


def load(data: bytes, **kw):
    return PlainUnpickler(io.BytesIO(data).read, kw.pop("limit", 1 << 30), **kw).load()


@settings(max_examples=150, deadline=None)
@given(plain, st.integers(0, 5))
def test_plain_data_reads_back_equal(obj, protocol):
    assert load(pickle.dumps(obj, protocol=protocol)) == obj


@settings(max_examples=40, deadline=None)
@given(plain, st.sampled_from([1, 7, 64]))
def test_the_chunking_of_the_stream_does_not_matter(obj, piece):
    """A stream that gives a few bytes per read (a decompressor's pieces) reads the same."""
    data = pickle.dumps([obj, obj, {"k": obj}], protocol=4)
    bio = io.BytesIO(data)
    assert PlainUnpickler(lambda n: bio.read(min(n, piece)), 1 << 30).load() == [obj, obj, {"k": obj}]


def test_shared_objects_stay_shared():
    frame = {"filename": "train.py", "line": 3, "name": "f"}
    frames = [frame, frame]
    got = load(pickle.dumps({"a": frames, "b": frames}, protocol=4))
    assert got["a"] is got["b"] and got["a"][0] is got["a"][1]


@pytest.mark.parametrize("obj", [{1, 2}, frozenset([1]), b"bytes", bytearray(b"x")])
def test_what_a_snapshot_never_holds_is_refused(obj):
    with pytest.raises(Refused):
        load(pickle.dumps(obj, protocol=4))


def test_the_limit():
    data = pickle.dumps(list(range(100_000)), protocol=4)
    with pytest.raises(TooBig):
        load(data, limit=10_000)
    assert len(load(data, limit=len(data))) == 100_000


def test_a_hook_takes_the_items_of_a_list():
    taken = []

    def on_items(lst, items):
        taken.extend(items)
        return True

    got = load(pickle.dumps({"t": list(range(2500))}, protocol=4), on_items=on_items)
    assert got == {"t": []} and taken == list(range(2500))


def test_a_hook_error_is_its_own_not_the_pickles():
    def on_items(lst, items):
        raise KeyError("the caller's bug")

    with pytest.raises(KeyError):
        load(pickle.dumps([1, 2, 3], protocol=4), on_items=on_items)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_garbage_is_refused_or_damaged_never_anything_else(data):
    try:
        load(b"\x80\x04" + data)
    except (Refused, Malformed, TooBig):
        pass


@pytest.mark.parametrize("data,words", [
    (b"\x80\x04(K\x01.", "STOP with an unfinished structure"),
    (b"\x80\x04(" + b"2" * 10 + b".", "more on the stack"),
    (b"\x80\x04h\x05.", "refers to nothing"),
    (b"\x80\x04](K\x01K\x02u.", "not a dict"),
    (b"\x80\x04}]K\x01s.", "a snapshot never has (a list)"),
    (b"\x80\x04r\xff\xff\xff\x7f.", "far out of order"),
    (b"\x80\x04\x8c\x05ab", "ends"),
])
def test_damage_is_named(data, words):
    with pytest.raises(Malformed) as e:
        load(data)
    assert words in e.value.what


@pytest.mark.parametrize("dups", [1, 2, 7, 3000])
def test_a_run_of_dups_reads_as_pickle_reads_it(dups):
    """DUP (which pickle.dump never writes) is taken a run at once: the same object, as many times."""
    data = b"\x80\x04(N" + b"2" * dups + b"\x8c\x01x" + b"2" * dups + b"t."
    got = load(data)
    assert got == pickle.loads(data) and len(got) == 2 * (dups + 1)
    assert all(x is got[-1] for x in got[dups + 1:])


@pytest.mark.parametrize("memos", [2, 3, 5000])
def test_a_run_of_memoizes_reads_as_pickle_reads_it(memos):
    """MEMOIZE of the same object again (pickle.dump never writes it) is taken a run at once."""
    get = lambda i: b"j" + i.to_bytes(4, "little")   # LONG_BINGET
    data = b"\x80\x04(\x8c\x01x" + b"\x94" * memos + get(0) + get(memos - 1) + b"\x8c\x01y\x94" + get(memos) + b"t."
    assert load(data) == pickle.loads(data) == ("x", "x", "x", "y", "y")


def test_a_flood_of_dups_is_bounded(monkeypatch):
    monkeypatch.setattr("forensics.parsers.torch.snapshot_pickle._MAX_STACK", 1000)
    with pytest.raises(Malformed, match="more on the stack"):
        load(b"\x80\x04(N" + b"2" * 1000 + b"t.")
