""".tar, .tar.gz and .zip archives read as folders (io/archives.py): the same results as the unpacked
folder, members compressed on their own read, and nothing trusted: names that leave the archive,
links, nested archives, too many members or bytes are refused with one line each, nothing written."""
from __future__ import annotations

import gzip
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from forensics import ingest, pipeline
from forensics.options import Options
from test_cli import write_incident

UTC = Options(tz="UTC", tz_from_user=True)


def _tar(path: Path, members: dict[str, bytes], mode: str = "w:gz", links: dict[str, str] | None = None) -> Path:
    with tarfile.open(path, mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1764471600
            tf.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tf.addfile(info)
    return path


def _kill(pid: int) -> bytes:
    return (f"2026-11-30T03:04:01.300000+00:00 gpuhost kernel: Out of memory: Killed process {pid} (python3) "
            "total-vm:53312244kB, anon-rss:31451456kB, file-rss:74816kB, shmem-rss:12296kB, UID:0 "
            "pgtables:69000kB oom_score_adj:0\n").encode()


def _summary(paths):
    bundle, analysis = pipeline.run([str(p) for p in paths], UTC)
    return bundle, analysis


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip"])
def test_an_archive_reads_as_its_folder(tmp_path, kind):
    job = write_incident(tmp_path / "job")
    log = job / "kern.log"
    (job / "kern.log.1.gz").write_bytes(gzip.compress(log.read_bytes()))   # compressed inside the archive
    log.unlink()
    arch = tmp_path / f"job.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(arch, "w", zipfile.ZIP_DEFLATED) as zf:
            for f in sorted(job.iterdir()):
                zf.write(f, f"job/{f.name}")
    else:
        with tarfile.open(arch, "w:gz" if kind == "tar.gz" else "w") as tf:
            tf.add(job, arcname="job")
    b1, a1 = _summary([job])
    b2, a2 = _summary([arch])
    assert a2.verdict == a1.verdict == "leak"
    assert [f.summary for f in a2.findings] == [f.summary for f in a1.findings]
    assert {i.path.split("/job/")[-1]: (i.format, i.records) for i in b2.inputs} == \
           {i.path.split("/job/")[-1]: (i.format, i.records) for i in b1.inputs}
    assert any(i.path == f"{arch}/job/kern.log.1.gz" and i.format == "kernel-log" for i in b2.inputs)


def test_names_that_leave_the_archive_and_links_are_not_read(tmp_path):
    arch = _tar(tmp_path / "evil.tar.gz", {"../outside.log": _kill(1), "/etc/abs.log": _kill(2), "ok/kern.log": _kill(3)},
                links={"ok/passwd.log": "/etc/passwd"})
    bundle = ingest.load([str(arch)], UTC)
    read = [i.path for i in bundle.inputs if i.format]
    assert read == [f"{arch}/ok/kern.log"]
    assert bundle.events["pid"].to_list() == [3]
    msgs = bundle.problems
    assert sum("leaves the archive" in m for m in msgs) == 2 and sum("never followed" in m for m in msgs) == 1
    assert all("\n" not in m for m in msgs)
    assert not (tmp_path.parent / "outside.log").exists() and sorted(os.listdir(tmp_path)) == ["evil.tar.gz"]


def test_member_and_byte_caps_say_the_option_that_raises_them(tmp_path):
    arch = _tar(tmp_path / "many.tar", {f"k{i}.log": _kill(i) for i in range(5)}, mode="w")
    opts = Options(tz="UTC", tz_from_user=True, archive_max_members=3)
    bundle = ingest.load([str(arch)], opts)
    assert len([i for i in bundle.inputs if i.format]) == 3
    assert [m for m in bundle.problems if "--archive-max-members" in m and "more than 3 members" in m]
    opts = Options(tz="UTC", tz_from_user=True, archive_max_bytes=2 * len(_kill(0)) + 1)
    bundle = ingest.load([str(arch)], opts)
    assert len([i for i in bundle.inputs if i.format]) == 2
    assert len([m for m in bundle.problems if "--archive-max-size" in m]) == 1


def test_a_zip_bomb_member_is_refused_by_its_declared_size(tmp_path):
    arch = tmp_path / "bomb.zip"
    with zipfile.ZipFile(arch, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("kern.log", _kill(7))
        zf.writestr("zeros.log", b"\0" * (8 << 20))
    opts = Options(tz="UTC", tz_from_user=True, archive_max_bytes=1 << 20)
    bundle = ingest.load([str(arch)], opts)
    assert bundle.events["pid"].to_list() == [7]
    assert [m for m in bundle.problems if "zeros.log" in m and "--archive-max-size" in m]


def test_nested_archives_and_damage_are_one_line_each(tmp_path):
    inner = _tar(tmp_path / "inner.tar.gz", {"kern.log": _kill(1)})
    outer = _tar(tmp_path / "outer.tar", {"inner.tar.gz": inner.read_bytes(), "kern.log": _kill(2)}, mode="w")
    inner.unlink()
    bundle = ingest.load([str(outer)], UTC)
    assert bundle.events["pid"].to_list() == [2]
    assert [m for m in bundle.problems if "archive inside an archive" in m]
    cut = tmp_path / "cut.tar.gz"
    whole = _tar(tmp_path / "whole.tar.gz", {"a/kern.log": _kill(3), "b/kern.log": _kill(4) * 20000}).read_bytes()
    cut.write_bytes(whole[: len(whole) - 200])
    bundle = ingest.load([str(cut)], UTC)
    assert 3 in bundle.events["pid"].to_list()
    assert [m for m in bundle.problems if m.startswith(str(cut)) and "not read to its end" in m]


@pytest.mark.parametrize("name", ["x.tar", "x.tar.gz", "x.zip"])
def test_garbage_and_cut_archives_are_one_line_never_a_traceback(tmp_path, name):
    import random

    rnd = random.Random(name)
    good = tmp_path / f"good-{name}"
    if name.endswith("zip"):
        with zipfile.ZipFile(good, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("kern.log", _kill(1) * 50)
    else:
        _tar(good, {"kern.log": _kill(1) * 50}, mode="w:gz" if name.endswith("gz") else "w")
    data = good.read_bytes()
    for i in range(12):
        bad = bytearray(data[: rnd.randrange(1, len(data))] if i % 2 else data)
        for _ in range(rnd.randrange(1, 8)):
            bad[rnd.randrange(len(bad))] = rnd.randrange(256)
        path = tmp_path / f"{i}-{name}"
        path.write_bytes(bytes(bad))
        bundle = ingest.load([str(path)], UTC)
        assert all("\n" not in m and "Traceback" not in m and "internal error" not in m for m in bundle.problems)


def test_a_zip_member_of_a_method_zipfile_lacks_is_one_line(tmp_path):
    arch = tmp_path / "m.zip"
    with zipfile.ZipFile(arch, "w") as zf:
        zf.writestr("a.log", _kill(1))
        zf.writestr("b.log", _kill(2))
    data = bytearray(arch.read_bytes())
    # the local header of the first member: compression method 9 (deflate64)
    data[8:10] = (9).to_bytes(2, "little")
    zf_central = data.rfind(b"PK\x01\x02", 0, data.rfind(b"PK\x01\x02"))
    data[zf_central + 10: zf_central + 12] = (9).to_bytes(2, "little")
    arch.write_bytes(bytes(data))
    bundle = ingest.load([str(arch)], UTC)
    assert bundle.events["pid"].to_list() == [2]
    assert [m for m in bundle.problems if m.startswith(f"{arch}/a.log: member not read")]
