"""A memory line's counters, for the general reader (general.py): its step, its epoch and the epoch's length
(which of the line's numbers they are, found once per line shape), and the step counted on across epochs
once the whole file is read."""
from __future__ import annotations

import re

import polars as pl

NUM = r"[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"

_COUNTER = re.compile(
    # (`"global_step/max_steps": "100/1230"`: a key naming the counter and its end, a quoted value; fairseq's
    # `num_updates=N`, the optimizer updates of the whole run, a global counter like `global_step`)
    r"(?i)\b(global[ _]step|num[ _]updates|step|iteration|iter|it|epoch|batch)s?\b(/[A-Za-z_]+)?['\"]?[ \t]*[:=#]?[ \t]*['\"]?\[?[ \t]*"
    rf"({NUM})(?:[ \t]*/[ \t]*({NUM}))?")
# mmcv/mmengine's `Epoch [1][2400/7517]`, `Epoch(train)   [1][ 100/2566]`: the epoch, then the
# iteration within it out of the epoch's length
_BRACKET_COUNTER = re.compile(rf"(?i)\bepoch(?:\([a-z]+\))?[ \t]*\[[ \t]*({NUM})(?:[ \t]*/[ \t]*{NUM})?[ \t]*\]"
                              rf"[ \t]*\[[ \t]*({NUM})[ \t]*/[ \t]*({NUM})[ \t]*\]")
# a progress bar's (tqdm's `{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<...`) iterations done out of its total:
# the counter of a bar refreshed every step, within its epoch when the bar names one (`Epoch 3: 40%|...`)
_BAR_COUNTER = re.compile(rf"\|[ \t]*({NUM})[ \t]*/[ \t]*({NUM})[ \t]*\[")
# a line that starts with `n/N` (Keras' progress bar, `12/50 ━━━━ 4s 100ms/step - loss: …`): batches done of the
# epoch's N
_LEAD_COUNTER = re.compile(r"[ \t]*([0-9]+)/([0-9]+)(?=[ \t])")
# the metrics of a Keras Progbar update after its `n/N`, bar and times: ` - name: value` pairs, each value as
# Progbar formats it (`{avg:.4f}`, `{avg:.4e}`, a stateful metric's own value)
_BAR_METRICS = re.compile(rf"(?:[ \t]+-[ \t]+[A-Za-z_][\w.\-/]*:[ \t]+-?(?:{NUM}|nan|inf))+")


def bar_end(body: str, start: int) -> int:
    """Where a line's own text ends: a Keras progress bar's update (a leading `n/N`, then ` - name: value`
    pairs) ends at its last pair. Progbar writes its newline (or `\\r`) before each update and none after
    (keras/src/utils/progbar.py `update`: `message += "\\n"` first, `print_msg(message, line_break=False)`), so
    the script's next print runs on at the end of the bar's line (`… gpu_reserved_mb: 2898.0000saved best-model
    snapshot at step 20`): that text is another print's, not the bar's (its `step 20` is no counter of the bar's
    readings)."""
    lead = _LEAD_COUNTER.match(body, start)
    if lead is None:
        return len(body)
    pairs = _BAR_METRICS.search(body, lead.end())
    return pairs.end() if pairs else len(body)


def read_counters(plan, body: str, start: int, nums: list, at: dict[int, int], used: set[int],
                  header: list[str] | None) -> None:
    """The line's step, epoch and the epoch's length (indexes of its numbers, into `plan`; those numbers
    into `used`): mmengine's bracket counter, `step`/`iter`/`epoch` words, else a progress bar's `n/total`,
    else (outside a table) the line's leading `n/N`."""
    b = _BRACKET_COUNTER.search(body, start)
    if b:
        plan.epoch_idx, plan.step_idx = at.get(b.start(1)), at.get(b.start(2))
        plan.steps_per_epoch_idx = at.get(b.start(3))
        used.update(i for i in (plan.epoch_idx, plan.step_idx, plan.steps_per_epoch_idx) if i is not None)
    for c in _COUNTER.finditer(body, start):
        word = c[1].lower()
        i = at.get(c.start(3))
        if i is None:
            continue
        used.add(i)
        j = at.get(c.start(4)) if c[4] else None
        if j is not None:
            used.add(j)
        if b and b.start() <= c.start() < b.end():
            continue
        if word == "epoch":
            # HF Trainer's `'epoch': 1.5` (also `1.0`) is the share of the data seen, not a counter
            if "." not in nums[i][0]:
                plan.epoch_idx = i
        elif word != "batch" and (plan.step_idx is None or word.startswith(("global", "num"))):
            # a global counter's `/N` is the run's last step, not the epoch's length
            plan.step_idx, plan.steps_per_epoch_idx = i, None if word.startswith(("global", "num")) or c[2] else j
    # (a table row's bar, ultralytics' `Epoch` row's, counts the batches of the epoch in its `Epoch` column)
    bar = _BAR_COUNTER.search(body, start) if plan.step_idx is None else None
    if bar is None and plan.step_idx is None and header is None:
        bar = _LEAD_COUNTER.match(body, start)
        bar = bar if bar and int(bar[1]) <= int(bar[2]) else None
    if bar and at.get(bar.start(1)) is not None:
        plan.step_idx, plan.steps_per_epoch_idx = at[bar.start(1)], at.get(bar.start(2))
        used.update(i for i in (plan.step_idx, plan.steps_per_epoch_idx) if i is not None)


