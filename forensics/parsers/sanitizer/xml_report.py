"""compute-sanitizer XML records: `compute-sanitizer --leak-check full --xml --save out.xml ./app`.

Shape (verified on a recording made with Compute Sanitizer 2025.3.1, CUDA 13, see the tests):

    <ComputeSanitizerOutput>
      <record>
        <kind>Leak</kind>                       Precise (memory access), Api (CUDA API error), Leak, ...
        <level>Error</level>                    (absent on Leak and Api records)
        <who><threadIdx><x/>..</threadIdx><blockIdx>..</blockIdx></who>
        <what><text>Leaked 4092 bytes</text><address>0x..</address><size>4092</size><type>generic</type>
              (Precise: space, size, direction, error, address; Api: api, error, message, result)</what>
        <where><func/><path/><line/><pc/></where>          (device code location, Precise only)
        <hostStack><saveLocation>allocation time</saveLocation>
          <frame><func/><path/><line/><pc/><module/></frame> ...   innermost first, Python frames last
        </hostStack>
      </record>
    </ComputeSanitizerOutput>

The XML carries no LEAK SUMMARY / ERROR SUMMARY lines (those go to the text output only), so totals
here are sums of the records. The input is untrusted: it is parsed with defusedxml with DTDs
forbidden, so entity-expansion ("billion laughs") and external-entity documents are refused.
"""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import defusedxml
import defusedxml.ElementTree as SafeET

from forensics.errors import InputError
from forensics.options import Options
from forensics.model import Parsed, events_frame
from forensics.io.sources import Source
from forensics.parsers.sanitizer.text import allocation_site, compact_stack, through_caching_allocator, user_frames
from forensics.parsers.contract import Format

NAME = "compute-sanitizer-xml"

_ROOT_TAG = "ComputeSanitizerOutput"
_SNIFF = re.compile(r"<\s*" + _ROOT_TAG + r"[\s>/]")
_RECORD_START = re.compile(r"<record[\s>/]")
_TEXT_START = re.compile(r"<text[\s>]")
_LEAKED = re.compile(r"Leaked ([0-9][0-9,]*) bytes")


def sniff(head: list[str]) -> str | None:
    for i, line in enumerate(head, 1):
        if _SNIFF.search(line):
            return f"<{_ROOT_TAG}> root element at line {i}"
    return None


def _text(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    value = el.findtext(path)
    if value is None:
        return None
    value = value.strip()
    return value or None


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.replace(",", ""), 16 if value.lower().startswith("0x") else 10)
    except ValueError:
        return None


def _frames(record: ET.Element) -> list[dict]:
    out = []
    for fr in record.findall("hostStack/frame"):
        out.append({
            "symbol": _text(fr, "func"),
            "module": _text(fr, "module"),
            "offset": _text(fr, "pc"),
            "file": _text(fr, "path"),
            "line": _int(_text(fr, "line")),
        })
    return out


def _axes(el: ET.Element | None) -> list[int | None] | None:
    if el is None:
        return None
    return [_int(_text(el, axis)) for axis in ("x", "y", "z")]


def _record_lines(text: str, n_records: int, root_line: int) -> list[int]:
    """Line of each record's <text> element (else of its <record> tag), found by position in the raw
    text: records are not nested and a literal '<record' cannot occur inside XML character data."""
    starts = [m.start() for m in _RECORD_START.finditer(text)]
    if len(starts) != n_records:
        return [root_line] * n_records
    lines = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        t = _TEXT_START.search(text, start, end)
        pos = t.start() if t else start
        lines.append(text.count("\n", 0, pos) + 1)
    return lines


def _size_line(full: str, after_line: int, size: int) -> int:
    """The first line at or after `after_line` whose <size> holds this number (else `after_line`)."""
    lines = full.split("\n")
    for i in range(after_line - 1, min(len(lines), after_line + 40)):
        m = re.search(r"<size>\s*([^<]*)<", lines[i])
        if m and _int(m.group(1).strip()) == size:
            return i + 1
    return after_line


