"""The GPU memory metrics of the Prometheus exporters (docs/formats.md §9), shared by the readers of
what people export from Prometheus (prometheus.py: the HTTP API's JSON; grafana_csv.py: a Grafana
panel's CSV download): which metric names hold GPU memory and in what unit, what each series' labels
say about its host, GPU and the pod or process that holds the memory, and the readings as samples.

A reading is one (series, time, value) point. Used memory becomes `memory.used` for the GPU, or
`process.used` when the series names who holds it: a pod (dcgm-exporter adds `pod`, `namespace`,
`container` to the series of a GPU the kubelet gave to a pod, and with time-sharing a per-pod series
of the pod's own processes), a container (cAdvisor's accelerator metrics), a process
(nvidia_gpu_exporter's compute-app series, `pid` and `process_name`). The holder is the sample's
`label` ("pod <namespace>/<pod>/<container>", or the process name), as compute-apps rows carry a
process name. Free, total and reserved memory only give the GPU's capacity (`total_bytes`).
"""
from __future__ import annotations

import json
import re

import polars as pl

from forensics.model import IMPLAUSIBLE, MAX_PLAUSIBLE_BYTES, POD_LABEL, Skipped, samples_frame

MIB = 1 << 20

# metric name -> (role, bytes per unit). role: used | free | total | reserved | process (a process'
# own used memory). Sources: NVIDIA/dcgm-exporter etc/default-counters.csv ("Framebuffer memory used
# (in MiB)") and etc/1.x-compatibility-metrics.csv; utkuozdemir/nvidia_gpu_exporter docs/METRICS.md
# (bytes); mindprince/nvidia_gpu_prometheus_exporter main.go (bytes); the kubelet's cAdvisor
# accelerator metrics (bytes, removed in Kubernetes 1.20); Triton Inference Server's GPU metrics
# (docs/user_guide/metrics.md, bytes, by `gpu_uuid`).
METRICS: dict[str, tuple[str, int]] = {
    "DCGM_FI_DEV_FB_USED": ("used", MIB), "DCGM_FI_DEV_FB_FREE": ("free", MIB),
    "DCGM_FI_DEV_FB_TOTAL": ("total", MIB), "DCGM_FI_DEV_FB_RESERVED": ("reserved", MIB),
    "dcgm_fb_used": ("used", MIB), "dcgm_fb_free": ("free", MIB),
    "nvidia_smi_memory_used_bytes": ("used", 1), "nvidia_smi_memory_free_bytes": ("free", 1),
    "nvidia_smi_memory_total_bytes": ("total", 1), "nvidia_smi_memory_reserved_bytes": ("reserved", 1),
    "nvidia_smi_compute_app_used_memory_bytes": ("process", 1),
    "nvidia_gpu_memory_used_bytes": ("used", 1), "nvidia_gpu_memory_total_bytes": ("total", 1),
    "nv_gpu_memory_used_bytes": ("used", 1), "nv_gpu_memory_total_bytes": ("total", 1),
    "container_accelerator_memory_used_bytes": ("used", 1),
    "container_accelerator_memory_total_bytes": ("total", 1),
}
# nvidia_gpu_exporter labels its series by `uuid` only; this constant-1 series maps uuid to index
GPU_INFO = "nvidia_smi_gpu_info"
# One alternation of the names, for sniffing and for finding the name in a Grafana column header.
METRIC_NAME_RE = r"\b(?:" + "|".join(sorted(METRICS, key=len, reverse=True)) + r")\b"

# dcgm-exporter's `Hostname` (renamed `hostname` in 2026), then what a scrape config adds
_HOST = ("Hostname", "hostname", "kubernetes_node", "node", "nodename", "instance")
_INDEX = ("gpu", "minor_number", "index")
_UUID = ("UUID", "uuid", "gpu_uuid", "acc_id")
# Prometheus renames a target's own label that the series also has to exported_<name> (honor_labels
# false): then `pod` is the exporter's pod and exported_pod the workload's. dcgm-exporter's
# --use-old-namespace writes pod_name, pod_namespace, container_name.
_POD_SETS = (("exported_pod", "exported_namespace", "exported_container"), ("pod", "namespace", "container"),
             ("pod_name", "pod_namespace", "container_name"))
# a name starts at a word's start and is read whole (possessive): a long run of letters is scanned once,
# not from each of its letters (issue 45 D-R3)
_LABEL_PAIR = re.compile(r'(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*+)\s*+=\s*+"((?:[^"\\]|\\.)*+)"')
_BARE_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
NOT_A_NUMBER = "reading is not a number (NaN or Inf), not read"