def epoch_steps(r: pl.DataFrame, heads: pl.DataFrame | None, form_of: list[int]) -> pl.DataFrame:
    """A step counter that restarts every epoch (`Epoch [e/E], Step [s/S]`, a bar's `n/N`) counts on across
    epochs: (e-1)*N + n, or e*N + n where the form's epochs count from 0 (Lightning's `Epoch 0:`, yolov5's
    `0/99`). A line without an epoch of its own takes its block head's (Keras prints `Epoch e/E` above its
    bar's lines). `form_of`: each plan's form (a bar's lines of one form are of several plans: its fill
    characters differ)."""
    e, n, per = pl.col("epoch"), pl.col("inner"), pl.col("per_epoch")
    heads = heads.filter(pl.col("block_epoch").is_not_null()) if heads is not None else None
    if heads is not None and heads.height and r.select((e.is_null() & per.is_not_null()).any()).item():
        r = r.sort("line").join_asof(heads.select("line", pl.col("block_epoch").alias("head")).sort("line"), on="line",
                                     strategy="backward", check_sortedness=False)
        r = r.with_columns(pl.coalesce(e, pl.when(per.is_not_null()).then(pl.col("head"))).alias("epoch")).drop("head")
    form = pl.col("pid").replace_strict(dict(enumerate(form_of)), return_dtype=pl.Int64)
    base = pl.when(e.min().over(form) == 0).then(0).otherwise(1)
    counted = e.is_not_null() & per.is_not_null() & n.is_not_null()
    return r.with_columns(pl.when(counted).then((e - base) * per + n).otherwise(pl.col("step")).alias("step"))


# a bare whole number opening a line, before a blank (tinygrad's `    1 93.44 s run, 11.8750 loss, …, 642.43 GB used`)
_LEAD_NUMBER = re.compile(r"[ \t]*([0-9]+)(?=[ \t])")


def lead_number(plan, body: str, start: int, at: dict[int, int]) -> int | None:
    """The index of the bare whole number that opens the line (after its clock), where the line has no counter
    and that number is no reading: a step counter only if its form's lines count with it (lead_steps)."""
    m = _LEAD_NUMBER.match(body, start) if plan.step_idx is None else None
    i = at.get(m.start(1)) if m else None
    if i is None or i in (plan.epoch_idx, plan.gpu_idx) or any(i in (r.idx, r.total_idx) for r in plan.readings):
        return None
    return i


def lead_steps(r: pl.DataFrame, form_of: list[int]) -> pl.DataFrame:
    """A bare number opening every line of a form is the form's step counter where it rises by one from each of
    the form's lines to the next, all through the file (decided from all of them, never from one line): a loop
    that prints its iteration first. A count, an index or a size that opens a line does not count so (a GPU's
    index starts over, a count stays or jumps)."""
    form = pl.col("pid").replace_strict(dict(enumerate(form_of)), return_dtype=pl.Int64).alias("form")
    lines = r.select(form, "line", "piece", "lead").unique(["line", "piece"]).sort("line", "piece")
    counting = (lines.group_by("form").agg((pl.col("lead").is_not_null().all() & (pl.len() > 1)
                                            & (pl.col("lead").diff().drop_nulls() == 1).all()).alias("counts"))
                .filter("counts")["form"])
    if not counting.len():
        return r
    own = form.is_in(counting.implode()) & pl.col("step").is_null()
    return r.with_columns(pl.when(own).then(pl.col("lead")).otherwise(pl.col("step")).alias("step"))