def parse(src: Source, opts: Options) -> Parsed:
    frame = src.frame()
    full = "\n".join(frame["text"].to_list())
    # Tolerate text around the document (a log that also holds other output): read from the XML
    # declaration or root element to the end of the root element; line numbers keep the offset.
    root_at = _SNIFF.search(full)
    start = 0
    if root_at:
        # keep a declaration or DOCTYPE in front of the root: a DTD must reach the parser to be refused
        before = [i for i in (full.rfind("<?xml", 0, root_at.start()), full.find("<!DOCTYPE", 0, root_at.start()))
                  if i >= 0]
        start = min(before) if before else root_at.start()
    close = full.rfind("</" + _ROOT_TAG)
    gt = full.find(">", close) if close >= start else -1
    end = gt + 1 if gt >= 0 else len(full)
    text = full[start:end]
    line_offset = full.count("\n", 0, start)
    try:
        root = SafeET.fromstring(text, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except defusedxml.DefusedXmlException as e:
        raise InputError(src.path, "refused to read this XML",
                         f"it declares a DTD or entities ({type(e).__name__}), which compute-sanitizer never writes "
                         "and which can be used for entity-expansion or external-entity attacks",
                         "pass the file exactly as compute-sanitizer --xml --save wrote it")
    except ET.ParseError as e:
        line = e.position[0] + line_offset if getattr(e, "position", None) else None
        raise InputError(src.path, "not well-formed XML", f"the XML parser stopped ({e})",
                         "the file is probably truncated (the run was killed?); re-run compute-sanitizer "
                         "or pass its text output instead", line=line)
    if root.tag != _ROOT_TAG:
        raise InputError(src.path, "not a compute-sanitizer XML file",
                         f"its root element is <{root.tag}>, expected <{_ROOT_TAG}>",
                         "pass the file written by compute-sanitizer --xml --save")

    out = Parsed(clock="none")
    records = root.findall("record")
    root_match = _SNIFF.search(text)
    root_line = text.count("\n", 0, root_match.start()) + 1 if root_match else 1
    lines = [n + line_offset for n in _record_lines(text, len(records), root_line)]
    if full[:start].strip() or full[end:].strip():
        out.notes.append("text around the XML document was ignored")
    events = []
    leaks = leak_bytes = 0
    for rec, line in zip(records, lines):
        kind = _text(rec, "kind") or "unknown"
        what = rec.find("what")
        message = _text(what, "text")
        frames = _frames(rec)
        site, label = allocation_site(frames)
        detail: dict = {
            "record_kind": kind,
            "stack": compact_stack(frames),
            "stack_frames": len(frames),
            "save_location": _text(rec, "hostStack/saveLocation"),
            "site": site,
            "site_label": label,
            "user_frames": user_frames(frames),
            "source_format": "xml",
        }
        if kind.lower() == "leak":
            size = _int(_text(what, "size"))
            if size is None and message and (m := _LEAKED.search(message)):
                size = int(m.group(1).replace(",", ""))
            if size is None:
                out.skipped.add("leak record without a size", line)
            detail["address"] = _text(what, "address")
            detail["type"] = _text(what, "type")
            detail["allocator_cache_at_exit"] = through_caching_allocator(frames)
            if detail["allocator_cache_at_exit"]:
                detail["expected"] = ("allocated through PyTorch's caching allocator, which keeps its cache "
                                      "until the process exits; not a user leak by itself")
            leaks += 1
            leak_bytes += size or 0
            if size is not None and not (message and _LEAKED.search(message)):
                line = _size_line(full, line, size)  # cite the line that holds the number
            evidence = message or f"Leaked {size} bytes"
            if detail["address"] and " at " not in evidence:
                evidence += f" at {detail['address']}"
            events.append({"line": line, "kind": "sanitizer_leak", "bytes": size, "text": evidence,
                           "detail": json.dumps(detail)})
            continue
        category = {"precise": "memory_access", "api": "api_error"}.get(kind.lower(), kind.lower())
        detail.update({
            "category": category,
            "level": _text(rec, "level"),
            "message": message,
            "api": _text(what, "api"),
            "cuda_error": _text(what, "error"),
            "reason": _text(what, "message"),
            "code": _int(_text(what, "result")),
            "space": _text(what, "space"),
            "size": _int(_text(what, "size")),
            "address": _text(what, "address"),
        })
        where = rec.find("where")
        if where is not None:
            detail["at"] = {"func": _text(where, "func"), "path": _text(where, "path"),
                            "line": _int(_text(where, "line")), "pc": _text(where, "pc")}
        who = rec.find("who")
        if who is not None:
            detail["thread"] = _axes(who.find("threadIdx"))
            detail["block"] = _axes(who.find("blockIdx"))
        detail = {k: v for k, v in detail.items() if v is not None}
        events.append({"line": line, "kind": "sanitizer_error", "text": message or f"{kind} record",
                       "detail": json.dumps(detail)})
    out.events = events_frame(events)
    out.meta.update({
        "tool": "compute-sanitizer",
        "leaks_listed": leaks,
        "leaks_listed_bytes": leak_bytes,
        "leak_summary_bytes": None,
        "leak_summary_allocations": None,
        "consistent": None,
        "records": len(records),
    })
    if not records:
        out.notes.append("no records: the sanitizer reported no errors or leaks (leaks are reported only "
                         "with --leak-check full)")
    elif leaks:
        out.notes.append("XML output carries no LEAK SUMMARY line; the leak total is the sum of the records")
    return out


# the one name the parser list reads (parsers/contract.py)

# its samples are recordings (sample_logs/), none in tests/samples/
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    samples="sample_logs/sanitizer_cpp_xml",
    files="compute-sanitizer `--xml --save` output",
    yields="`sanitizer_leak` per allocation with its host stack and user-code call path",
)
