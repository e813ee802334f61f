"""One timeline from clocks that disagree.

`align(bundle, opts)` puts every row that can have a UTC `time` on one clock and says, per input, how
(`InputInfo.anchor`, a sentence) and what looked wrong (`InputInfo.notes`). Steps, in order:

1. Ranks of a distributed job: rows labelled with a rank take the pid and GPU that the logs give that
   rank (`forensics.ranks.assign`). GPU identifiers: UUIDs and PCI bus ids become indices where an
   nvidia-smi input maps them (`InputInfo.meta["gpu_map"]`), in every table.
2. Yearless syslog: a rotated set (kern.log.2.gz, kern.log.1, kern.log) is made to continue itself
   (an older file ends before the next one starts); without --year, a set whose mtime-given years
   overlap no input with an explicit year, while exactly one other year would, takes that year.
3. dmesg uptime stamps: each boot (uptime going backwards starts a new one) is anchored by --boot-time
   (the last boot of a source), by the source's own lines carrying clock and uptime, by lines of another
   source with the same text and the same uptime (kern.log), or by lines of a wall-clock twin with the
   same text (dmesg -T, dmesg --time-format iso). A boot without anchor keeps its uptime and no time.
4. Sources without a clock stay on their sample index unless a sound anchor places them: --start or
   --end with --interval, or the same memory curve in a timed source (offset and interval fitted,
   accepted only on a close, unique fit). Their events take the time of the nearest sample line.
5. Clock skew: an incident seen by two sources (an oom_kill of a pid vs the pid vanishing from an
   nvidia-smi process list, or vs the fall of its GPU's memory.used; a CUDA OOM stamped after the GPU
   memory already fell) measures how far their clocks disagree. It is
   reported (note + meta["skew_seconds"]) and never applied: one incident is thin evidence for moving
   every row of a file, and the usual cause, a zone, is fixed by the user with --tz FILE=ZONE.

Each step is a module of this package (gpus, years, uptime, untimed, skew); `write.write_aligned(bundle,
path)` writes the aligned tables, `merge` keeps one copy of each kernel event.
"""
from __future__ import annotations

from datetime import timezone

from forensics import ranks
from forensics.model import EVENTS_SCHEMA, SAMPLES_SCHEMA, Bundle, InputInfo, conform
from forensics.options import Options
from forensics.timeline import gpus, skew, stamps, untimed, uptime, years
from forensics.timeline.uptime import DMESG_T_CAVEAT


def align(bundle: Bundle, opts: Options) -> Bundle:
    """UTC `time` for every row that can have one; InputInfo.start/end/anchor/notes filled."""
    samples = conform(bundle.samples, SAMPLES_SCHEMA)
    events = conform(bundle.events, EVENTS_SCHEMA)
    infos = {i.path: i for i in bundle.inputs if i.error is None}
    for info in infos.values():
        info.anchor = None

    samples, events = ranks.assign(samples, events)
    samples, events = gpus.unify_gpus(samples, events, list(infos.values()))
    _base_anchors(samples, events, infos, opts)
    samples, events = years.continue_rotated_sets(samples, events, infos, opts)
    if opts.year is None:
        samples, events = years.agree_years_with_bundle(samples, events, infos, opts)
    samples, events = uptime.anchor_uptime(samples, events, infos, opts)
    samples, events = untimed.place_untimed(samples, events, infos, opts)
    skew.detect_skew(samples, events, infos)
    _fill_spans(samples, events, infos)
    return Bundle(inputs=bundle.inputs, samples=samples, events=events, problems=bundle.problems)


def _base_anchors(samples, events, infos: dict[str, InputInfo], opts: Options) -> None:
    timed = stamps.sources_with(samples, events)["time"]
    with_events = None   # the sources with events, asked once: a CSV's has none to look at for dmesg -T
    for path, info in infos.items():
        if path not in timed:
            continue
        if info.clock == "wall":
            info.anchor = "explicit offset in the timestamps"
        elif info.clock in ("wall-assumed", "wall-yearless"):
            zone, why = stamps.zone_reason(path, opts)
            local = f"local time read as {zone} ({why})"
            if info.clock == "wall-yearless":
                year_from = info.meta.get("year_from") or (
                    f"syslog year from --year {opts.year}" if opts.year else "syslog year from the file's mtime")
                info.anchor = f"{year_from}; {local}"
            else:
                info.anchor = local
            if with_events is None:
                with_events = set(events["source"].unique().to_list()) if events.height else set()
            if path in with_events and uptime.is_ctime_source(events, path):
                info.anchor += f"; {DMESG_T_CAVEAT}"
        else:
            info.anchor = "clock from the log's own timestamps"


def _fill_spans(samples, events, infos: dict[str, InputInfo]) -> None:
    spans = stamps.spans(samples, events)
    for path, info in infos.items():
        s = spans.get(path)
        info.start = s[0].astimezone(timezone.utc) if s else None
        info.end = s[1].astimezone(timezone.utc) if s else None
        if info.anchor is None and info.records:
            info.anchor = "no clock: analyzed in file order"
