"""NVIDIA's Xid codes and what each means for a job's forensics: the one table that the kernel readers
(parsers/kernel/xid.py, for an event's meaning), detection and the report read. It knows no log format,
so detection reads it without importing any parser.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Xid:
    """One Xid code, as NVIDIA's Xid catalog describes it, and what it means for a job's forensics."""
    name: str       # NVIDIA's mnemonic
    meaning: str    # what happened (an event's `meaning`)
    weight: str     # what it says about the job and where to look (an event's `weight`)
    phrase: str     # the words of a finding's sentence
    severity: str   # the finding's severity: critical | warning | info
    fatal: bool     # the job on that GPU cannot go on: a candidate for what ended it


# The one Xid table (detection and the report read it). Classes follow the immediate action of NVIDIA's Xid
# catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html): a GPU reset, a reboot or the
# double-bit ECC workflow, and a contained memory error that ends the app, are fatal and critical; an app's
# own fault is a warning; what the catalog says to ignore is info.
XIDS: dict[int, Xid] = {
    13: Xid("ROBUST_CHANNEL_GR_EXCEPTION",
            "Graphics Engine Exception (user app fault, e.g. out-of-range address or illegal instruction)",
            "app bug; may accompany 43/45", "graphics engine exception (often an application fault)",
            "warning", False),
    31: Xid("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT",
            "GPU memory page fault (MMU fault, illegal address), usually app-level", "app bug / driver; not OOM",
            "GPU memory page fault (invalid memory access by the application)", "warning", False),
    43: Xid("ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
            "GPU stopped processing: a user app hit a SW-induced fault and was terminated; GPU healthy", "app crash",
            "GPU stopped processing (the application faulted)", "warning", False),
    45: Xid("ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
            "Preemptive cleanup due to previous errors: app aborted or killed (Ctrl-C, SIGKILL, reset)",
            "appears when a process dies (incl. host OOM kill)", "preemptive cleanup after earlier errors",
            "warning", False),
    48: Xid("ROBUST_CHANNEL_GPU_ECC_DBE", "Double-bit (uncorrectable) ECC error; needs GPU reset/reboot", "HW",
            "double-bit ECC error: uncorrectable memory error", "critical", True),
    62: Xid("PMU_HALT_ERROR", "Internal micro-controller halt", "HW/firmware; the GPU needs a reset",
            "internal micro-controller halt", "critical", True),
    63: Xid("INFOROM_DRAM_RETIREMENT_EVENT", "ECC page retirement / row remapping recorded (success)",
            "HW, benign-ish", "ECC page retirement or row remapping recorded", "info", False),
    64: Xid("INFOROM_DRAM_RETIREMENT_FAILURE", "ECC page retirement / row remapping recording failure",
            "HW, drain/RMA", "ECC page retirement or row remapping failed", "critical", True),
    69: Xid("ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error (an application's fault)",
            "app bug / driver", "graphics engine class error (often an application fault)", "warning", False),
    74: Xid("NVLINK_ERROR", "NVLink error (link or far end)", "HW/fabric", "NVLink error", "warning", False),
    79: Xid("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus",
            "HW/power/PCIe; all GPU memory state lost", "GPU has fallen off the bus", "critical", True),
    92: Xid("EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate (trend alarm)", "HW",
            "high single-bit ECC error rate", "info", False),
    94: Xid("ROBUST_CHANNEL_CONTAINED_ERROR", "Contained ECC error (A100+): only the affected app must restart",
            "HW", "contained ECC error", "critical", True),
    95: Xid("ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained ECC error: all apps on the GPU affected, reset needed",
            "HW", "uncontained ECC error", "critical", True),
    109: Xid("ROBUST_CHANNEL_CTXSW_TIMEOUT", "Context switch timeout: the driver ended the process on the GPU",
             "driver/FW or app; the catalog's action is a GPU reset", "context switch timeout", "critical", True),
    119: Xid("GSP_RPC_TIMEOUT", "GSP RPC timeout (GSP firmware unresponsive)", "driver/FW; often with 154",
             "GSP RPC timeout", "critical", True),
    120: Xid("GSP_ERROR", "GSP firmware error", "driver/FW; the GPU needs a reset", "GSP error", "critical", True),
    140: Xid("UNRECOVERABLE_ECC_ERROR_ESCAPE", "Unrecovered ECC error", "HW", "unrecovered ECC error",
             "critical", True),
    # it follows the Xid that needs the reset: that one, not this, ended the job
    154: Xid("GPU_RECOVERY_ACTION_CHANGED", "GPU recovery action changed (reset/reboot required)", "action hint",
             "GPU recovery action changed (reset or reboot needed)", "critical", False),
}
UNKNOWN_MEANING = "unknown Xid, see NVIDIA's Xid catalog"
UNKNOWN = Xid("", UNKNOWN_MEANING, "unknown", "see NVIDIA's Xid catalog", "warning", False)


def info(code: int | None) -> Xid:
    """The table's entry; no code is the "fallen off the bus" message printed without an Xid line."""
    if code is None:
        return XIDS[79]
    return XIDS.get(code, UNKNOWN)


def meaning(code: int | None) -> tuple[str, str]:
    x = info(code)
    return x.meaning, x.weight