def parse_selector(text: str) -> tuple[str | None, dict[str, str]]:
    """`DCGM_FI_DEV_FB_USED{Hostname="n1", gpu="0"}` (Prometheus' own form, also with `,` alone or
    `__name__` inside the braces) -> (metric name, labels). The name is None when no known one is there."""
    labels = {k: _unescape(v) for k, v in _LABEL_PAIR.findall(text)}
    name = labels.pop("__name__", None)
    if name not in METRICS and name != GPU_INFO:
        m = re.search(METRIC_NAME_RE + "|" + GPU_INFO, text)
        name = m.group(0) if m else None
    return name, labels


def _unescape(v: str) -> str:
    """A label value as Prometheus quotes it (Go's %q: backslash escapes)."""
    if "\\" not in v:
        return v
    try:
        return json.loads(f'"{v}"')
    except ValueError:
        return v


def _first(labels: dict[str, str], keys: tuple[str, ...]) -> str | None:
    return next((labels[k] for k in keys if labels.get(k)), None)


def _uuid(v: str | None) -> str | None:
    """nvidia_gpu_exporter writes the UUID without NVML's `GPU-` prefix; the timeline keys on it."""
    return f"GPU-{v}" if v and _BARE_UUID.match(v) else v


def _holder(labels: dict[str, str], exported: bool) -> str | None:
    """The pod (namespace/pod/container) or process that a series says holds the memory."""
    for pod_k, ns_k, c_k in _POD_SETS:
        if pod_k == "pod" and exported:
            continue   # the exporter's own pod: the workload's is in exported_pod
        pod = labels.get(pod_k)
        if not pod:
            continue
        container = labels.get(c_k) or ""
        if pod_k == "pod" and "exporter" in container:
            continue   # the scrape target's labels (the exporter pod), not a workload
        return POD_LABEL + "/".join(x for x in (labels.get(ns_k), pod, container) if x)
    return labels.get("process_name") or None


def describe(metric: str, labels: dict[str, str], exported: bool, index_of_uuid: dict[str, str]) -> dict:
    """What one series' labels say: host, gpu (its index where known, else its UUID; a MIG instance
    as <gpu>/<instance>), uuid, holder (pod or process), pid. `exported`: whether any series of
    the input carries exported_pod (then every `pod` label is the exporter's)."""
    uuid = _uuid(_first(labels, _UUID))
    index = _first(labels, _INDEX) or (index_of_uuid.get(uuid) if uuid else None)
    gpu = index if index is not None else uuid
    if gpu is not None and labels.get("GPU_I_ID"):
        gpu = f"{gpu}/{labels['GPU_I_ID']}"
    pid = labels.get("pid")
    host = _first(labels, _HOST)
    if host and not any(labels.get(k) for k in _HOST[:-1]):
        host = re.sub(r":[0-9]+$", "", host)   # `instance` is the scrape target's host:port
    return {"metric": metric, "host": host, "gpu": gpu, "uuid": uuid,
            "holder": _holder(labels, exported),
            "pid": int(pid) if pid and pid.isdigit() and len(pid) < 10 else None}


def gpu_index_map(infos: list[dict[str, str]]) -> dict[str, str]:
    """uuid -> index from nvidia_smi_gpu_info series' labels."""
    out = {}
    for labels in infos:
        uuid, index = _uuid(labels.get("uuid")), labels.get("index")
        if uuid and index:
            out[uuid] = index
    return out


def _capacity(pts: pl.DataFrame) -> pl.DataFrame | None:
    """key, total_bytes: a GPU's total, else its used + free (+ reserved) at the same time (the
    exporters read them in one scrape; every copy of a device value, one per pod label, is the same).
    None when no series gives more than used memory."""
    have = set(pts["role"].unique().to_list())
    if not have & {"free", "total"}:
        return None
    per = pts.filter(pl.col("role").is_in(["total", "free", "reserved", "used"])).group_by("key").agg(
        *[pl.col("bytes").filter(pl.col("role") == r).max().alias(r) for r in ("total", "free", "reserved", "used")])
    derived = pl.col("used") + pl.col("free") + pl.col("reserved").fill_null(0)
    return per.select("key", pl.coalesce(pl.col("total"), derived).alias("total_bytes"))


