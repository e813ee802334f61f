"""The torture corpus through the CLI, the way people run it on the worst day of a job's life:

    python -m forensics report <folder> --json - -o out.html

on one folder holding every kind of bad input next to good ones. The run must end with exit code 0
(something was analyzed), say in one line per bad input what is wrong, why and what to do, still
analyze the good inputs, and list each bad input in the JSON with its error or its skip reasons.

The static part of the corpus is tests/torture/ (small files); what cannot be a checked-in file (a
truncated archive, link loops, a FIFO, a permission error, a huge line) is made here. The run is
in-process (cli.main, which `python -m forensics` calls) so that a permission error can be simulated
for one file: as root, chmod 0 does not stop a read.
"""
from __future__ import annotations

import gzip
import json
import os
import pickle
import re
import shutil
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import zstandard

from forensics import cli
from forensics import ingest
from forensics.io import sources
from forensics.options import Options
from forensics.io.sources import MAX_LINE_CHARS, Source

from conftest import SAMPLE_LOGS

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "torture"
MiB = 1 << 20

# `path[:line]: what, why, what to do`: a path, an optional line number, then at least three parts
SHAPE = re.compile(r"^(?P<path>.+?)(?::(?P<line>\d+))?: (?P<what>[^,]+), (?P<rest>.+, .+)$")
GROUPED = re.compile(r"^\d+ files: [^,]+, .+, .+ \(.+\)$")

KILL = ("{t} gpuhost kernel: Out of memory: Killed process 4242 (python3) total-vm:53312244kB, "
        "anon-rss:31451456kB, file-rss:74816kB, shmem-rss:12296kB, UID:0 pgtables:69068kB oom_score_adj:0")


def _kern_lines(n: int, start: datetime) -> list[str]:
    return [f"{(start + timedelta(seconds=i)).strftime('%Y-%m-%dT%H:%M:%S.%f')}+00:00 gpuhost kernel: "
            f"usb 1-{i % 7}: device descriptor read/64, error -71" for i in range(n)]


