"""Which rank of a distributed job wrote a line (docs/formats.md §11.1): the prefixes that launchers and
PyTorch put in front of a rank's lines, and the rank words inside messages. Parsers read the rank
from here and keep it (forensics/ranks.py says how it reaches the samples); it is never just stripped.

Prefixes, at the start of a line, stacked in this order when both are there (`[default1]:[rank1]: `):

- `[default1]:` torchrun's `--tee`/`--redirects` copy of a worker's output, `[{role}{local_rank}]:`
  (role `default` for torchrun, `trainer` for the elastic agent's own default, `worker`): the rank
  on its node, not in the job;
- `[rank1]:` PyTorch's own, with the global rank: the excepthook that `init_process_group` installs
  (distributed_c10d.py, every traceback line) and c10d's C++ log lines (`[rank0]:[E1206 ...]`).

In front of those, Ray's prefix on every line an actor or task prints (`(WorkerDict pid=393228,
ip=172.16.0.197) `, `(pid=1234) `; vLLM's worker processes print the same `(VllmWorkerProcess pid=521) `),
which names the process, not the rank: its pid is the line's `line_pid`. After them, the `[Rank 0 | Local Rank 0] `
that verl's and other RL frameworks' loggers put before their clock. Ray's deduplication ends a line that several
workers printed alike with ` [repeated 3x across cluster]`: not part of what the line says, cut off too.

In messages: `[rank 1]`, `[Rank 1]` (Megatron, c10d's `[Rank N]` and `[PG ... Rank N]`), `rank 1`,
`rank=1`, `rank: 1`; `local_rank 1`. c10d's `[PG ID 4 PG GUID 45 Rank 1]` is the rank in process group 4,
not in the job: `pg_rank` reads it apart.
"""
from __future__ import annotations

import re

import polars as pl

_ROLES = "default|trainer|worker"
# Ray's `(ActorName pid=N, ip=A) ` (ray/_private/worker.py print_to_stdstream; the name may hold its repr's
# parentheses, `(MyActor(rank=0) pid=N)`), in a terminal's color (`\x1b[36m(pid=N)\x1b[0m`, or `[36m…[0m` once a
# paste lost the escape character)
_COLOR = r"(?:\x1b)?\[[0-9;]*m"
_RAY = (rf"(?:{_COLOR})?\((?:[A-Za-z_][^\s()]*(?:\([^()]*\))?[ ])?pid=[0-9]{{1,10}}(?:,[ ]ip=[0-9A-Fa-f.:]+)?\)"
        rf"(?:{_COLOR})?[ ]?")
# verl's (and other loggers') `[Rank 0 | Local Rank 0] ` before the clock
_BLOCK = r"\[[Rr]ank[ ]?([0-9]{1,6})[ \t]*\|[ \t]*[Ll]ocal[ _]?[Rr]ank[ ]?([0-9]{1,6})\]"
_RANK_BLOCK = _BLOCK.replace("([0-9]{1,6})", "[0-9]{1,6}") + "[ ]?"   # (the same, without its groups)
# the whole stack of prefixes at the start of a line (each part optional: no prefix matches the empty text)
LINE_PREFIX = rf"^(?:{_RAY})?(?:\[(?:{_ROLES}|rank)[0-9]{{1,6}}\]:[ ]?)*(?:{_RANK_BLOCK})?"
_GLOBAL_PREFIX = r"\[rank([0-9]{1,6})\]:"
_LOCAL_PREFIX = rf"\[(?:{_ROLES})([0-9]{{1,6}})\]:"
_RAY_PID = r"^[^(]*\((?:[^\s()]*(?:\([^()]*\))?[ ])?pid=([0-9]{1,10})"
# Ray's deduplication: the same line printed by several workers is shown once, with this at its end
REPEATED = r"[ ]?\[repeated [0-9]+x across cluster\][ \t]*$"
# what a line with a prefix of LINE_PREFIX, or REPEATED, holds (a literal search decides whether to look)
PREFIX_SIGNS = ["]:", "pid=", "| Local", "|Local", "across cluster]"]
# (as a regex of those literals, which polars' regex engine finds with a vectorized literal search: several
# times faster than contains_any's Aho-Corasick automaton, which steps through every byte)
PREFIX_SIGN = "|".join(re.escape(x) for x in PREFIX_SIGNS)
# a rank word in a message (not `local_rank`, `nranks`); group 1 or 2 is the rank
RANK_WORD = r"(?i:\[rank[ ]?([0-9]{1,6})\]|\brank[ \t]*[:=#]?[ \t]*([0-9]{1,6})\b)"
LOCAL_WORD = r"(?i:\blocal[_ ]rank[ \t]*[:=#]?[ \t]*([0-9]{1,6})\b)"
_PG = re.compile(r"\[PG (?:ID )?(?P<pg>[0-9]+)(?: PG GUID [0-9]+)?(?: ?\((?P<desc>[^)]*)\))? Rank (?P<rank>[0-9]{1,6})\]")
_RANK_WORD_RE = re.compile(RANK_WORD)
_LOCAL_WORD_RE = re.compile(LOCAL_WORD)
_GLOBAL_PREFIX_RE = re.compile(_GLOBAL_PREFIX)
_LOCAL_PREFIX_RE = re.compile(rf"^(?:{_RAY})?(?:\[(?:rank)[0-9]{{1,6}}\]:[ ]?)*" + _LOCAL_PREFIX)
_LINE_PREFIX_RE = re.compile(LINE_PREFIX)
_BLOCK_RE = re.compile(_BLOCK)


