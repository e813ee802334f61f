#!/usr/bin/env python3
"""Write the case tables of tests/corpus/README.md (between the `<!-- index:HALF -->` markers) from the
cases' truth.json files. Standard library only.

    python3 tools/corpus/index.py [--corpus tests/corpus]
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

LOGGER_FILES = ("nvidia-smi-wide.csv", "nvidia-smi-wide-l1.csv", "gpu-mem-5s.csv", "gpu-mem-1s.csv",
                "nvidia-smi-l1.csv", "nvidia-smi-250ms.csv", "compute-apps.csv", "dmon.txt")


def mib(b) -> str:
    return f"{b / 2**20:.0f} MiB" if b is not None else "?"


def row(t: dict) -> str:
    leak = ""
    if t["pattern"] == "step":
        leak = (f"{t['stairs']} stairs of {mib(t['stair_bytes'])} every {t['stair_period_steps']} steps "
                f"from step {t['leak_onset_step']}")
    elif t["pattern"] == "linear":
        leak = f"{mib(t['rate_bytes_per_step'])}/step from step {t['leak_onset_step']}"
    elif t.get("residual"):
        r = t["residual"]
        leak = f"worker {r['worker_pid']} keeps {mib(r['worker_bytes'])} {r['outlived_parent_seconds']} s after its parent"
    elif t.get("cache_growth"):
        c = t["cache_growth"]
        leak = (f"reserved {mib(c['reserved_first'])} -> {mib(c['reserved_last'])}, allocated flat"
                + (", empty_cache() at the end" if c["empty_cache_at_end"] else ""))
    elif t.get("host_memory"):
        h = t["host_memory"]
        leak = f"host +{mib(h['host_bytes_per_step'])}/step pinned, GPU flat"
    jobs = [j for j in t["jobs"]]
    endings = ", ".join(f"{j['pid']}:{j['ending']}" + (f"({j['ending_after_logs']})" if j.get("ending_after_logs") else "")
                        for j in jobs)
    kinds = "+".join(dict.fromkeys(j["kind"].split(" ")[0] for j in jobs if j["role"] != "worker"))
    files = set(t["files"])
    loggers = [f.split(".")[0] for f in LOGGER_FILES if f in files]
    own = sorted(f for f in files if f.endswith(".log") and "stderr" not in f)
    if any(f.startswith("lightning_logs/") for f in files):
        own.append("metrics.csv")
    if "dmesg.txt" in files:
        own.append("dmesg")
    verdict = t["expected_verdict"] + (f" ({', '.join(t['expected_findings'])})" if t["expected_findings"] else "")
    return (f"| `{t['case']}` | {kinds}: {leak or 'no growth kept'} | {', '.join(loggers)}; {', '.join(own)} | "
            f"{endings} | {verdict} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parents[2] / "tests" / "corpus")
    a = p.parse_args()
    readme = a.corpus / "README.md"
    text = readme.read_text()
    for half in ("tune", "heldout"):
        rows = ["| case | workload: what was kept | loggers; job's own logs | pid:ending (after the logs) | expected |",
                "| --- | --- | --- | --- | --- |"]
        for f in sorted((a.corpus / half).glob("*/truth.json")):
            rows.append(row(json.loads(f.read_text())))
        block = f"<!-- index:{half} -->\n" + "\n".join(rows) + f"\n<!-- /index:{half} -->"
        text = re.sub(rf"<!-- index:{half} -->.*?<!-- /index:{half} -->", lambda m: block, text, flags=re.S)
    readme.write_text(text)


if __name__ == "__main__":
    main()
