"""Reading inputs: compression, encodings, binary files, link loops, permissions, rotation order."""
from __future__ import annotations

import bz2
import gzip
import lzma
import os

import pytest
import zstandard

from forensics.errors import InputError
from forensics.io.sources import Source, discover, rotation_key

TEXT = "line one\r\nline two\n\nline four\n"


@pytest.mark.parametrize("suffix,compress", [
    ("", lambda b: b), (".gz", gzip.compress), (".xz", lzma.compress), (".bz2", bz2.compress),
    (".zst", lambda b: zstandard.ZstdCompressor().compress(b)),
])
def test_compressed_streams_read_as_lines(tmp_path, suffix, compress):
    p = tmp_path / f"kern.log{suffix}"
    p.write_bytes(compress(TEXT.encode()))
    src = Source.open(p)
    df = src.frame()
    assert df["text"].to_list() == ["line one", "line two", "", "line four"]
    assert df["line"].to_list() == [1, 2, 3, 4]
    assert src.compression == (suffix.lstrip(".").replace("gz", "gzip").replace("zst", "zstd") or None)


def test_truncated_gzip_is_a_clear_error(tmp_path):
    data = gzip.compress(("x" * 80 + "\n").encode() * 5000)
    p = tmp_path / "kern.log.2.gz"
    p.write_bytes(data[: len(data) // 2])
    src = Source.open(p)
    src.head()  # sniffing still works on what can be read
    # the lines before the cut are kept (never lose them); the cut is a one-line problem
    df = src.frame()
    assert 0 < df.height < 5000 and set(df["text"].to_list()) == {"x" * 80}
    msg = src.problems[0]
    assert msg.startswith(f"{p}:{df.height + 1}: ") and "truncated" in msg
    p.write_bytes(data[:12])  # nothing readable at all: an error
    with pytest.raises(InputError) as e:
        Source.open(p).frame()
    assert str(e.value).startswith(str(p)) and "truncated" in str(e.value)


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    p = tmp_path / "a.log"
    p.write_bytes(b"ok\n\xff\xfe bad\nok\n")
    src = Source.open(p)
    assert src.frame().height == 3
    assert src.decode_errors == 2


def test_binary_file_is_refused_with_reason(tmp_path):
    p = tmp_path / "core"
    p.write_bytes(b"\x7fELF" + b"\x00" * 2000)
    with pytest.raises(InputError) as e:
        Source.open(p).head()
    assert "binary file" in str(e.value)


def test_empty_file_has_no_lines(tmp_path):
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    src = Source.open(p)
    assert src.head() == [""] or src.head() == []
    assert src.frame().height == 0


def test_link_loop_and_unreadable_are_problems_not_crashes(tmp_path):
    d = tmp_path / "job"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "a.log").write_text("x\n")
    os.symlink(d, d / "sub" / "loop")
    found = discover([str(d)])
    assert [p.name for p, _ in found.files] == ["a.log"]
    assert any("link loop" in str(e) for e in found.problems)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
def test_permission_denied(tmp_path):
    p = tmp_path / "secret.log"
    p.write_text("x\n")
    p.chmod(0)
    with pytest.raises(InputError) as e:
        Source.open(p).head()
    assert "permission denied" in str(e.value)


def test_missing_path_is_a_problem(tmp_path):
    found = discover([str(tmp_path / "nope")])
    assert not found.files and "no such file" in str(found.problems[0])


def test_rotation_order():
    names = ["kern.log", "kern.log.1", "kern.log.2.gz", "kern.log.4.gz", "kern.log.3.gz",
             "messages", "messages-20160523", "messages-20160516.xz"]
    assert sorted(names, key=rotation_key) == [
        "kern.log.4.gz", "kern.log.3.gz", "kern.log.2.gz", "kern.log.1", "kern.log",
        "messages-20160516.xz", "messages-20160523", "messages",
    ]