PREFIX_COLUMNS = ("line_rank", "line_local_rank", "line_pid")


def split_prefix(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (line, text) with `text` stripped of its prefixes (and of Ray's REPEATED) and three columns,
    `line_rank`, `line_local_rank` and `line_pid` (Int64, null where the line has no prefix that says)."""
    t = pl.col("text")
    if not frame.height or not frame.select(t.str.contains(PREFIX_SIGN).any()).item():
        return frame.with_columns(pl.lit(None, pl.Int64).alias(c) for c in PREFIX_COLUMNS)
    block = t.str.extract(f"({LINE_PREFIX})")
    ranked = block.str.extract_groups(_BLOCK)
    return frame.with_columns(
        pl.coalesce(block.str.extract(_GLOBAL_PREFIX), ranked.struct.field("1")).cast(pl.Int64, strict=False)
        .alias("line_rank"),
        pl.coalesce(block.str.extract(_LOCAL_PREFIX), ranked.struct.field("2")).cast(pl.Int64, strict=False)
        .alias("line_local_rank"),
        block.str.extract(_RAY_PID).cast(pl.Int64, strict=False).alias("line_pid"),
    ).with_columns(t.str.replace(LINE_PREFIX, "").str.replace(REPEATED, "").alias("text"))


def strip_prefix(text: pl.Expr) -> pl.Expr:
    return text.str.replace(LINE_PREFIX, "")


def words(text: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(rank, local rank) named by rank words in `text` (Int64, null where none)."""
    r = text.str.extract_groups(RANK_WORD)
    rank = pl.coalesce(r.struct.field("1"), r.struct.field("2")).cast(pl.Int64, strict=False)
    return rank, text.str.extract(LOCAL_WORD).cast(pl.Int64, strict=False)


def label(rank: pl.Expr, local: pl.Expr, tag: pl.Expr, keep_tag: pl.Expr) -> pl.Expr:
    """A reading's label: `rank N` (or `local rank N`) first, then its tag where `keep_tag` (a tag that
    only says the step is not kept: it changes with every reading), without the rank words the tag
    itself holds; the tag alone where no rank is known."""
    who = (pl.when(rank.is_not_null()).then(pl.lit("rank ") + rank.cast(pl.String))
           .when(local.is_not_null()).then(pl.lit("local rank ") + local.cast(pl.String)))
    rest = tag.str.replace_all(r"(?i)\[?\b(?:local[_ ])?rank[ \t]*[:=#]?[ \t]*[0-9]{1,6}\b\]?", "") \
        .str.strip_chars(" \t|:,;-=>[]()")
    return (pl.when(who.is_null()).then(tag)
            .when(keep_tag & (rest.str.len_chars() > 0)).then(who + pl.lit(" ") + rest)
            .otherwise(who))


def of_line(text: str) -> dict:
    """The rank facts of one line, for the line-by-line readers: `rank` (from a `[rankN]:` prefix, else
    a rank word outside a process-group prefix), `local_rank` (torchrun's prefix, else a `local_rank`
    word), `pg`/`pg_rank` (c10d's `[PG ... Rank N]` of a group other than the default one)."""
    out: dict = {}
    m = _GLOBAL_PREFIX_RE.search(text)
    if m:
        out["rank"] = int(m[1])
    m = _LOCAL_PREFIX_RE.match(text)
    if m:
        out["local_rank"] = int(m[1])
    prefix = _LINE_PREFIX_RE.match(text)
    body = text[prefix.end():]
    block = _BLOCK_RE.search(prefix[0])
    if block:
        out.setdefault("rank", int(block[1]))
        out.setdefault("local_rank", int(block[2]))
    pg = _PG.search(body)
    if pg and pg["pg"] != "0" and "default_pg" not in (pg["desc"] or ""):
        out["pg"], out["pg_rank"] = int(pg["pg"]), int(pg["rank"])
        body = body[: pg.start()] + body[pg.end():]
    if "rank" not in out:
        w = _RANK_WORD_RE.search(_LOCAL_WORD_RE.sub("", body))
        if w:
            out["rank"] = int(w[1] or w[2])
    if "local_rank" not in out:
        w = _LOCAL_WORD_RE.search(body)
        if w:
            out["local_rank"] = int(w[1])
    return out
