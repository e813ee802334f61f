"""generic.extract_generic of many lines, read once per line shape: the same rows.

A step log repeats a few line shapes (`[step N] allocated: N MB`, behind a clock) millions of times.
Every regex of generic.py treats all digits alike (`[0-9]`, `\\d`, `\\w`, `\\b`; no digit is written
in one), so two lines that are the same once each digit is masked to 0 match each regex alike: the
same groups at the same places. Each shape is read once, in Python (small.py's regexes and its
piece_readings / piece_context, the Python path's own, on plain ASCII shapes), into a template: whether its lines are hints, readings or step markers, and each reading's
fields as constants (series, unit) or places in the line (number, step, label, rank, GPU). The
templates are then applied to all the lines at once, the values cut from the lines and converted as
extract_generic converts them (casts, units.bytes_expr), and extract_generic's own checks run on them.
A frame with too many shapes, or one shape this module does not model (KEY_PAIR's rewrite, a letter
outside ASCII), is read by extract_generic's queries instead.
"""
from __future__ import annotations

import polars as pl

from forensics.frames import masked_digits, owned
from forensics.parsers.steplog import generic as g
from forensics.parsers.steplog import small as s
from forensics.units import unit_factor

# A frame is read by shape when it has at most one shape in this many lines (a templates' Python
# reading costs about what the queries cost for that many lines).
LINES_PER_SHAPE = 16
# Fields whose value is a place in the line: (start, end) columns, null where the template has none.
_SPANS = ("num", "total", "gpu", "label", "step", "rank", "local", "ptotal", "marker")
_TEMPLATE = {"sid": pl.UInt32, "part": pl.Int64, "piece": pl.Int64, "k": pl.Int64, "series": pl.String,
             "unit": pl.String, "ptotal_unit": pl.String, "label_prefix": pl.String,
             "unit_factor": pl.Int64, "ptotal_unit_factor": pl.Int64,
             **{f"{f}_{e}": pl.Int64 for f in _SPANS if f != "marker" for e in ("s", "e")}}


def _pieces(shape: str) -> list[tuple[int, str]] | None:
    """generic._pieces of one line: (start in the line, text) of each piece; None where a piece is not
    a part of the line (KEY_PAIR rewrites the text)."""
    body, base = shape, 0
    for rx in (s.TS_ISO, s.TS_US):   # (both anchored: strip_line_time removes a prefix)
        m = rx.search(body)
        if m:
            body, base = body[m.end():], base + m.end()
    if "/" in body and s.KEY_PAIR.search(body):
        return None
    out = []
    for seg in body.replace("\r", "\n").split("\n"):
        at = 0
        for m in s.RANK_SPLIT.finditer(seg):   # `x [Rank 1]` -> `x`, `[Rank 1]`
            out.append((base + at, seg[at:m.end(1)]))
            at = m.start(2)
        out.append((base + at, seg[at:]))
        base += len(seg) + 1
    return out


def template(shape: str) -> tuple[bool, bool, tuple | None, list[dict]] | None:
    """One masked line's template: (hint, reading, step-marker place, reading rows); None where it
    must go to the queries."""
    if not s.PLAIN.fullmatch(shape):
        return None
    hint = bool(s.GENERIC_HINT.search(shape)) and not s.NOT_OURS.search(shape)
    if not hint:
        return False, False, None, []
    if not s.ANY_READING.search(shape):
        body_at = 0
        for rx in (s.TS_ISO, s.TS_US):
            m = rx.search(shape[body_at:])
            if m:
                body_at += m.end()
        return True, False, s.span(s.STEP_MARKER.search(shape[body_at:]), 1, body_at), []
    pieces = _pieces(shape)
    if pieces is None:
        return None
    rows = s.piece_readings(pieces)
    contexts = {j: s.piece_context(*pieces[j]) for j in {r["piece"] for r in rows}}
    for r in rows:
        ctx = contexts[r["piece"]]
        r["unit"] = s.first(r["unit"], ctx["header_unit"], r.pop("default_unit"))
        r["gpu"] = s.first(r["gpu"], ctx["tag_gpu"])
        r.update({k: v for k, v in ctx.items() if k not in ("header_unit", "tag_gpu")})
    return True, True, None, rows


def _templates(frame: pl.DataFrame) -> dict[str, tuple[int, tuple]] | None:
    """shape -> (its number, its template) of the frame's shapes; None where the queries must read it."""
    shapes = frame["shape"].unique()
    if shapes.len() * LINES_PER_SHAPE > frame.height or shapes.null_count():
        return None
    shapes = shapes.to_list()
    if sum(len(x) ** 2 for x in shapes) > s.SQUARED_CHARS:   # (Python's regexes on long shapes: small.py)
        return None
    templates = {}
    for sid, shape in enumerate(shapes):
        tp = template(shape)
        if tp is None:
            return None
        templates[shape] = (sid, tp)
    return templates