def good_gpu_csv(path: Path) -> None:
    """GPU 7 leaks 64 MiB per sample from sample 60 on."""
    t0 = datetime(2026, 11, 30, 3, 0, 0)
    rows = ["timestamp, index, name, memory.total [MiB], memory.used [MiB]"]
    for i in range(240):
        t = (t0 + timedelta(seconds=i)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        rows.append(f"{t}, 7, NVIDIA H200, 143771 MiB, {20000 + (64 * (i - 60) if i >= 60 else 0) + (i * 7) % 5} MiB")
    path.write_text("\n".join(rows) + "\n")


def build_corpus(folder: Path) -> dict[str, str]:
    """The folder of inputs; returns {file name: what kind of bad it is} for the bad ones."""
    folder.mkdir(parents=True)
    for p in CORPUS.iterdir():
        if p.is_file():
            shutil.copy(p, folder / p.name)
    bad = {
        "empty.log": "empty", "core.bin": "binary", "header_change.csv": "header changes",
        "clock_back.csv": "clock back", "duplicates.csv": "duplicates", "gpus_come_and_go.csv": "gpus come and go",
        "smi_device_handle.csv": "driver error", "smi_failed.log": "driver error",
    }
    # good inputs: a leaking GPU and the OOM kill that ended the job
    good_gpu_csv(folder / "gpu.csv")
    t0 = datetime(2026, 11, 30, 3, 4, 0)
    (folder / "kern.log").write_text("\n".join(_kern_lines(5, t0) + [KILL.format(t="2026-11-30T03:04:06.000000+00:00")]) + "\n")
    # a rotated kern.log, gzip cut in half: the lines before the cut are read, the cut is said
    old = "\n".join(_kern_lines(20000, datetime(2026, 11, 29, 3, 0, 0))).encode()
    gz = gzip.compress(old)
    (folder / "kern.log.1.gz").write_bytes(gz[: len(gz) // 2])
    bad["kern.log.1.gz"] = "truncated gzip"
    zs = zstandard.ZstdCompressor().compress(old)
    (folder / "kern.log.2.zst").write_bytes(zs[: len(zs) // 2])
    bad["kern.log.2.zst"] = "truncated zstd"
    (folder / "kern.log.3.gz").write_bytes(gz[:10])  # nothing readable before the cut
    bad["kern.log.3.gz"] = "truncated to nothing"
    # links: one to itself, and a folder link back to its parent
    os.symlink("self.log", folder / "self.log")
    bad["self.log"] = "link loop"
    (folder / "sub").mkdir()
    os.symlink("..", folder / "sub" / "up")
    bad["up"] = "folder link loop"
    os.symlink("gone.log", folder / "dangling.log")
    bad["dangling.log"] = "broken link"
    os.mkfifo(folder / "pipe.log")
    bad["pipe.log"] = "fifo"
    (folder / "secret.log").write_text(KILL.format(t="2026-11-30T03:04:07.000000+00:00") + "\n")
    bad["secret.log"] = "permission denied"
    # a kern.log that a crash filled with NULs in the middle: the lines around them are read
    after = _kern_lines(3, t0 + timedelta(seconds=9)) + [KILL.format(t="2026-11-30T03:04:20.000000+00:00").replace("4242", "5151")]
    nul = ("\n".join(_kern_lines(3, t0)) + "\n").encode() + b"\x00" * 4096 + ("\n".join(after) + "\n").encode()
    (folder / "kern-crashed.log").write_bytes(nul)
    # nvidia-smi redirected by PowerShell: UTF-16 with a BOM and CRLF
    csv = (folder / "gpu.csv").read_text().splitlines()[:50]
    (folder / "gpu-utf16.csv").write_bytes("\r\n".join(c.replace(", 7,", ", 6,") for c in csv).encode("utf-16"))
    # a training log in Latin-1 with an over-long line (a progress bar without newlines) in it
    train = [f"2026-11-30 03:0{i // 60}:{i % 60:02d},000 INFO [step {i}] allocated: {1000 + i}.00 MB, température ok"
             for i in range(20)]
    train.insert(10, "\r".join(f"epoch 1: {k}%|#" for k in range(MAX_LINE_CHARS // 12)))
    (folder / "train.log").write_bytes("\n".join(train).encode("latin-1"))
    bad["train.log"] = "line too long"
    (folder / "README.txt").write_text("the nightly fine-tune, restarted twice\n")
    bad["README.txt"] = "not recognized"
    # pickles: a payload that would create a file if anything loaded it, a pickle that is no
    # snapshot, and a real snapshot whose gzip copy was cut short
    (folder / "payload.pkl").write_bytes(pickle.dumps(_Payload(folder.parent / "PWNED"), protocol=4))
    bad["payload.pkl"] = "pickle that names code"
    (folder / "state.pkl").write_bytes(pickle.dumps({"epoch": 3, "losses": [0.5, 0.25]}, protocol=4))
    bad["state.pkl"] = "pickle that is not a snapshot"
    snap = gzip.compress((SAMPLE_LOGS / "snapshot_leak" / "snapshot.pickle").read_bytes())
    (folder / "snapshot.pickle.gz").write_bytes(snap[: len(snap) // 2])
    bad["snapshot.pickle.gz"] = "truncated snapshot"
    return bad


class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def run_cli(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["gpu-forensics", *args])
    with pytest.raises(SystemExit) as e:
        cli.main()
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.fixture(scope="module")
def tortured(tmp_path_factory):
    """One CLI run over the whole corpus (module-scoped: it is the expensive part)."""
    tmp = tmp_path_factory.mktemp("torture")
    folder = tmp / "job"
    bad = build_corpus(folder)
    mp = pytest.MonkeyPatch()
    real_open = sources.open_stream

    def open_stream(path, compression, limit=None):
        if Path(path).name == "secret.log":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, compression, limit)

    mp.setattr(sources, "open_stream", open_stream)
    mp.setattr(sys, "argv", ["gpu-forensics", "report", str(folder), "--json", "-", "-o", str(tmp / "out.html"), "--tz", "UTC"])
    import io
    from contextlib import redirect_stderr, redirect_stdout

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        with pytest.raises(SystemExit) as e:
            cli.main()
    mp.undo()
    return {"code": e.value.code, "out": out.getvalue(), "err": err.getvalue(), "bad": bad, "folder": folder,
            "html": tmp / "out.html"}


def _summary(t) -> dict:
    return json.loads(t["out"])


def _inputs_named(t, name: str) -> list[dict]:
    return [i for i in _summary(t)["inputs"] if Path(i["path"]).name == name]


def test_exit_code_zero_and_no_traceback(tortured):
    assert tortured["code"] == 0, tortured["err"]
    assert "Traceback" not in tortured["err"] and "internal error" not in tortured["err"], tortured["err"]
    assert tortured["html"].read_text().rstrip().endswith("</html>")


def test_every_bad_input_has_a_one_line_message(tortured):
    lines = tortured["err"].splitlines()
    for name, kind in tortured["bad"].items():
        path = rf"{re.escape(str(tortured['folder']))}/(?:sub/)?{re.escape(name)}"
        mine = [ln for ln in lines if re.match(rf"^{path}(?::\d+)?: ", ln)]
        # files with the same problem share one counted line that names them
        shared = [ln for ln in lines if GROUPED.match(ln) and re.search(rf"[(, ]{path}(?::\d+)?[,)]", ln)]
        assert mine or shared, f"no message for {name} ({kind}) in:\n{tortured['err']}"
        for ln in mine:
            m = SHAPE.match(ln)
            assert m, f"{name}: not `path[:line]: what, why, what to do`: {ln}"


def test_messages_say_what_happened(tortured):
    err = tortured["err"]
    expect = {
        "kern.log.1.gz": "truncated", "kern.log.2.zst": "truncated", "kern.log.3.gz": "truncated",
        "self.log": "link loop", "up": "link loop", "dangling.log": "broken symbolic link",
        "pipe.log": "not a regular file", "secret.log": "permission denied", "core.bin": "binary file",
        "empty.log": "empty file", "README.txt": "not recognized", "train.log": "line too long",
        "clock_back.csv": "clock goes back", "gpus_come_and_go.csv": "GPU 1 has no readings",
        "smi_device_handle.csv": "GPU has fallen off the bus", "smi_failed.log": "NVIDIA-SMI has failed",
        "duplicates.csv": "duplicate", "payload.pkl": "not a PyTorch memory snapshot",
        "state.pkl": "not a PyTorch memory snapshot", "snapshot.pickle.gz": "cannot read the snapshot",
    }
    for name, words in expect.items():
        mine = [ln for ln in err.splitlines() if f"/{name}" in ln.split(": ", 1)[0]
                or (GROUPED.match(ln) and re.search(rf"/{re.escape(name)}[,):]", ln))]
        assert any(words in ln for ln in mine), f"{name}: no message with {words!r}: {mine}"


def test_the_good_inputs_are_analyzed(tortured):
    s = _summary(tortured)
    for name in ("gpu.csv", "kern.log", "gpu-utf16.csv", "kern-crashed.log", "train.log", "header_change.csv"):
        (row,) = _inputs_named(tortured, name)
        assert row["format"] and row["error"] is None and row["records"] > 0, row
    kills = [f for f in s["findings"] if f["kind"] == "oom_kill"]
    assert any(e["path"].endswith("/kern.log") for f in kills for e in f["evidence"]), s["findings"]
    # the salvaged halves of the rotated archives are read too
    for name in ("kern.log.1.gz", "kern.log.2.zst"):
        (row,) = _inputs_named(tortured, name)
        assert row["format"] == "kernel-log" and row["lines"] > 1000 and row["error"] is None, row


def test_json_lists_each_bad_input_with_error_or_skip_reasons(tortured):
    # data that is odd but fully used (a clock set back, GPUs that come and go) has its message, not a skip
    message_only = {"clock_back.csv", "gpus_come_and_go.csv"}
    for name, kind in tortured["bad"].items():
        if name in message_only:
            continue
        rows = _inputs_named(tortured, name)
        assert rows, f"{name} ({kind}) is missing from the JSON inputs"
        for row in rows:
            assert row["error"] or row["skip_reasons"], f"{name} ({kind}): neither error nor skip reasons: {row}"


def test_skip_reasons_are_counted(tortured):
    (train,) = _inputs_named(tortured, "train.log")
    assert train["skip_reasons"].get(sources.LINE_TOO_LONG) == 1
    (dup,) = _inputs_named(tortured, "duplicates.csv")
    assert dup["skip_reasons"].get(ingest.DUPLICATE) == 20 and dup["records"] == 20
    (cut,) = _inputs_named(tortured, "kern.log.1.gz")
    assert cut["skip_reasons"].get(sources.CUT_AT_END) == 1
    (header,) = _inputs_named(tortured, "header_change.csv")
    assert header["records"] == 40  # both layouts read by their own header
    for row in _summary(tortured)["inputs"]:
        assert row["skipped"] == sum(row["skip_reasons"].values()), row


def test_no_pickle_was_loaded(tortured):
    assert not (tortured["folder"].parent / "PWNED").exists()


def test_unreadable_inputs_are_errors(tortured):
    for name in ("core.bin", "self.log", "pipe.log", "secret.log", "kern.log.3.gz", "dangling.log", "payload.pkl",
                 "state.pkl", "snapshot.pickle.gz"):
        (row,) = _inputs_named(tortured, name)
        assert row["error"] and row["format"] is None, row


def test_crashed_and_mis_encoded_logs_keep_their_lines(tmp_path):
    p = tmp_path / "kern.log"
    p.write_bytes(b"a line\n" + b"\x00" * 5000 + b"May 15 23:09:30 host kernel: after the crash\n")
    src = Source.open(p)
    assert src.frame()["text"].to_list() == ["a line", "May 15 23:09:30 host kernel: after the crash"]
    assert src.nul_bytes == 5000
    p.write_bytes("ä,ö\r\nline two\r\n".encode("utf-16"))
    src = Source.open(p)
    assert src.frame()["text"].to_list() == ["ä,ö", "line two"] and src.encoding == "utf-16-le"
    p.write_bytes(b"\xef\xbb\xbftimestamp, index\n")
    assert Source.open(p).head() == ["timestamp, index"]


def test_a_100_mb_line_costs_seconds_not_minutes(tmp_path):
    """One line of 100 MB (a binary blob, a progress bar without newlines) between good lines: it is
    dropped and counted, the lines around it are read, quickly and without holding it in memory."""
    p = tmp_path / "train.log"
    good = [f"[step {i}] allocated: {1000 + i}.00 MB, reserved: {2000 + i}.00 MB" for i in range(10)]
    with open(p, "wb") as fh:
        fh.write(("\n".join(good[:5]) + "\n").encode())
        block = b"[step 99] allocated: 5.00 MB " * (1 << 15)
        for _ in range((100 << 20) // len(block)):
            fh.write(block)
        fh.write(("\n" + "\n".join(good[5:]) + "\n").encode())
    started = time.perf_counter()
    src = Source.open(p)
    info, results = ingest.parse_one(src, Options(tz="UTC"))
    seconds = time.perf_counter() - started
    assert info.skip_reasons.get(sources.LINE_TOO_LONG) == 1 and info.skip_examples[sources.LINE_TOO_LONG] == [6]
    assert info.lines == 11
    lines = sorted({ln for r in results for ln in r.samples["line"].to_list()})
    assert lines == [1, 2, 3, 4, 5, 7, 8, 9, 10, 11], lines  # nothing from the huge line
    assert seconds < 20, f"{seconds:.1f} s for a 100 MB line"


def test_cli_without_any_readable_input_says_so(tmp_path, monkeypatch, capsys):
    (tmp_path / "core.bin").write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    code, _, err = run_cli(["report", str(tmp_path), "-o", str(tmp_path / "r.html")], monkeypatch, capsys)
    assert code == 2 and "binary file" in err and "nothing to analyze" in err and "Traceback" not in err


def test_output_to_a_missing_folder_is_a_message(tmp_path, monkeypatch, capsys):
    good_gpu_csv(tmp_path / "gpu.csv")
    code, _, err = run_cli(["report", str(tmp_path / "gpu.csv"), "-o", str(tmp_path / "no" / "such" / "r.html"),
                            "--tz", "UTC"], monkeypatch, capsys)
    assert code == 2 and "cannot write the output" in err and "Traceback" not in err
