"""Prints whose meaning only their framework's source gives (docs/formats.md §4.4.1 cites each): the
general reader (general.py) reads a bare number by the factor its source documents, and a documented
print's key as the series its source says it is."""
from __future__ import annotations

import re
from dataclasses import dataclass

@dataclass(frozen=True)
class Documented:
    """A print whose meaning only its framework's source gives (docs/formats.md §4.4.1 cites each):
    the key as printed (lowercased), the text since the previous number (`before`, whole) and the text
    right after the value and its unit (`after`, a prefix; '' for any), the unit of a bare number
    (None: the value must carry its own), the series it is, and the unit exactly as the print writes
    it where that tells the print apart (None: any)."""
    before: re.Pattern
    after: re.Pattern
    factor: int | None
    series: str
    source: str
    unit: str | None = None


_ANY = re.compile(r"(?s).*")
_TF_INFO = ("TensorFlow's tf.config.experimental.get_memory_info() is {'current': N, 'peak': N}: its allocator's "
            "bytes in use and their peak (tensorflow/python/framework/config.py)")
_TRACEMALLOC = ("the PEFT/Accelerate examples' TorchTracemalloc prints b2mb (int(bytes / 2**20)) of "
                "torch.cuda.memory_allocated() as the epoch starts and of the epoch's max_memory_allocated()")