def to_samples(series: list[dict], points: pl.DataFrame, skipped: Skipped) -> tuple[pl.DataFrame, list[str], dict]:
    """(samples, notes, meta) from the series (describe() rows with their `sid`) and their points
    (`sid`, `time` Datetime UTC, `value` Float64 in the metric's unit, `line`). The points keep their
    order (series by series); a series' facts are looked up by `sid` (a month of readings is millions
    of points, a few dozen series)."""
    notes: list[str] = []
    meta: dict = {}
    if not series or points.height == 0:
        return samples_frame(None), notes, meta
    devs: dict[tuple, int] = {}
    for r in series:
        r["role"], r["scale"] = METRICS[r["metric"]]
        r["dev"] = devs.setdefault((r["host"], r["gpu"]), len(devs))
        r["series"] = "process.used" if r["role"] == "process" or r["holder"] else "memory.used"

    # a series' facts joined once by `sid` (a mapping per fact cost time per series: 50,000 series of
    # one point each are a Prometheus export of a big cluster)
    facts = pl.DataFrame({f"_{k}": [r[k] for r in series] for k in ("sid", "dev", "role", "scale", "host", "gpu",
                                                                       "pid", "series", "holder")},
                         schema={"_sid": pl.Int64, "_dev": pl.Int64, "_role": pl.String, "_scale": pl.Float64,
                                 "_host": pl.String, "_gpu": pl.String, "_pid": pl.Int64, "_series": pl.String,
                                 "_holder": pl.String})
    points = points.join(facts, left_on="sid", right_on="_sid", how="left", maintain_order="left")

    def by_sid(field: str, dtype) -> pl.Expr:
        return pl.col(f"_{field}").cast(dtype)

    # one Int64 per GPU and millisecond (2^43 ms reach past 2200, the latest time read): grouping and
    # joining on it is several times faster than on two columns
    key = (by_sid("dev", pl.Int64) * (1 << 43)) + pl.col("time").dt.epoch("ms")
    pts = points.with_columns(by_sid("role", pl.String).alias("role"), key.alias("key"))
    finite = pl.col("value").is_finite().fill_null(False)
    bad = pts.filter(~finite)
    if bad.height:
        skipped.add_lines(NOT_A_NUMBER, bad["line"].sort())
    pts = pts.filter(finite).with_columns(
        (pl.col("value") * by_sid("scale", pl.Float64)).round().cast(pl.Int64, strict=False).alias("bytes")).drop("value")
    plausible = pl.col("bytes").is_between(0, MAX_PLAUSIBLE_BYTES)   # (no memory size is below zero)
    skipped.add_lines(IMPLAUSIBLE, pts.filter(~plausible.fill_null(True))["line"].sort())
    pts = pts.filter(plausible.fill_null(True))
    cap = _capacity(pts)
    used = pts.filter(pl.col("role").is_in(["used", "process"]))
    used = (used.join(cap, on="key", how="left", maintain_order="left") if cap is not None
            else used.with_columns(pl.lit(None, dtype=pl.Int64).alias("total_bytes")))
    out = used.select(
        "time", pl.col("time").rank("dense").cast(pl.Int64).alias("seq"), "line", by_sid("host", pl.String).alias("host"),
        by_sid("gpu", pl.String).alias("gpu"), by_sid("pid", pl.Int64).alias("pid"),
        by_sid("series", pl.String).alias("series"), "bytes", "total_bytes", by_sid("holder", pl.String).alias("label"))
    roles = {r["role"] for r in series}
    notes.append(_read_note(series))
    if out.height and out["total_bytes"].null_count() == out.height:
        notes.append("no free or total memory series beside the used one: the GPUs' capacity is unknown")
    elif "total" not in roles and "free" in roles:
        notes.append("capacity = used + free" + (" + reserved" if "reserved" in roles else "")
                     + " memory (the GPUs' total is not among the series)")
    gm = {r["uuid"]: r["gpu"].split("/")[0] for r in series if r["uuid"] and r["gpu"] and r["gpu"] != r["uuid"]}
    if gm:
        meta["gpu_map"] = gm
    return samples_frame(out), notes, meta


def _read_note(series: list[dict]) -> str:
    names = ", ".join(sorted({r["metric"] for r in series}))
    holders = len({r["holder"] for r in series if r["holder"]})
    return f"{len(series)} series of {names}" + (f", naming {holders} holders (pods or processes)" if holders else "")


def other_metrics_note(names: list[str]) -> str | None:
    """What was in the input but is not GPU memory."""
    others = sorted({n for n in names if n and n not in METRICS and n != GPU_INFO})
    if not others:
        return None
    more = f" and {len(others) - 5} more" if len(others) > 5 else ""
    return f"series of other metrics were not read (not GPU memory): {', '.join(others[:5])}{more}"