def extract(df: pl.DataFrame, zone: str, skipped, unitless: list[int] | None, carry: dict | None
            ) -> pl.DataFrame | None:
    """extract_generic(df, ...) (not for sniffing) read by shape; None where the queries must read it."""
    t = pl.col("text")
    frame = pl.DataFrame([df["line"], df["text"], masked_digits(df["text"]).alias("shape")])
    templates = _templates(frame)
    if templates is None:
        return None
    kind = {shape: sid for shape, (sid, tp) in templates.items() if tp[0]}   # the hints' shapes
    if not kind:
        return pl.DataFrame()
    hint = (frame.lazy().filter(pl.col("shape").is_in(list(kind)))
            .select("line", "text", pl.col("shape").replace_strict(kind, return_dtype=pl.UInt32).alias("sid"))
            .collect())
    if not hint["line"].is_sorted():
        hint = hint.sort("line")
    by_sid = {sid: tp for sid, tp in templates.values() if tp[0]}
    reading_sids = [sid for sid, tp in by_sid.items() if tp[1]]
    marks = {sid: tp[2] for sid, tp in by_sid.items() if tp[2] is not None}
    sid = pl.col("sid")

    def cut(starts: dict, ends: dict) -> pl.Expr:
        st = sid.replace_strict(starts, default=None, return_dtype=pl.Int64)
        en = sid.replace_strict(ends, default=None, return_dtype=pl.Int64)
        return t.str.slice(st, en - st)

    marker = (cut({k: v[0] for k, v in marks.items()}, {k: v[1] for k, v in marks.items()})
              .cast(pl.Int64, strict=False) if marks else pl.lit(None, dtype=pl.Int64))
    hint = hint.with_columns(marker.alias("marker_step"))
    if carry is not None:
        last = hint.filter(pl.col("marker_step").is_not_null()).tail(1)
        if last.height:
            carry["line"] = owned(last.select("line", "text"))
    if not reading_sids:
        return pl.DataFrame()
    if any(g.ISO_DATE_ANYWHERE.search(shape) or "/" in shape for shape in kind):
        hint = g.with_line_time(hint, zone)
    else:   # (with_line_time's answer for lines without a clock, known from their shapes)
        hint = hint.with_columns(pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("time"),
                                 pl.lit(None, dtype=pl.Boolean).alias("zoned"))
    hint = hint.with_columns(pl.col("marker_step").forward_fill())
    return _read(hint, templates, reading_sids, skipped, unitless)


def _read(hint: pl.DataFrame, templates: dict, reading_sids: list[int], skipped, unitless: list[int] | None
          ) -> pl.DataFrame:
    """The readings of the hint lines (line, text, sid, time, zoned, marker_step) by their templates."""
    t = pl.col("text")
    by_sid = {sid: tp for sid, tp in templates.values()}
    shape_of = {sid_: shape for shape, (sid_, _) in templates.items()}
    rows = [dict(sid=sid_, **{k: v for k, v in r.items() if k not in _SPANS},
                 **{f"{f}_{e}": (r[f][i] if r.get(f) else None) for f in _SPANS if f != "marker"
                    for i, e in enumerate("se")})
            for sid_ in reading_sids for r in by_sid[sid_][3]]
    if not rows:
        return pl.DataFrame()
    for r in rows:   # (units.factor_expr of each template's unit)
        for unit in ("unit", "ptotal_unit"):
            r[unit + "_factor"] = None if r[unit] is None else unit_factor(r[unit])
    tmpl = pl.DataFrame(rows, schema=_TEMPLATE).sort("sid", "part", "piece", "k")

    def field(f: str, dtype=pl.String) -> pl.Expr:
        if tmpl[f + "_s"].null_count() == tmpl.height:   # (no template has it: no slice to cut)
            return pl.lit(None, dtype=dtype)
        cut = t.str.slice(pl.col(f + "_s"), pl.col(f + "_e") - pl.col(f + "_s"))
        return cut if dtype == pl.String else cut.cast(dtype, strict=False)

    def size(f: str, factor: str) -> pl.Expr:
        """units.bytes_expr of the field: its number never holds a blank (generic.NUM), nor a
        thousands separator unless its shape shows one."""
        num = field(f)
        if any("," in shape_of[r["sid"]][r[f + "_s"]:r[f + "_e"]] for r in rows if r[f + "_s"] is not None):
            num = num.str.replace_all(",", "", literal=True)
        return (num.cast(pl.Float64, strict=False) * pl.col(factor)).round(0).cast(pl.Int64, strict=False)

    label = field("label")
    if tmpl["label_prefix"].null_count() < tmpl.height:
        label = pl.when(pl.col("label_s").is_not_null()).then(pl.col("label_prefix").fill_null("") + label)
    r = (hint.lazy().join(tmpl.lazy(), on="sid", how="inner", maintain_order="left_right")
         .with_columns(
             size("num", "unit_factor").alias("bytes"),
             size("total", "unit_factor").alias("total_bytes"),
             size("ptotal", "ptotal_unit_factor").alias("piece_total"),
             field("gpu").alias("gpu_arg"), pl.lit(None, dtype=pl.String).alias("tag_gpu"),
             label.alias("label"),
             field("step", pl.Int64).alias("tag_step"),
             field("rank", pl.Int64).alias("tag_rank"),
             field("local", pl.Int64).alias("tag_local_rank"),
         ))
    if tmpl["part"].n_unique() > 1:   # (extract_generic's order: each shape's readings after the other's)
        r = r.sort("part", "line", "piece", "k")
    return g.checked(r.collect(), skipped, False, unitless)