_TRACEMALLOC_DEVICES = ("gpu", "cuda", "xpu", "npu", "mlu", "hpu")   # accelerator.device.type.upper()
_TABLE_COLUMN = re.compile("")   # a table's column: its key comes from the header, nothing before the value
# key (lowercased) -> its documented prints, the first that fits is taken
DOCUMENTED: dict[str, tuple[Documented, ...]] = {
    "memory": (
        # torchtitan metrics.py: f"memory: {max_reserved_gib:5.2f}GiB({max_reserved_pct:.2f}%)"
        Documented(re.compile(r"[ \t]*memory:[ \t]+"), re.compile(r"\([0-9.]+%\)"), None, "max_reserved",
                   "torchtitan `memory: NGiB(N%)` is max_reserved (torchtitan/components/metrics.py)"),
        # mmengine/mmcv loggers: `  memory: {int(torch.cuda.max_memory_allocated() / 1024 / 1024)}`
        Documented(re.compile(r"[ \t,]*memory: "), _ANY, 1 << 20, "max_allocated",
                   "mmengine/mmcv `memory` is max_memory_allocated in MiB"),
        # the same dict as mmcv's JSON log (TextLoggerHook._dump_log): `"memory": 6912`
        Documented(re.compile(r", \"memory\": "), _ANY, 1 << 20, "max_allocated",
                   "mmengine/mmcv `memory` is max_memory_allocated in MiB"),
    ),
    # YOLOX core/trainer.py: f"mem: {gpu_mem_usage():.0f}Mb" and Swin Transformer main.py: f'mem {memory_used:.0f}MB'
    # (tab-separated), both torch.cuda.max_memory_allocated() / (1024 * 1024); told apart from other `mem`
    # prints by the unit as their format strings spell it
    "mem": (Documented(re.compile(r", mem: "), _ANY, None, "max_allocated",
                       "YOLOX `mem: NMb` is gpu_mem_usage(), torch.cuda.max_memory_allocated() in MB "
                       "(yolox/utils/metric.py)", "Mb"),
            Documented(re.compile(r"\)?\tmem "), _ANY, None, "max_allocated",
                       "Swin Transformer `mem NMB` is torch.cuda.max_memory_allocated() in MB (main.py)", "MB")),
    # detectron2 utils/events.py CommonMetricPrinter: "max_mem: {:.0f}M" of torch.cuda.max_memory_allocated() / 1024 / 1024
    "max_mem": (Documented(re.compile(r"[ \t]*max_mem: "), _ANY, 1 << 20, "max_allocated",
                           "detectron2 `max_mem: NM` is max_memory_allocated in MiB (detectron2/utils/events.py)"),),
    # mlx_lm tuner/trainer.py: f"Peak mem {peak_mem:.3f} GB" of mx.get_peak_memory(), the peak of mlx's allocator
    "peak mem": (Documented(re.compile(r"[ \t,]*Peak mem "), _ANY, None, "max_allocated",
                            "mlx_lm `Peak mem` is mx.get_peak_memory(), its allocator's peak"),),
    # axolotl's log_gpu_memory_usage: `GPU memory usage{msg}: {allocated:.03f}GB (+{cache}GB cache, +{misc}GB misc)`
    # with torch.cuda.memory_allocated() first
    "gpu memory usage": (Documented(_ANY, _ANY, None, "allocated",
                                    "axolotl `GPU memory usage` is torch.cuda.memory_allocated()"),),
    "cuda memory usage": (Documented(_ANY, _ANY, None, "allocated",
                                     "axolotl `cuda memory usage` is torch.cuda.memory_allocated()"),),
    # torchtune's metric loggers write `Step {step} | ` then `{name}:{value} ` per metric; the memory metrics are
    # training.get_memory_stats(): torch.cuda's peaks (`active_bytes.all.peak`, max_memory_allocated(),
    # max_memory_reserved()) / 1024**3, bare
    **{key: (Documented(re.compile(rf"[ \t|]*{key}:"), _ANY, 1 << 30, series,
                        f"torchtune `{key}` is {what} in GiB (torchtune/training/memory.py get_memory_stats)"),)
       for key, series, what in (("peak_memory_active", "max_active", "memory_stats()['active_bytes.all.peak']"),
                                 ("peak_memory_alloc", "max_allocated", "torch.cuda.max_memory_allocated()"),
                                 ("peak_memory_reserved", "max_reserved", "torch.cuda.max_memory_reserved()"))},
    # yolov5 train.py and ultralytics' trainer: the `GPU_mem` column of their progress table is
    # torch.cuda.memory_reserved() (in G); a `gpu_mem` key in a line of its own (no header above) is any
    # print's, and says no more than `mem` does
    "gpu_mem": (Documented(_TABLE_COLUMN, _ANY, None, "reserved",
                           "yolov5/ultralytics `GPU_mem` is torch.cuda.memory_reserved()"),),
    # rocm-smi --json --showmemuse (rocm_smi.py showMemUse, since ROCm/rocm_smi_lib PR #120): the card's VRAM in use
    # as a bare byte count in a JSON string, `"GPU memory use": "17453056"`
    "gpu memory use": (Documented(re.compile(r'[ \t]*"GPU memory use": "'), _ANY, 1, "memory.used",
                                  "rocm-smi --json `GPU memory use` is the card's VRAM in use in bytes (rocm_smi.py)"),),
    # Composer's MemoryMonitor (composer/callbacks/memory_monitor.py _get_memory_report, also in NeMo's
    # Megatron-Bridge): torch.cuda.memory_stats()' `allocated_bytes.all.current` and `reserved_bytes.all.current`
    # / 1.0e9, logged bare as `memory/allocated_mem` and `memory/reserved_mem` (the console logger prefixes
    # `Train ` or `Eval `)
    **{f"{prefix}memory/{name}_mem": (Documented(_ANY, _ANY, 10 ** 9, name,
                                                f"Composer `memory/{name}_mem` is memory_stats()' "
                                                f"{name}_bytes.all.current / 1e9 (composer/callbacks/memory_monitor.py)"),)
       for prefix in ("", "train ", "eval ") for name in ("allocated", "reserved")},
    # finetrainers' get_memory_statistics, logged as `Memory <phase>: ` and json.dumps(…, indent=4), one indented
    # key a line: torch.cuda.memory_allocated(), memory_reserved(), max_memory_allocated(), max_memory_reserved(),
    # each bytes_to_gigabytes (/ 1024**3) rounded to 3 digits (a float: a whole number of these keys is bytes)
    **{key: (Documented(re.compile(rf'[ \t]+"{key}": '), _ANY, 1 << 30, series,
                        f"finetrainers `{key}` is torch.cuda.{key}() in GiB (get_memory_statistics)"),)
       for key, series in (("memory_allocated", "allocated"), ("memory_reserved", "reserved"),
                           ("max_memory_allocated", "max_allocated"), ("max_memory_reserved", "max_reserved"))},
    # The PEFT examples' TorchTracemalloc (as in accelerate's examples/by_feature/peak_memory_usage.py), printed
    # after each epoch by accelerator.print(f"{device.type.upper()} Memory before entering the train :
    # {b2mb(tracemalloc.begin)}") and "... Total Peak Memory consumed during the train (max): {peaked +
    # b2mb(begin)}", b2mb(x) = int(x / 2**20): begin is torch.cuda.memory_allocated() as the epoch starts, the
    # peak max_memory_allocated() over it (reset at its start). Its `(end-begin)` and `(max-begin)` lines are
    # differences, no level, and stay unread.
    **{f"{dev} memory": (Documented(re.compile(rf"(?is).*\b{dev} memory before entering the [a-z_]+[ \t]*:[ \t]*"),
                                    _ANY, 1 << 20, "allocated", _TRACEMALLOC),)
       for dev in _TRACEMALLOC_DEVICES},
    "peak memory consumed (max)": (
        Documented(re.compile(rf"(?is).*\b(?:{'|'.join(_TRACEMALLOC_DEVICES)}) total peak memory consumed during the "
                              r"[a-z_]+ \(max\):[ \t]*"), _ANY, 1 << 20, "max_allocated", _TRACEMALLOC),),
    # TensorFlow's tf.config.experimental.get_memory_info(device) returns {'current': N, 'peak': N}, "the current and
    # peak memory usage" of its allocator in bytes (tensorflow/python/framework/config.py), printed as the dict
    # (with `'` or `"` quotes): `current` told apart from other keys of that name by `peak` right after it, and
    # `peak` by closing the dict right after `current`'s number
    "current": (Documented(re.compile(r"""(?s).*\{['"]current['"]: """), re.compile(r"""[ \t]*,[ \t]*['"]peak['"]: """),
                           1, "allocated", _TF_INFO),),
    "peak": (Documented(re.compile(r"""[ \t]*,[ \t]*['"]peak['"]: """), re.compile(r"[ \t]*\}"), 1, "max_allocated",
                        _TF_INFO),),
}

# torch.cuda's memory functions return bytes (their docstrings say so): a key named after one, with
# a whole number, is that function's value in bytes (NeMo/Megatron print `max_memory_reserved: 57466159104`)
TORCH_API = {"memory_allocated": "allocated", "max_memory_allocated": "max_allocated",
             "memory_reserved": "reserved", "max_memory_reserved": "max_reserved",
             "memory_cached": "reserved", "max_memory_cached": "max_reserved"}


def documented(key: str, seg: str, after: str, unit: str) -> Documented | None:
    """The documented print that `key` after `seg`, with `unit` as written ('' for none), followed by
    `after`, is, if any."""
    for d in DOCUMENTED.get(key.lower(), ()):
        if (d.before.fullmatch(seg) and d.after.match(after) and (unit or d.factor is not None)
                and d.unit in (None, unit)):
            return d
    return None
