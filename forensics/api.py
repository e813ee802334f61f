"""The Python API, for notebooks and scripts: `forensics.analyze(paths, **options)` returns a `Result`
(the verdict, the findings and the aligned readings as data) that the report writers take.

    import forensics
    result = forensics.analyze("job-1234/", tz="UTC")
    result.verdict, result.findings[0].summary, result.samples   # samples: a polars DataFrame
    result.write_html("report.html"); summary = result.to_json(); text = result.to_markdown()
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from os import PathLike
from pathlib import Path

import polars as pl

from forensics.detect.findings import Finding
from forensics.model import InputInfo
from forensics.options import Options

PathArg = str | PathLike


@dataclass
class Result:
    verdict: str                 # leak | no_leak | cache_growth | inconclusive
    verdict_reason: str
    findings: list[Finding]      # what the detectors found, each with its evidence lines
    samples: pl.DataFrame        # every reading on the common clock (one row per time, GPU, series)
    events: pl.DataFrame         # OOMs, Xids, step markers, ... on the same clock
    inputs: list[InputInfo]      # one per file: its format, lines read and skipped, problems
    problems: list[str]          # the one-line messages the command line prints on stderr
    _bundle: object = field(repr=False, default=None)
    _analysis: object = field(repr=False, default=None)
    _options: Options = field(repr=False, default_factory=Options)

    def summary(self) -> dict:
        """The JSON summary (the document `report --json` writes) as a dict."""
        from forensics import report

        return report.summary(self._bundle, self._analysis)

    def to_json(self) -> str:
        from forensics import report

        return report.summary_text(self.summary())

    def to_markdown(self) -> str:
        from forensics import report

        return report.render_markdown(report.build_context(self._bundle, self._analysis, self._options))

    def to_html(self) -> str:
        from forensics import report

        return report.render_html(report.build_context(self._bundle, self._analysis, self._options))

    def write_html(self, path: PathArg) -> Path:
        from forensics.report.write import target, write_text

        write_text(target(str(path), "write_html"), self.to_html())
        return Path(path)

    def reaches(self, level: str) -> bool:
        """True when the result reaches a --fail-on LEVEL (never, leak, oom, critical, warning, any)."""
        from forensics.report.verdict import reaches

        return reaches(level, self.verdict, [f.kind for f in self.findings], [f.severity for f in self.findings])


def _iso(value: str | datetime | None) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else value


def analyze(paths: PathArg | list[PathArg], *, tz: str | list[str] | None = None, year: int | None = None,
            boot_time: str | datetime | None = None, start: str | datetime | None = None,
            end: str | datetime | None = None, interval: float | None = None, columns: str | None = None,
            max_snapshot_size: str | None = None) -> Result:
    """Read, align and analyze the logs under `paths` (files or folders), with the options of
    `gpu-forensics report` (same names, same meaning; times as ISO strings or aware datetimes).
    Raises forensics.errors.UsageError for a bad option or when no input could be read."""
    from forensics import pipeline
    from forensics.cli import build_options, check_tz_patterns
    from forensics.errors import UsageError

    paths = [str(p) for p in (paths if isinstance(paths, list) else [paths])]
    tz = [tz] if isinstance(tz, str) else tz
    opts = build_options(tz, year, _iso(boot_time), _iso(start), _iso(end), interval, columns, max_snapshot_size)
    bundle, analysis = pipeline.run(paths, opts)
    if not any(i.format for i in bundle.inputs):
        raise UsageError(f"{', '.join(paths)}: nothing to analyze, no file was recognized; "
                         "`gpu-forensics sniff PATH` shows what each file was taken for")
    check_tz_patterns(opts, bundle)
    return Result(verdict=analysis.verdict, verdict_reason=analysis.verdict_reason or "",
                  findings=list(analysis.findings), samples=bundle.samples, events=bundle.events,
                  inputs=list(bundle.inputs), problems=list(bundle.problems),
                  _bundle=bundle, _analysis=analysis, _options=opts)
