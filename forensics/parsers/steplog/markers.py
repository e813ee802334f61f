"""Format "step-markers": memory readings that training scripts print between steps, in any free-text
log (`[step 12] allocated: 1234.5 MB, cached: 2048 MB` and the other shapes of generic.py), with the
step-marker lines that give them a step. Also the free-text scanner of all four step-log families: it
finds their readings in files that another parser claimed or nobody did. A file whose first lines hold
no such shape is still claimed when the general reader (general.py) finds a memory line form that
recurs in them; its sniff reason names the keys found.
"""
from __future__ import annotations

import polars as pl

from forensics.frames import rows_where
from forensics.model import Parsed, Skipped
from forensics.parsers import ranks
from forensics.parsers.steplog import families, general, generic, readings, small
from forensics.io.lines import read_whole
from forensics.parsers.steplog.reader import StepLogReader, extract_all
from forensics.parsers.contract import Format, Scan

NAME = "step-markers"

# Which lines are worth a look for any of the four step-log families (ingest's prefilter for `scan`).
SCAN_HINT = "|".join([generic.GENERIC_HINT, families.FAMILY_HINT])
# Cheaper supersets of SCAN_HINT's lines, for the scanner's passes over whole files
# (tests/parsers/test_steplog_prefilters.py holds them to it): a regex that is mostly literals...
SCAN_PREFILTER = "|".join([f"(?i:{generic.READING_WORDS}|{generic.STEP_WORDS})", generic.READING_LITERALS,
                           families.FAMILY_HINT_LITERALS])
# ... and before it a literal search of two letters that each (?i) word holds, in their four cases
# (allocated: ll, reserved: rv, cached: ch, occupied: cc, gpu: pu, iter/step: te, mem_: m_; no k or s,
# which (?i) also matches outside ASCII), where a case-insensitive alternation is no literal search
SCAN_QUICK = "|".join([
    *sorted({a + b for pair in ("ll", "rv", "ch", "cc", "pu", "te", "m_")
             for a in (pair[0], pair[0].upper()) for b in (pair[1], pair[1].upper())}),
    generic.READING_LITERALS, families.FAMILY_HINT_LITERALS])
# The lowercased text of every SCAN_HINT line holds one of these (the kernel fast path tests blocks so).
SCAN_BLOCK_LITERALS = (generic.READING_BLOCK_LITERALS + generic.STEP_BLOCK_LITERALS
                       + families.FAMILY_HINT_BLOCK_LITERALS)
# No SCAN_HINT line needs to be found by a leading `|` (a memory summary row is another parser's).
SCAN_PIPE_ROWS = False


def sniff(head: list[str]) -> str | None:
    if generic.looks_like_source_code(head):
        return None
    # a reading needs a line with a reading shape that is not another parser's (extract_generic reads
    # no other): one query says whether there is one (most files that get this far have none)
    t = pl.col("text")
    # (a few plain lines are tested with Python's `re`, which reads these patterns as polars does: small.py;
    # they are made a frame only for the general reader)
    few = small.rows(list(enumerate(head, 1)))
    if (any(small.ANY_READING.search(x) and not small.NOT_OURS.search(x) for _, x in few) if few is not None else
            generic.head_frame(head).select((t.str.contains(generic.ANY_READING)
                                             & ~t.str.contains(generic.NOT_OURS)).any()).item()):
        found = readings.head_readings(head)
        if found.height:
            first = int(found["line"].min())
            series = ", ".join(sorted(set(found["series"].to_list())))
            return f"memory readings ({series}) in a free-text log, first on line {first}"
    return _general_sniff(head, few)


def _general_sniff(head: list[str], few: list[tuple[int, str]] | None) -> str | None:
    """Memory lines whose form recurs in the first lines, read by their structure; the reason names
    the keys found (what `gpu-forensics sniff` shows a user, to check what was read). `few`: the lines
    if small.rows takes them."""
    t = pl.col("text")
    if few is not None:   # (which lines the general reader looks at, in Python: most heads hold fewer than two)
        lines = [x for _, x in few if (small.memory_word(x) or small.TABLE_ROW.search(x))
                 and not small.NOT_OURS.search(x) and not small.FAMILY_MEMORY_LINES.search(x)]
        if len(lines) < 2 and not any("\r" in x for x in lines):
            return None
    frame = rows_where(generic.head_frame(head), (general.candidates(t) | general.table_rows(t))
                       & ~t.str.contains(generic.NOT_OURS) & ~t.str.contains(families.FAMILY_MEMORY_LINES))
    # a form must recur to make a series (general.read): one line cannot, whatever it holds, unless it is a
    # progress bar (tqdm) whose refreshes, each after a `\r`, share it
    if frame.height < 2 and not frame.select(t.str.contains("\r", literal=True).any()).item():
        return None
    try:
        res = general.read(ranks.split_prefix(frame).select("line", "text"), "UTC", Skipped())
    except pl.exceptions.PolarsError:
        return None
    if not res.samples.height:
        return None
    first = int(res.samples["line"].min())
    return f"memory lines read by their keys ({'; '.join(res.forms)}), first on line {first}"


notes = generic.notes


def Reader(src, opts) -> StepLogReader:
    return StepLogReader(src, opts, notes)


def parse(src, opts) -> Parsed:
    return read_whole(Reader(src, opts), src)


def scan(lines: pl.DataFrame, src, opts) -> Parsed:
    if generic.looks_like_source_code(src.head()):
        return Parsed()
    # the general reader only reads files claimed as step logs: in another format's file a memory word
    # beside a number is that format's business (a kernel OOM line's `total-vm:…kB`)
    parsed = extract_all(lines, opts.tz_for(src.path), use_general=False)
    if parsed.records:
        parsed.notes.extend(notes(parsed))
    return parsed


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    scan=Scan(read=scan, hint=SCAN_HINT, prefilter=SCAN_PREFILTER,
              block_literals=SCAN_BLOCK_LITERALS, quick=SCAN_QUICK, pipe_rows=SCAN_PIPE_ROWS),
    files="step markers `[step N] allocated: X MB, cached: Y MB` and any other printed memory lines, read by "
          "their structure (clock prefix, `key=value` / `key: value` / dict / table column, a memory key with a "
          "size unit; docs/formats.md §4.4.1)",
    yields="allocated / reserved / used per step and phase, with step times",
    # it reads any printed memory line (DeepSpeed's, Megatron's, HF Trainer's, a memory_stats() dict's keys,
    # vLLM's recurring profile sentences, nvtop's gpu_mem_bytes_alloc): it claims what no other format does
    fallback=True,
)
