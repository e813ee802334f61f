"""The corpus cases: two halves, `tune` and `heldout`, with the same kinds of variety (endings,
loggers, workload shapes) in different parameters and combinations.

A case names its loggers (record.LOGGERS keys), a scenario (what the recorder does: fork jobs, wait for
steps, kill, stop the loggers) and what is true about it (verdict, findings, pattern, story). Every
number in truth.json is computed afterwards from the side file by truth.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Case:
    name: str
    half: str
    loggers: list[str]
    scenario: Callable
    verdict: str
    findings: list[str]
    pattern: str | None
    story: str
    estimate: float
    timeout: float = 90.0
    kernel: bool = False
    stair_every: int | None = None
    extra: dict = field(default_factory=dict)

    def meta(self) -> dict:
        return {"case": self.name, "half": self.half, "loggers": self.loggers, "expected_verdict": self.verdict,
                "expected_findings": self.findings, "pattern": self.pattern, "story": self.story,
                "stair_period_steps": self.stair_every, "kernel": self.kernel, **self.extra}


# ---- scenarios ---------------------------------------------------------------------------------

def simple(kind: str, args: str, leaks: bool, **kw) -> Callable:
    def run(ctx):
        j = ctx.job(kind, args, leaks=leaks, **kw)
        ctx.wait_exit(j)
    return run


def kill_at(kind: str, args: str, leaks: bool, step: int) -> Callable:
    def run(ctx):
        j = ctx.job(kind, args, leaks=leaks)
        if ctx.wait_step(j, step):
            ctx.kill(j.pid, "the job (kill -9 from outside)")
        ctx.wait_exit(j)
    return run


def stop_loggers_at(kind: str, args: str, leaks: bool, step: int) -> Callable:
    def run(ctx):
        j = ctx.job(kind, args, leaks=leaks)
        if ctx.wait_step(j, step):
            ctx.stop_loggers("logger_stopped")
        ctx.wait_exit(j)
    return run


def crash_loop(kind: str, args: str, runs: int, gap: float) -> Callable:
    def run(ctx):
        for i in range(runs):
            j = ctx.job(kind, args, leaks=True, append=True, role=f"run{i + 1}")
            ctx.wait_exit(j)
            if i < runs - 1:
                ctx.supervisor_line("train.log", f"pid {j.pid} exited with status {j.status}; restarting in "
                                                 f"{gap:.0f} s (attempt {i + 2}/{runs})")
                ctx.sleep(gap)
        ctx.supervisor_line("train.log", f"pid {j.pid} exited with status {j.status}; giving up after {runs} attempts")
    return run


def two_procs(flat_args: str, leak_kind: str, leak_args: str, b_after_step: int) -> Callable:
    def run(ctx):
        a = ctx.job("flat", flat_args, role="flat", out="a.log", err="a.stderr.log")
        ctx.wait_step(a, b_after_step)
        b = ctx.job(leak_kind, leak_args, role="leaky", leaks=True, out="b.log", err="b.stderr.log")
        ctx.wait_exit(b)
        ctx.wait_exit(a)
    return run


def sequential(first: tuple, gap: float, second: tuple) -> Callable:
    def run(ctx):
        (k1, a1, l1, o1), (k2, a2, l2, o2) = first, second
        j1 = ctx.job(k1, a1, role="first", leaks=l1, out=o1, err=o1.replace(".log", ".stderr.log"))
        ctx.wait_exit(j1)
        ctx.sleep(gap)
        j2 = ctx.job(k2, a2, role="second", leaks=l2, out=o2, err=o2.replace(".log", ".stderr.log"))
        ctx.wait_exit(j2)
    return run


def residual(args: str, kill_step: int, hold: float) -> Callable:
    def run(ctx):
        j = ctx.job("residual", args, role="trainer")
        ready = ctx.wait_event("worker_ready")
        ctx.wait_step(j, kill_step)
        ctx.kill(j.pid, "the trainer (kill -9 from outside)")
        ctx.wait_exit(j)
        if not ready:
            ctx.note("the worker never reported ready")
            return
        wpid = ready["pid"]
        ctx.extra_pids.add(wpid)
        ctx.ev("rec_residual", worker_pid=wpid)
        ctx.sleep(hold)
        ctx.kill(wpid, "the residual worker")
        for _ in range(50):                     # until it is reaped (we are its subreaper), at most 5 s
            if wpid not in ctx.extra_pids:
                break
            ctx.sleep(0.1)
    return run


def _pinned_host_in_cgroup(ctx, args: str, limit: str, fallback_step: int, **job) -> None:
    """The pinned-host-memory job in a memory cgroup of `limit`, until the kernel's OOM killer ends it (or the
    recorder does, at `fallback_step`)."""
    import record
    cg = record.cgroup(limit, ctx)
    try:
        j = ctx.job("pinned_host", args, env={"GFC_CGROUP": cg.how or ""}, cgroup_procs=cg.procs, **job)
        if ctx.wait_step(j, fallback_step):
            ctx.note(f"no kernel OOM kill by step {fallback_step}: the recorder killed the job instead")
            ctx.kill(j.pid, "the job (no kernel OOM kill came)")
        ctx.wait_exit(j)
        ctx.ev("rec_cgroup_events", events=" ".join(cg.read_events().split()))
    finally:
        cg.remove()


def host_oom(args: str, limit: str, fallback_step: int) -> Callable:
    def run(ctx):
        _pinned_host_in_cgroup(ctx, args, limit, fallback_step)
    return run


def host_kill_then(host_args: str, limit: str, fallback_step: int, gap: float, kind: str, args: str) -> Callable:
    """A job killed by the kernel's OOM killer (host memory, in a memory cgroup), then, on the same host, a second
    job that leaks GPU memory: the first kill is in the same dmesg but is not what ended the second job."""
    def run(ctx):
        _pinned_host_in_cgroup(ctx, host_args, limit, fallback_step, role="host", out="job1.log",
                               err="job1.stderr.log")
        ctx.sleep(gap)
        j2 = ctx.job(kind, args, role="leaky", leaks=True, out="job2.log", err="job2.stderr.log")
        ctx.wait_exit(j2)
    return run


# ---- the tune half ----------------------------------------------------------------------------

T = "tune"
H = "heldout"

TUNE = [
    Case("linear_late_exit", T, ["wide500", "classic", "apps", "dmon"],
         simple("linear_late", "--steps 80 --period 0.18 --warm-gib 4 --flat 45 --leak-mib 96 --style spine", True),
         "leak", ["leak"], "linear",
         "A trainer takes a 4 GiB working set at start-up, trains flat for 45 steps (about 11 s after the job's start), then a debug hook keeps every "
         "step's hidden activations on the GPU (`debug_acts.append(h.detach())`, 96 MiB a step). The run ends "
         "normally and the memory goes back to the driver when the process exits.", 30),
    Case("slow_leak_noisy_exit", T, ["script5", "script1", "dmon"],
         simple("slow_noisy", "--steps 95 --period 0.15 --warm-gib 6 --noise-mib 640 --leak-mib 8 --onset 11 "
                "--style pipe_gb", True),
         "leak", ["leak"], "linear",
         "A 6 GiB footprint under noisy load (each step holds a random 0-640 MiB of activations when it logs), "
         "with a slow leak from step 11: a per-step statistics tensor of 8 MiB appended to a history list on "
         "the GPU. Step times vary (+-40 %). Ends normally.", 29),
    Case("staircase_snapshots_exit", T, ["ms250", "apps", "classic"],
         simple("staircase", "--steps 125 --period 0.11 --warm-gib 2 --stair-mib 512 --stair-every 20 "
                "--style megatron --every 5", True),
         "leak", ["leak"], "step",
         "Every 20 steps a 'best model' snapshot of 512 MiB is appended to a list that is never pruned: flat "
         "between stairs, +512 MiB at each. Megatron-style iteration and memory lines every 5 steps "
         "(printed by the workload in Megatron's format, not by Megatron). Ends normally.", 28, stair_every=20),
    Case("infer_cache_leak_sigkill", T, ["wide500", "apps", "dmon"],
         kill_at("infer", "--leak --steps 400 --period 0.2 --warm-gib 3 --max-batch 32 --out-mib 4 --onset 12 "
                 "--style bytes_k --every 4", True, step=70),
         "leak", ["leak"], "linear",
         "An inference server with irregular request batches (0-32 requests, bursts and lulls) caches every "
         "response on the GPU by request id from batch 12 on and never evicts (4 MiB a request). It is killed "
         "with SIGKILL from outside after batch 70 (no traceback, no last log line).", 25),
    Case("infer_irregular_healthy_exit", T, ["script5", "script1", "classic"],
         simple("infer", "--steps 85 --period 0.16 --warm-gib 3 --max-batch 48 --out-mib 4 --style plain", False),
         "no_leak", [], None,
         "The same inference server without the cache: irregular batches (0-48 requests), outputs dropped after "
         "each batch. Reserved memory follows the largest batch so far; nothing is kept. The step log is plain "
         "`print` lines without timestamps. Ends normally.", 28),
    Case("warmup_plateau_exit", T, ["wide500", "dmon", "apps"],
         simple("warmup_plateau", "--steps 90 --period 0.15 --ramp 30 --peak-gib 20 --style pipe_gb", False),
         "no_leak", [], None,
         "Sequence-length curriculum: the activations a step holds grow linearly to 20 GiB over the first 30 "
         "steps, then stay at the maximum length for 60 steps. Reserved (nvidia-smi) and allocated rise in the "
         "first third, then plateau. Ends normally.", 28),
    Case("eval_spikes_emptycache_exit", T, ["ms250", "dmon", "apps"],
         simple("eval_spikes", "--steps 100 --period 0.14 --warm-gib 3 --eval-every 25 --eval-len 5 --spike-gib 6 "
                "--empty-cache --style spine", False),
         "no_leak", [], None,
         "Training with a 3 GiB footprint; every 25 steps an evaluation holds 6 GiB for 5 steps, frees it and "
         "calls torch.cuda.empty_cache(): four spikes that return to the baseline. Ends normally.", 28),
    Case("gradaccum_sawtooth_loggers_stopped", T, ["wide500", "script1"],
         stop_loggers_at("grad_accum", "--steps 96 --period 0.15 --accum 8 --micro-mib 384 --empty-cache "
                         "--style deepspeed --every 2", False, step=60),
         "no_leak", [], None,
         "Gradient accumulation by summing 8 micro-batch losses before one backward: each micro-batch's graph "
         "(~384 MiB of saved activations) lives until the optimizer step, then everything is freed and "
         "torch.cuda.empty_cache() is called: a sawtooth. DeepSpeed-style `see_memory_usage` lines (the "
         "workload's own logging in DeepSpeed's format). The nvidia-smi loggers were stopped after step 60 "
         "while the job went on to its normal end: the nvidia-smi logs end mid-job.", 25),
    Case("cache_growth_exit", T, ["wide500", "classic", "dmon"],
         simple("cache_growth", "--steps 85 --period 0.16 --grow-mib 6 --style spine", False),
         "cache_growth", ["cache_growth"], None,
         "Batches sorted by length: each step's temporary is 6 MiB larger than the last and freed at once; the "
         "caching allocator reserves a new segment every step and keeps the old ones cached. `cached` and "
         "nvidia-smi grow to the end, `allocated` stays flat. Ends normally (no empty_cache).", 28),
    Case("crashloop_oom_x3", T, ["wide500", "apps", "dmon", "script1"],
         crash_loop("leak_oom", "--steps 400 --period 0.15 --fraction 0.06 --warm-gib 1 --leak-mib 256 --onset 6 "
                    "--style spine", runs=3, gap=2.0),
         "leak", ["leak", "gpu_oom"], "linear",
         "A crash loop: the same leaky job (validation predictions kept on the GPU from step 6, 256 MiB a step, "
         "under a memory cap of 6 % of the GPU) dies of a CUDA OOM, is restarted by a supervisor 2 s later, and "
         "dies again, three times. All runs append to the same train.log and stderr.log; the supervisor's lines "
         "are in train.log.", 36, timeout=110),
    Case("two_procs_one_leaks_exit", T, ["apps", "wide500", "dmon"],
         two_procs("--steps 110 --period 0.15 --warm-gib 5 --style spine",
                   "linear_late", "--steps 90 --period 0.15 --warm-gib 1 --flat 10 --leak-mib 64 --style pipe_gb",
                   b_after_step=8),
         "leak", ["leak"], "linear",
         "Two processes on one GPU: a flat trainer (5 GiB, a.log) and, started a little later, a second job that "
         "keeps 64 MiB of activations a step from its step 11 (b.log). compute-apps.csv shows both pids. Both "
         "end normally.", 30),
    Case("hf_trainer_callback_leak_exit", T, ["wide500", "apps", "dmon"],
         simple("hf_trainer", "--leak --steps 110 --period 0.1 --onset 25 --every 10 --style none", True),
         "leak", ["leak"], "linear",
         "A transformers Trainer run (a 2-layer GPT-2 built from GPT2Config with random weights, random tokens, "
         "no download) with a callback that keeps a copy of the 64 MiB token-embedding matrix every step from "
         "step 25 on, 'for an embedding-drift plot'. The Trainer's own log dicts carry memory numbers (added "
         "by a callback); its progress bar is in stderr.log. Ends normally.", 40, timeout=120),
    Case("lightning_outputs_leak_oom", T, ["script5", "script1", "classic", "apps"],
         simple("lightning_leak", "--leak --steps 400 --period 0.12 --onset 20 --fraction 0.07 --every 5 "
                "--style none --lightning-pkg pytorch_lightning", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "A pytorch_lightning run of a small language model: the LightningModule appends every training step's "
         "logits, graph attached, to `self.training_step_outputs` from step 20 on and never clears it. Under a "
         "memory cap of 7 % of the GPU it dies of a CUDA OOM. Logged by Lightning's CSVLogger "
         "(lightning_logs/version_0/metrics.csv) and its stdout.", 40, timeout=120),
    Case("residual_worker_sigkill", T, ["apps", "wide500", "dmon"],
         residual("--steps 400 --period 0.2 --warm-gib 2 --worker-gib 6 --style spine", kill_step=40, hold=10.0),
         "leak", ["residual_process"], None,
         "A trainer (2 GiB) forks an eval worker with torch.multiprocessing; the worker takes 6 GiB and waits. "
         "The trainer is killed with SIGKILL after step 40; the orphaned worker keeps its 6 GiB for 10 s until "
         "it is killed too.", 30),
    Case("host_pinned_oom_kill", T, ["wide500", "apps", "dmon"],
         host_oom("--steps 300 --period 0.2 --host-mib 64 --style spine", limit="3G", fallback_step=120),
         "no_leak", ["oom_kill"], None,
         "A replay buffer of pinned host batches (64 MiB a step, torch pin_memory) that is never trimmed, in a "
         "3 GiB memory cgroup: host memory grows until the kernel's OOM killer ends the job. GPU memory stays "
         "flat. dmesg files taken right after.", 26, kernel=True),
    Case("leak_loggers_stopped", T, ["wide500", "classic", "apps", "dmon"],
         stop_loggers_at("linear_late", "--steps 85 --period 0.17 --warm-gib 2 --flat 15 --leak-mib 128 "
                         "--style deepspeed --every 3", True, step=55),
         "leak", ["leak"], "linear",
         "A leak of 128 MiB a step from step 16 (kept activations); the nvidia-smi loggers were stopped after "
         "step 55 while the job went on leaking to its normal end at step 85: the nvidia-smi logs end mid-job "
         "with the memory still high. The job's own log (DeepSpeed-style lines) runs to the end.", 26),
    Case("large_stable_exit", T, ["wide500", "script5", "classic"],
         simple("flat", "--steps 70 --period 0.18 --warm-gib 80 --style bytes_k --every 5", False),
         "no_leak", [], None,
         "80 GiB taken at start (weights and a preallocated cache), then flat training. Ends normally.", 28),
]


# ---- the held-out half -------------------------------------------------------------------------

HELDOUT = [
    Case("linear_late_oom", H, ["wide1", "apps2", "script5"],
         simple("linear_late", "--steps 400 --period 0.25 --fraction 0.1 --warm-gib 6 --flat 40 --leak-mib 200 "
                "--style deepspeed --every 2", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "A trainer takes a 6 GiB working set, trains flat for 40 steps (about 13 s after the job's start), then "
         "keeps every step's hidden activations (200 MiB a step) until it reaches its memory cap (10 % of the "
         "GPU, set_per_process_memory_fraction) and dies of a CUDA OOM (traceback in stderr.log). "
         "DeepSpeed-style memory lines every 2 steps.", 34),
    Case("slow_leak_noisy_sigkill", H, ["ms250", "classic", "dmon_mu"],
         kill_at("slow_noisy", "--steps 400 --period 0.12 --warm-gib 12 --noise-mib 1024 --leak-mib 16 --onset 30 "
                 "--style bytes_k --every 10", True, step=130),
         "leak", ["leak"], "linear",
         "A 12 GiB footprint under noisy load (each step holds a random 0-1024 MiB of activations when it logs, "
         "step times +-40 %), with a slow leak from step 30 (a 16 MiB statistics tensor kept every step). "
         "Killed with SIGKILL from outside after step 130. Raw-byte memory lines every 10 steps.", 30),
    Case("staircase_loggers_stopped", H, ["wide1", "script1", "apps"],
         stop_loggers_at("staircase", "--steps 90 --period 0.2 --warm-gib 3 --stair-mib 1024 --stair-every 15 "
                         "--style pipe_gb", True, step=66),
         "leak", ["leak"], "step",
         "Every 15 steps a 1 GiB snapshot is appended to a list that is never pruned (stairs at steps 15, 30, "
         "45, 60, 75, 90). The nvidia-smi loggers were stopped after step 66 (four stairs seen) while the job "
         "went on to its normal end: the nvidia-smi logs end mid-job.", 31, stair_every=15),
    Case("infer_cache_leak_exit", H, ["script5", "script1", "classic", "apps"],
         simple("infer", "--leak --steps 90 --period 0.15 --warm-gib 5 --max-batch 24 --out-mib 2 --onset 20 "
                "--style spine", True),
         "leak", ["leak"], "linear",
         "An inference server with irregular request batches (0-24 requests) caches every response on the GPU "
         "from batch 20 on and never evicts it (2 MiB a request). Ends normally.", 26),
    Case("infer_irregular_healthy_sigkill", H, ["wide1", "dmon", "apps"],
         kill_at("infer", "--steps 400 --period 0.18 --warm-gib 8 --max-batch 64 --out-mib 2 --style bytes_k "
                 "--every 5", False, step=80),
         "no_leak", [], None,
         "An inference server with irregular batches (0-64 requests of 2 MiB output) that keeps nothing; "
         "killed with SIGKILL from outside after batch 80.", 25),
    Case("warmup_plateau_loggers_stopped", H, ["ms250", "script5", "apps"],
         stop_loggers_at("warmup_plateau", "--steps 100 --period 0.15 --ramp 25 --peak-gib 32 --style megatron "
                         "--every 5", False, step=70),
         "no_leak", [], None,
         "Curriculum warm-up: the activations a step holds grow to 32 GiB over the first 25 steps, then stay "
         "flat. The nvidia-smi loggers were stopped after step 70, on the plateau, while the job went on to its "
         "normal end: the nvidia-smi logs end mid-job with the memory high. Megatron-style lines every 5 "
         "steps.", 25),
    Case("lru_bounded_exit", H, ["wide500", "classic", "dmon"],
         simple("lru", "--steps 90 --period 0.15 --cap-entries 40 --entry-mib 64 --style spine", False),
         "no_leak", [], None,
         "An LRU cache of encoded prompts (64 MiB each, at most 40 entries) fills over the first ~45 steps, then "
         "evicts the oldest entry for each new one: memory rises to 2.5 GiB and stays. Ends normally.", 26),
    Case("eval_spikes_no_emptycache_exit", H, ["wide1", "apps", "script1"],
         simple("eval_spikes", "--steps 90 --period 0.16 --warm-gib 4 --eval-every 20 --eval-len 4 --spike-gib 8 "
                "--style deepspeed --every 2", False),
         "no_leak", [], None,
         "Training with a 4 GiB footprint; every 20 steps an evaluation holds 8 GiB for 4 steps and frees it, "
         "without empty_cache(): `allocated` returns to the baseline after each, while reserved (and "
         "nvidia-smi) stay at the high-water mark from the first evaluation on. Ends normally.", 26),
    Case("gradaccum_no_emptycache_exit", H, ["ms250", "dmon"],
         simple("grad_accum", "--steps 84 --period 0.16 --accum 6 --micro-mib 512 --style pipe_gb", False),
         "no_leak", [], None,
         "Gradient accumulation over 6 micro-batches by summing their losses (each graph ~512 MiB of saved "
         "activations) before one backward; no empty_cache(): `allocated` is a sawtooth, reserved and "
         "nvidia-smi stay at the peak. Ends normally.", 25),
    Case("cache_growth_emptycache_end", H, ["wide1", "script1", "apps", "dmon"],
         simple("cache_growth", "--steps 75 --period 0.18 --grow-mib 8 --empty-cache-at-end --linger 2.5 "
                "--style spine", False),
         "cache_growth", ["cache_growth"], None,
         "Each step's temporary is 8 MiB larger than the last: `cached` and nvidia-smi grow every step while "
         "`allocated` stays flat; after the last step the job calls torch.cuda.empty_cache() (reserved drops to "
         "almost nothing, logged as one more marker), waits 2.5 s and exits normally.", 28),
    Case("healthy_then_leaky_jobs", H, ["wide500", "apps", "dmon", "classic"],
         sequential(("flat", "--steps 50 --period 0.15 --warm-gib 6 --style spine", False, "job1.log"), 3.0,
                    ("linear_late", "--steps 60 --period 0.15 --warm-gib 2 --flat 10 --leak-mib 128 --style spine",
                     True, "job2.log")),
         "leak", ["leak"], "linear",
         "Two jobs one after the other on the same GPU: a healthy one (6 GiB, flat, job1.log) ends normally; 3 s "
         "later a second job (job2.log) keeps 128 MiB of activations a step from its step 11 and ends normally.",
         36),
    Case("two_procs_leaky_oom", H, ["apps", "ms250", "dmon"],
         two_procs("--steps 140 --period 0.12 --warm-gib 8 --style pipe_gb",
                   "leak_oom", "--steps 400 --period 0.12 --fraction 0.05 --warm-gib 1 --leak-mib 128 --onset 8 "
                   "--style spine", b_after_step=10),
         "leak", ["leak", "gpu_oom"], "linear",
         "Two processes on one GPU: a flat 8 GiB trainer (a.log) and a second job (b.log) that keeps its "
         "predictions on the GPU from its step 8 (128 MiB a step) until its cap (5 % of the GPU) and dies of a "
         "CUDA OOM; the flat trainer goes on and ends normally.", 30),
    Case("hf_trainer_healthy_exit", H, ["wide1", "apps2", "script5"],
         simple("hf_trainer", "--steps 110 --period 0.1 --every 10 --style none", False),
         "no_leak", [], None,
         "A transformers Trainer run (2-layer GPT-2 from GPT2Config, random weights and tokens, no download), "
         "healthy: memory rises during the first steps (optimizer state, cached blocks) and stays. The Trainer's "
         "log dicts carry memory numbers (added by a callback). Ends normally.", 38, timeout=120),
    Case("lightning_outputs_leak_exit", H, ["wide500", "classic", "dmon_mu"],
         simple("lightning_leak", "--leak --steps 90 --period 0.12 --onset 15 --every 5 --style none "
                "--lightning-pkg lightning", True),
         "leak", ["leak"], "linear",
         "A Lightning run (the `lightning` package) of a small language model whose LightningModule keeps every "
         "training step's logits, graph attached, from step 15 on; no cap: it ends normally at step 90 with the "
         "memory still held until exit. CSVLogger metrics in lightning_logs/version_0/metrics.csv.", 35,
         timeout=120),
    Case("residual_worker_sigkill", H, ["apps2", "wide1", "dmon"],
         residual("--steps 400 --period 0.25 --warm-gib 4 --worker-gib 10 --style spine", kill_step=25, hold=8.0),
         "leak", ["residual_process"], None,
         "A trainer (4 GiB) forks an eval worker (torch.multiprocessing) that takes 10 GiB; the trainer is killed "
         "with SIGKILL after step 25; the orphaned worker keeps its 10 GiB for 8 s until it is killed too.", 28),
    Case("host_pinned_oom_kill", H, ["ms250", "apps"],
         host_oom("--steps 400 --period 0.12 --host-mib 32 --style spine", limit="2G", fallback_step=150),
         "no_leak", ["oom_kill"], None,
         "Pinned host batches (32 MiB a step) kept in a replay list, in a 2 GiB memory cgroup: the kernel's OOM "
         "killer ends the job; GPU memory flat. dmesg files taken right after.", 22, kernel=True),
    Case("large_stable_exit", H, ["wide1", "script5", "classic"],
         simple("flat", "--steps 55 --period 0.2 --warm-gib 60 --style plain", False),
         "no_leak", [], None,
         "60 GiB taken at start, then flat; plain print lines without timestamps. Ends normally.", 26),
    Case("crashloop_oom_x2", H, ["wide1", "apps", "script1"],
         crash_loop("leak_oom", "--steps 400 --period 0.12 --fraction 0.08 --warm-gib 2 --leak-mib 192 --onset 10 "
                    "--style pipe_gb", runs=2, gap=3.0),
         "leak", ["leak", "gpu_oom"], "linear",
         "A crash loop of two runs: the job keeps validation predictions from step 10 (192 MiB a step) under a "
         "cap of 8 % of the GPU, dies of a CUDA OOM, is restarted 3 s later and dies again.", 38, timeout=100),
]

CASES = {"tune": TUNE, "heldout": HELDOUT}


# ---- held-out set 2 (2026-12-06): new step-log styles, JAX, TensorBoard, short jobs ---------------------
# Recorded for issue #40's honest figures: kept out of tests/ (bench/heldout2/), run once when the rules
# are settled. Its expectations (truth.json) come from the side files, as for the other halves.

H2 = "heldout2"

HELDOUT2 = [
    Case("kv_gb_leak_oom", H2, ["wide1", "apps", "script5"],
         simple("leak_oom", "--steps 400 --period 0.15 --fraction 0.06 --warm-gib 2 --leak-mib 192 --onset 12 "
                "--style kv_gb", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Validation predictions kept on the GPU from step 12 (192 MiB a step) under a cap of 6 % of the GPU "
         "until a CUDA OOM; `key=value` memory in GB behind a Python logging prefix.", 30),
    Case("tutorial_flat_exit", H2, ["ms250", "dmon"],
         simple("flat", "--steps 70 --period 0.15 --warm-gib 10 --style tutorial", False),
         "no_leak", [], None,
         "10 GiB taken at start, then flat training; the classic tutorial line `Epoch [e/E], Step [s/S], "
         "Loss: x, Mem: NMB` without a clock. Ends normally.", 24),
    Case("phases_leak_exit", H2, ["wide500", "apps"],
         simple("linear_late", "--steps 120 --period 0.12 --warm-gib 1 --flat 20 --leak-mib 8 --style phases", True),
         "leak", ["leak"], "linear",
         "The widely taught `log_memory(step_name)` helper prints allocated/reserved before forward, after "
         "forward, after backward and after step; from step 21 a debug hook keeps each step's activations "
         "(8 MiB a step), smaller than the swing within a step. No clock in the log. Ends normally.", 28),
    Case("phases_healthy_accum_exit", H2, ["wide1", "dmon"],
         simple("grad_accum", "--steps 96 --period 0.14 --accum 4 --micro-mib 512 --style phases", False),
         "no_leak", [], None,
         "Gradient accumulation over 4 micro-batches with the `log_memory(step_name)` helper at several "
         "points of each step: a sawtooth within and across steps, nothing kept. Ends normally.", 26),
    Case("monitor_infer_leak_sigkill", H2, ["apps2", "dmon"],
         kill_at("infer", "--leak --steps 400 --period 0.15 --warm-gib 4 --max-batch 24 --out-mib 4 --onset 10 "
                 "--style none --monitor 0.5", True, step=90),
         "leak", ["leak"], "linear",
         "An inference server caching every response on the GPU from batch 10; its monitor thread prints "
         "NVML's used/total every 0.5 s behind a `%m-%d %H:%M:%S` stamp without a year. Killed with SIGKILL "
         "after batch 90.", 28),
    Case("fairseq_tail_staircase_exit", H2, ["wide1", "apps"],
         simple("staircase", "--steps 100 --period 0.12 --warm-gib 2 --stair-mib 768 --stair-every 16 "
                "--style fairseq_tail --every 2", True),
         "leak", ["leak"], "step",
         "Every 16 steps a 768 MiB snapshot kept in a list; fairseq-style progress lines ending in `| mem "
         "allocated X MiB reserved Y MiB`. Ends normally.", 26, stair_every=16),
    Case("jsonl_warmup_exit", H2, ["ms250", "apps"],
         simple("warmup_plateau", "--steps 90 --period 0.14 --ramp 25 --peak-gib 16 --style jsonl", False),
         "no_leak", [], None,
         "Curriculum warm-up to 16 GiB over 25 steps, then flat; JSON metrics lines with "
         "`gpu_mem_allocated_mb`. Ends normally.", 25),
    Case("tensorboard_leak_exit", H2, ["wide500", "dmon"],
         simple("linear_late", "--steps 90 --period 0.14 --warm-gib 3 --flat 25 --leak-mib 64 --style none "
                "--tensorboard", True),
         "leak", ["leak"], "linear",
         "A debug hook keeps 64 MiB of activations a step from step 26; the script logs memory only to "
         "TensorBoard (`add_scalar(\"memory/allocated_mib\", ...)`). Ends normally.", 28),
    Case("jax_leak_oom", H2, ["wide1", "apps"],
         simple("jax_train", "--leak --steps 400 --period 0.12 --fraction 0.06 --warm-gib 1 --leak-mib 256 "
                "--onset 10 --every 2", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "JAX: each step's activations kept in a list from step 10 (256 MiB a step) until XLA runs out of "
         "memory (RESOURCE_EXHAUSTED) under a 6 % cap; memory_stats() logged by absl-style lines.", 34),
    Case("jax_flat_exit", H2, ["ms250", "apps"],
         simple("jax_train", "--steps 70 --period 0.12 --warm-gib 6 --every 2", False),
         "no_leak", [], None,
         "JAX training with a fixed 6 GiB footprint; memory_stats() logged every 2 steps. Ends normally.", 26),
    Case("short_leak_exit", H2, ["wide1", "used5"],
         simple("linear_late", "--steps 16 --period 0.5 --warm-gib 1 --flat 1 --leak-mib 1536 --style kv_gb", True),
         "leak", ["leak"], "linear",
         "A short job: from step 2 each step keeps 1.5 GiB for 16 steps of 0.5 s and exits while still "
         "growing, never levelling. A 5 s `timestamp, memory.used` log beside a 1 s one.", 24),
    Case("eval_spikes_kv_sigkill", H2, ["wide1", "apps"],
         kill_at("eval_spikes", "--steps 400 --period 0.14 --warm-gib 3 --eval-every 20 --eval-len 4 --spike-gib 6 "
                 "--empty-cache --style kv_gb", False, step=85),
         "no_leak", [], None,
         "A 3 GiB footprint with an evaluation of 6 GiB every 20 steps, freed and returned with "
         "empty_cache(); killed with SIGKILL after step 85.", 25),
    Case("crashloop_phases_oom_x2", H2, ["wide1", "apps"],
         crash_loop("leak_oom", "--steps 400 --period 0.12 --fraction 0.06 --warm-gib 1 --leak-mib 160 --onset 8 "
                    "--style phases", runs=2, gap=2.0),
         "leak", ["leak", "gpu_oom"], "linear",
         "A crash loop of two runs of a job keeping predictions from step 8 (160 MiB a step) under a 6 % cap, "
         "with the `log_memory(step_name)` helper's lines; each run dies of a CUDA OOM.", 36, timeout=100),
    Case("lru_tutorial_exit", H2, ["wide500", "script1"],
         simple("lru", "--steps 90 --period 0.14 --cap-entries 30 --entry-mib 96 --style tutorial", False),
         "no_leak", [], None,
         "An LRU cache of 96 MiB entries capped at 30 fills over ~30 steps and then evicts: a rise to 2.8 GiB "
         "and a plateau; tutorial-style lines. Ends normally.", 25),
    Case("cache_growth_fairseq_exit", H2, ["wide1", "dmon"],
         simple("cache_growth", "--steps 80 --period 0.15 --grow-mib 8 --style fairseq_tail", False),
         "cache_growth", ["cache_growth"], None,
         "Each step's temporary 8 MiB larger than the last: reserved and nvidia-smi grow, allocated flat; "
         "fairseq-style tails. Ends normally.", 26),
    Case("large_stable_absl_exit", H2, ["wide500", "used5"],
         simple("flat", "--steps 60 --period 0.18 --warm-gib 70 --style absl", False),
         "no_leak", [], None,
         "70 GiB taken at start, then flat; glog/absl-style lines (`I1206 hh:mm:ss.uuuuuu pid file.py:88]`, no "
         "year). Ends normally.", 25),
]

# The multi-style recording for sample_logs/: one leaking job printing the same readings in every new style
# at once (each style to its own file), with TensorBoard and an NVML monitor, to check the figures agree.
STYLES_CASES = [
    Case("multi_style_leak", "styles", ["wide1", "apps"],
         simple("linear_late", "--steps 90 --period 0.15 --warm-gib 2 --flat 20 --leak-mib 48 "
                "--style kv_gb+tutorial+fairseq_tail+phases+jsonl+absl+spine --tensorboard --monitor 1 "
                "--monitor-file monitor.log", True),
         "leak", ["leak"], "linear",
         "One training job whose debug hook keeps 48 MiB of activations a step from step 21, printing the same "
         "allocated/reserved readings in seven styles at once (kv_gb on stdout; tutorial, fairseq_tail, phases, "
         "jsonl, absl, spine each to <style>.log), to TensorBoard (tb/), and NVML's used/total from a monitor "
         "thread (monitor.log). Ends normally.", 30),
]

CASES["heldout2"] = HELDOUT2
CASES["styles"] = STYLES_CASES


# ---- held-out set 3 (2026-12-06): the same workloads in regimes and combinations not recorded before ----------
# Written after held-out set 2 was run and before any rule looked at these: slower and noisier leaks under
# the phases recipe, short healthy jobs, JAX without an OOM, crash loops of three, a residual worker beside a
# JSON log. Kept out of tests/ (bench/heldout3/), run once.

H3 = "heldout3"

HELDOUT3 = [
    Case("slow_noisy_phases_exit", H3, ["wide1", "apps"],
         simple("slow_noisy", "--steps 140 --period 0.12 --warm-gib 6 --noise-mib 512 --leak-mib 6 --onset 30 "
                "--style phases", True),
         "leak", ["leak"], "linear",
         "A 6 GiB footprint under noisy batches (0-512 MiB a step), with per-step statistics kept from step 30 "
         "(6 MiB a step), logged by the `log_memory(step_name)` helper at four points of each step. Ends "
         "normally.", 30),
    Case("staircase_jsonl_sigkill", H3, ["ms250", "dmon"],
         kill_at("staircase", "--steps 400 --period 0.12 --warm-gib 2 --stair-mib 512 --stair-every 12 "
                 "--style jsonl", True, step=90),
         "leak", ["leak"], "step",
         "Every 12 steps a 512 MiB snapshot kept in a list; JSON metrics lines; killed with SIGKILL after "
         "step 90.", 26, stair_every=12),
    Case("jax_leak_exit", H3, ["wide1", "apps"],
         simple("jax_train", "--leak --steps 80 --period 0.12 --fraction 0.5 --warm-gib 2 --leak-mib 64 "
                "--onset 20 --every 2", True),
         "leak", ["leak"], "linear",
         "JAX: each step's hidden activations kept from step 20 (64 MiB a step) under a 50 % cap that is never "
         "reached; memory_stats() logged every 2 steps. Ends normally.", 30),
    Case("infer_kv_leak_exit", H3, ["wide500", "apps"],
         simple("infer", "--leak --steps 120 --period 0.12 --warm-gib 3 --max-batch 32 --out-mib 16 --onset 15 "
                "--style kv_gb", True),
         "leak", ["leak"], "linear",
         "An inference loop caching every batch's output on the GPU from batch 15; `key=value` GB lines. "
         "Ends normally.", 28),
    Case("warmup_absl_sigkill", H3, ["wide1", "dmon"],
         kill_at("warmup_plateau", "--steps 400 --period 0.13 --ramp 20 --peak-gib 12 --style absl", False,
                 step=70),
         "no_leak", [], None,
         "Curriculum warm-up to 12 GiB over 20 steps, then flat; glog/absl lines; killed with SIGKILL after "
         "step 70.", 25),
    Case("eval_spikes_tutorial_exit", H3, ["wide500", "apps"],
         simple("eval_spikes", "--steps 100 --period 0.13 --warm-gib 4 --eval-every 25 --eval-len 5 "
                "--spike-gib 8 --style tutorial", False),
         "no_leak", [], None,
         "A 4 GiB footprint with an 8 GiB evaluation every 25 steps, freed but kept in the cache (no "
         "empty_cache): reserved rises once and stays; tutorial lines. Ends normally.", 26),
    Case("grad_accum_fairseq_exit", H3, ["wide1", "dmon"],
         simple("grad_accum", "--steps 96 --period 0.13 --accum 8 --micro-mib 256 --style fairseq_tail", False),
         "no_leak", [], None,
         "Gradient accumulation over 8 micro-batches of 256 MiB, freed at each optimizer step; fairseq-style "
         "tails. Ends normally.", 26),
    Case("short_flat_exit", H3, ["wide1", "used5"],
         simple("flat", "--steps 14 --period 0.5 --warm-gib 5 --style kv_gb", False),
         "no_leak", [], None,
         "A short job: 5 GiB taken at start, 14 flat steps of 0.5 s. A 5 s `timestamp, memory.used` log beside "
         "a 1 s one.", 22),
    Case("short_warmup_exit", H3, ["wide1", "apps"],
         simple("warmup_plateau", "--steps 18 --period 0.5 --ramp 6 --peak-gib 8 --style spine", False),
         "no_leak", [], None,
         "A short job warming up to 8 GiB over 6 steps of 0.5 s, then flat for 12 steps. Ends normally.", 24),
    Case("leak_oom_spine_late", H3, ["wide500", "apps", "script1"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.1 --warm-gib 2 --leak-mib 96 --onset 30 "
                "--style spine", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Validation predictions kept from step 30 (96 MiB a step) under a 10 % cap until a CUDA OOM; "
         "spine-style lines.", 34),
    Case("crashloop_kv_oom_x3", H3, ["wide1", "apps"],
         crash_loop("leak_oom", "--steps 400 --period 0.12 --fraction 0.05 --warm-gib 1 --leak-mib 128 --onset 6 "
                    "--style kv_gb", runs=3, gap=1.5),
         "leak", ["leak", "gpu_oom"], "linear",
         "A crash loop of three runs of a job keeping predictions from step 6 (128 MiB a step) under a 5 % cap; "
         "each run dies of a CUDA OOM.", 42, timeout=120),
    Case("lru_phases_exit", H3, ["wide500", "dmon"],
         simple("lru", "--steps 100 --period 0.12 --cap-entries 24 --entry-mib 128 --style phases", False),
         "no_leak", [], None,
         "An LRU cache of 128 MiB entries capped at 24 fills over 24 steps and then evicts; the "
         "`log_memory(step_name)` helper at four points of each step. Ends normally.", 26),
    Case("cache_growth_kv_exit", H3, ["wide1", "apps"],
         simple("cache_growth", "--steps 90 --period 0.13 --grow-mib 12 --style kv_gb", False),
         "cache_growth", ["cache_growth"], None,
         "Each step's temporary 12 MiB larger than the last: reserved and nvidia-smi grow, allocated flat; "
         "`key=value` GB lines. Ends normally.", 26),
    Case("residual_worker_jsonl_sigkill", H3, ["apps", "wide1"],
         residual("--steps 400 --period 0.2 --warm-gib 3 --worker-gib 5 --style jsonl", kill_step=30, hold=8.0),
         "leak", ["residual_process"], None,
         "A trainer with an eval worker process holding 5 GiB; the trainer is SIGKILLed after step 30 and the "
         "worker keeps its memory for 8 s until it is killed too; JSON metrics lines.", 30),
    Case("tensorboard_staircase_exit", H3, ["wide1", "apps"],
         simple("staircase", "--steps 100 --period 0.12 --warm-gib 2 --stair-mib 640 --stair-every 20 "
                "--style none --tensorboard", True),
         "leak", ["leak"], "step",
         "Every 20 steps a 640 MiB snapshot kept in a list; memory logged only to TensorBoard. Ends "
         "normally.", 26, stair_every=20),
    Case("large_stable_tutorial_sigkill", H3, ["wide500", "used5"],
         kill_at("flat", "--steps 400 --period 0.15 --warm-gib 60 --style tutorial", False, step=60),
         "no_leak", [], None,
         "60 GiB taken at start, then flat; tutorial lines; killed with SIGKILL after step 60.", 24),
]
CASES["heldout3"] = HELDOUT3


# ---- held-out set 4 (2026-12-06, second session): the older styles, other endings, new combinations ------
# Written before the rules of this session's detection work were settled and before recording; kept out of
# tests/ (bench/heldout4/), run once when the rules are settled. Regimes not recorded before: the first
# step-log styles (megatron, deepspeed, plain, bytes_k, pipe_gb) under the phases of the newer sets, a
# staircase and an inference leak into an OOM, a leaky job followed by a healthy one, two processes with
# `key=value` logs, a noisy leak into an OOM, a short job killed while growing, JAX killed.

H4 = "heldout4"

HELDOUT4 = [
    Case("megatron_slow_leak_exit", H4, ["wide1", "apps"],
         simple("linear_late", "--steps 150 --period 0.1 --warm-gib 3 --flat 30 --leak-mib 12 --style megatron",
                True),
         "leak", ["leak"], "linear",
         "A debug hook keeps 12 MiB of activations a step from step 31 of 150; Megatron-style `memory (MB) |` "
         "lines. Ends normally.", 28),
    Case("deepspeed_staircase_oom", H4, ["wide500", "dmon"],
         simple("staircase", "--steps 400 --period 0.12 --fraction 0.08 --warm-gib 2 --stair-mib 1024 "
                "--stair-every 10 --style deepspeed", True),
         "leak", ["leak", "gpu_oom"], "step",
         "Every 10 steps a 1 GiB snapshot kept in a list under a cap of 8 % of the GPU until a CUDA OOM; "
         "DeepSpeed `see_memory_usage` lines.", 28, stair_every=10),
    Case("plain_warmup_sigkill", H4, ["ms250", "apps"],
         kill_at("warmup_plateau", "--steps 400 --period 0.12 --ramp 40 --peak-gib 20 --style plain", False,
                 step=80),
         "no_leak", [], None,
         "Curriculum warm-up to 20 GiB over 40 steps, then flat; plain print lines; killed with SIGKILL after "
         "step 80.", 26),
    Case("bytes_k_lru_exit", H4, ["wide1", "dmon"],
         simple("lru", "--steps 110 --period 0.12 --cap-entries 40 --entry-mib 64 --style bytes_k", False),
         "no_leak", [], None,
         "An LRU cache of 64 MiB entries capped at 40 fills over 40 steps and then evicts; memory in raw bytes. "
         "Ends normally.", 26),
    Case("pipe_gb_infer_leak_oom", H4, ["wide1", "apps"],
         simple("infer", "--leak --steps 400 --period 0.12 --fraction 0.05 --warm-gib 2 --max-batch 24 "
                "--out-mib 6 --onset 12 --style pipe_gb", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "An inference loop caching every batch's output on the GPU from batch 12 under a cap of 5 % of the GPU "
         "until a CUDA OOM; `| INFO |` lines in GB. (Recorded first with 24 MiB outputs in batches of up to 32: "
         "its 2.9 GiB GELU intermediate ran out of memory at batch 4, before the leak began, so it was recorded "
         "again with these sizes before any rule read it.)", 30),
    Case("two_procs_kv_exit", H4, ["apps", "wide1"],
         two_procs("--steps 120 --period 0.15 --warm-gib 6 --style kv_gb",
                   "linear_late", "--steps 80 --period 0.15 --warm-gib 1 --flat 10 --leak-mib 96 --style kv_gb",
                   b_after_step=10),
         "leak", ["leak"], "linear",
         "Two processes on one GPU, both with `key=value` GB lines: a flat 6 GiB trainer (a.log) and a second "
         "job (b.log) keeping 96 MiB a step from its step 11; both end normally.", 32),
    Case("leaky_then_healthy_jobs", H4, ["wide500", "apps", "dmon"],
         sequential(("linear_late", "--steps 60 --period 0.15 --warm-gib 2 --flat 10 --leak-mib 128 --style jsonl",
                     True, "job1.log"), 3.0,
                    ("flat", "--steps 50 --period 0.15 --warm-gib 6 --style jsonl", False, "job2.log")),
         "leak", ["leak"], "linear",
         "Two jobs one after the other on the same GPU: a leaky one (job1.log, 128 MiB a step from its step 11) "
         "ends normally; 3 s later a healthy one (6 GiB, flat, job2.log) runs and ends normally.", 36),
    Case("cache_growth_phases_sigkill", H4, ["ms250", "apps"],
         kill_at("cache_growth", "--steps 400 --period 0.13 --grow-mib 10 --style phases", False, step=75),
         "cache_growth", ["cache_growth"], None,
         "Each step's temporary 10 MiB larger than the last: reserved and nvidia-smi grow, allocated flat; the "
         "`log_memory(step_name)` helper at four points of each step; killed with SIGKILL after step 75.", 26),
    Case("slow_noisy_jsonl_oom", H4, ["wide1", "apps"],
         simple("slow_noisy", "--steps 600 --period 0.08 --fraction 0.06 --warm-gib 2 --noise-mib 256 "
                "--leak-mib 24 --onset 20 --style jsonl", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "A 2 GiB footprint under noisy batches (0-256 MiB a step), per-step statistics kept from step 20 "
         "(24 MiB a step) under a cap of 6 % of the GPU until a CUDA OOM; JSON metrics lines.", 30),
    Case("short_leak_tutorial_sigkill", H4, ["wide1", "used5"],
         kill_at("linear_late", "--steps 400 --period 0.5 --warm-gib 1 --flat 2 --leak-mib 1024 --style tutorial",
                 True, step=10),
         "leak", ["leak"], "linear",
         "A short job: from step 3 each step keeps 1 GiB; killed with SIGKILL after step 10 (about 5 s), still "
         "growing. A 5 s `timestamp, memory.used` log beside a 1 s one.", 22),
    Case("crashloop_absl_oom_x2", H4, ["ms250", "dmon"],
         crash_loop("leak_oom", "--steps 400 --period 0.12 --fraction 0.06 --warm-gib 1 --leak-mib 192 "
                    "--onset 10 --style absl", runs=2, gap=2.0),
         "leak", ["leak", "gpu_oom"], "linear",
         "A crash loop of two runs of a job keeping predictions from step 10 (192 MiB a step) under a 6 % cap; "
         "glog/absl lines; each run dies of a CUDA OOM.", 36, timeout=100),
    Case("jax_flat_sigkill", H4, ["wide500", "dmon"],
         kill_at("jax_train", "--steps 400 --period 0.12 --warm-gib 8 --every 2", False, step=60),
         "no_leak", [], None,
         "JAX training with a fixed 8 GiB footprint; memory_stats() logged every 2 steps; killed with SIGKILL "
         "after step 60.", 26),
    Case("grad_accum_megatron_sigkill", H4, ["wide500", "apps"],
         kill_at("grad_accum", "--steps 400 --period 0.13 --accum 4 --micro-mib 768 --style megatron", False,
                 step=64),
         "no_leak", [], None,
         "Gradient accumulation over 4 micro-batches of 768 MiB, freed at each optimizer step; Megatron-style "
         "lines; killed with SIGKILL after step 64.", 26),
    Case("eval_spikes_plain_emptycache_exit", H4, ["script1", "apps"],
         simple("eval_spikes", "--steps 100 --period 0.13 --warm-gib 5 --eval-every 20 --eval-len 4 "
                "--spike-gib 10 --empty-cache --style plain", False),
         "no_leak", [], None,
         "A 5 GiB footprint with a 10 GiB evaluation every 20 steps, freed and returned with empty_cache(); "
         "plain print lines. Ends normally.", 26),
    Case("staircase_tutorial_loggers_stopped", H4, ["wide1", "apps"],
         stop_loggers_at("staircase", "--steps 120 --period 0.12 --warm-gib 2 --stair-mib 768 --stair-every 15 "
                         "--style tutorial", True, step=70),
         "leak", ["leak"], "step",
         "Every 15 steps a 768 MiB snapshot kept in a list; tutorial lines; the GPU loggers stop at step 70 while "
         "the job goes on to step 120 and ends normally.", 28, stair_every=15),
    Case("hf_trainer_leak_exit", H4, ["wide1", "apps"],
         simple("hf_trainer", "--leak --steps 120 --period 0.1 --onset 30 --every 10 --style none", True),
         "leak", ["leak"], "linear",
         "A transformers Trainer run whose callback keeps a copy of the token-embedding matrix every step from "
         "step 30 (64 MiB a step); memory numbers in the Trainer's log dicts. Ends normally.", 38, timeout=120),
]
CASES["heldout4"] = HELDOUT4


# ---- held-out set 5 (2026-12-06, third session) -------------------------------------------------------
# Written before the third session's detection changes were settled and before recording; kept out of tests/
# (bench/heldout5/), run once when the rules are settled. New combinations of workload, step-log style, logger
# and ending: the several-points-a-step helper on a leak into an OOM, a headerless 1 s CSV under a staircase,
# short healthy jobs, a noisy leak killed, JAX and Lightning leaks under other caps, a healthy job then a leaky one.

H5 = "heldout5"

HELDOUT5 = [
    Case("phases_linear_leak_oom", H5, ["ms250", "dmon_mu"],
         simple("linear_late", "--steps 400 --period 0.12 --fraction 0.06 --warm-gib 1 --flat 20 --leak-mib 64 "
                "--style phases", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "A debug hook keeps 64 MiB of activations a step from step 21 under a cap of 6 % of the GPU until a "
         "CUDA OOM; the `log_memory(step_name)` helper at four points of each step.", 26),
    Case("absl_staircase_exit", H5, ["script1", "apps2"],
         simple("staircase", "--steps 100 --period 0.12 --warm-gib 3 --stair-mib 640 --stair-every 12 "
                "--style absl", True),
         "leak", ["leak"], "step",
         "Every 12 steps a 640 MiB snapshot kept in a list; glog/absl lines; a headerless 1 s "
         "`timestamp, index, memory.used, memory.total` log. Ends normally.", 26, stair_every=12),
    Case("kv_lru_sigkill", H5, ["wide500", "apps"],
         kill_at("lru", "--steps 400 --period 0.12 --cap-entries 24 --entry-mib 128 --style kv_gb", False, step=70),
         "no_leak", [], None,
         "An LRU cache of 128 MiB entries capped at 24 fills over 24 steps and then evicts; `key=value` GB "
         "lines; killed with SIGKILL after step 70.", 24),
    Case("jsonl_eval_spikes_exit", H5, ["classic", "dmon"],
         simple("eval_spikes", "--steps 100 --period 0.13 --warm-gib 4 --eval-every 25 --eval-len 5 "
                "--spike-gib 8 --style jsonl", False),
         "no_leak", [], None,
         "A 4 GiB footprint with an 8 GiB evaluation every 25 steps, freed but kept in the cache (no "
         "empty_cache); JSON metrics lines. Ends normally.", 26),
    Case("tutorial_grad_accum_exit", H5, ["used5", "apps"],
         simple("grad_accum", "--steps 96 --period 0.13 --accum 8 --micro-mib 256 --style tutorial", False),
         "no_leak", [], None,
         "Gradient accumulation over 8 micro-batches of 256 MiB, freed at each optimizer step; tutorial lines; "
         "a 5 s `timestamp, memory.used` log. Ends normally.", 25),
    Case("spine_slow_noisy_sigkill", H5, ["wide1", "dmon"],
         kill_at("slow_noisy", "--steps 600 --period 0.08 --warm-gib 3 --noise-mib 384 --leak-mib 16 --onset 30 "
                 "--style spine", True, step=260),
         "leak", ["leak"], "linear",
         "A 3 GiB footprint under noisy batches (0-384 MiB a step), 16 MiB of statistics kept a step from step "
         "30; killed with SIGKILL after step 260.", 30),
    Case("jax_leak_oom_slow", H5, ["wide500", "apps"],
         simple("jax_train", "--leak --steps 400 --period 0.12 --fraction 0.08 --warm-gib 2 --leak-mib 128 "
                "--onset 15 --every 3", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "JAX: each step's activations kept from step 15 (128 MiB a step) until XLA runs out of memory under an "
         "8 % cap; memory_stats() logged every 3 steps.", 36),
    Case("lightning_leak_sigkill", H5, ["ms250", "apps"],
         kill_at("lightning_leak", "--leak --steps 400 --period 0.12 --onset 15 --every 5 --style none "
                 "--lightning-pkg lightning", True, step=70),
         "leak", ["leak"], "linear",
         "A lightning run whose module keeps every training step's logits, graph attached, from step 15; "
         "killed with SIGKILL after step 70.", 40, timeout=120),
    Case("cache_growth_kv_exit", H5, ["wide1", "apps"],
         simple("cache_growth", "--steps 80 --period 0.13 --grow-mib 16 --style kv_gb", False),
         "cache_growth", ["cache_growth"], None,
         "Each step's temporary 16 MiB larger than the last: reserved and nvidia-smi grow, allocated flat; "
         "`key=value` GB lines. Ends normally.", 25),
    Case("monitor_linear_leak_sigkill", H5, ["used5", "dmon"],
         kill_at("linear_late", "--steps 400 --period 0.15 --warm-gib 2 --flat 15 --leak-mib 96 --style none "
                 "--monitor 0.5", True, step=80),
         "leak", ["leak"], "linear",
         "A debug hook keeps 96 MiB a step from step 16; the only step-log lines are an NVML monitor thread's "
         "used/total every 0.5 s; killed with SIGKILL after step 80.", 26),
    Case("healthy_then_leaky_oom", H5, ["wide500", "apps"],
         sequential(("flat", "--steps 50 --period 0.15 --warm-gib 8 --style fairseq_tail", False, "job1.log"), 3.0,
                    ("leak_oom", "--steps 400 --period 0.12 --fraction 0.07 --warm-gib 1 --leak-mib 160 --onset 8 "
                     "--style fairseq_tail", True, "job2.log")),
         "leak", ["leak", "gpu_oom"], "linear",
         "Two jobs one after the other on the same GPU: a healthy one (8 GiB, flat, job1.log) ends normally; "
         "3 s later a second one (job2.log) keeps 160 MiB a step from its step 8 until a CUDA OOM under a 7 % "
         "cap.", 36),
    Case("tensorboard_staircase_exit", H5, ["wide1", "dmon"],
         simple("staircase", "--steps 100 --period 0.12 --warm-gib 2 --stair-mib 512 --stair-every 14 "
                "--style none --tensorboard", True),
         "leak", ["leak"], "step",
         "Every 14 steps a 512 MiB snapshot kept in a list; memory logged only to TensorBoard. Ends normally.",
         26, stair_every=14),
    Case("short_warmup_sigkill", H5, ["wide1", "used5"],
         kill_at("warmup_plateau", "--steps 400 --period 0.4 --ramp 12 --peak-gib 12 --style plain", False,
                 step=30),
         "no_leak", [], None,
         "A short job: warm-up to 12 GiB over 12 steps, then flat; plain print lines; killed with SIGKILL after "
         "step 30 (about 12 s).", 24),
    Case("infer_healthy_pipe_gb_exit", H5, ["ms250", "apps"],
         simple("infer", "--steps 90 --period 0.14 --warm-gib 4 --max-batch 48 --out-mib 4 --style pipe_gb", False),
         "no_leak", [], None,
         "An inference loop with batch sizes varying up to 48; outputs freed each batch; `| INFO |` lines in "
         "GB. Ends normally.", 25),
    Case("megatron_leak_oom_fast", H5, ["wide1", "dmon"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.1 --warm-gib 2 --leak-mib 384 --onset 12 "
                "--style megatron", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Predictions kept from step 12 (384 MiB a step) under a 10 % cap until a CUDA OOM; Megatron-style "
         "`memory (MB) |` lines.", 26),
    Case("deepspeed_flat_sigkill", H5, ["script5", "apps"],
         kill_at("flat", "--steps 400 --period 0.12 --warm-gib 10 --style deepspeed", False, step=90),
         "no_leak", [], None,
         "A fixed 10 GiB footprint; DeepSpeed `see_memory_usage` lines; a headerless 5 s log; killed with "
         "SIGKILL after step 90.", 24),
]
CASES["heldout5"] = HELDOUT5


# ---- held-out set 6 (2026-12-06, fourth session) ------------------------------------------------------
# Written before the fourth session's detection changes were settled and before recording; kept out of tests/
# (bench/heldout6/), run once when the rules are settled. New combinations: the several-points-a-step helper on a
# healthy job and on two processes, a staircase crash loop, a JAX leak killed, a healthy Trainer run, an NVML
# monitor thread on a leak into an OOM, a noisy leak into an OOM beside a headerless 1 s CSV, a short leak killed.

H6 = "heldout6"

HELDOUT6 = [
    Case("phases_flat_sigkill", H6, ["wide500", "dmon_mu"],
         kill_at("flat", "--steps 400 --period 0.12 --warm-gib 6 --style phases", False, step=90),
         "no_leak", [], None,
         "A fixed 6 GiB footprint; the `log_memory(step_name)` helper at four points of each step; killed with "
         "SIGKILL after step 90.", 26),
    Case("jsonl_linear_leak_sigkill", H6, ["ms250", "apps2"],
         kill_at("linear_late", "--steps 400 --period 0.12 --warm-gib 2 --flat 25 --leak-mib 48 --style jsonl",
                 True, step=110),
         "leak", ["leak"], "linear",
         "A debug hook keeps 48 MiB of activations a step from step 26; JSON metrics lines; killed with SIGKILL "
         "after step 110.", 26),
    Case("tutorial_eval_spikes_emptycache_sigkill", H6, ["wide1", "used5"],
         kill_at("eval_spikes", "--steps 400 --period 0.13 --warm-gib 3 --eval-every 15 --eval-len 3 "
                 "--spike-gib 6 --empty-cache --style tutorial", False, step=70),
         "no_leak", [], None,
         "A 3 GiB footprint with a 6 GiB evaluation every 15 steps, freed and returned with empty_cache(); "
         "tutorial lines; a 5 s `timestamp, memory.used` log; killed with SIGKILL after step 70.", 24),
    Case("absl_warmup_exit", H6, ["script5", "dmon"],
         simple("warmup_plateau", "--steps 90 --period 0.13 --ramp 25 --peak-gib 14 --style absl", False),
         "no_leak", [], None,
         "Curriculum warm-up to 14 GiB over 25 steps, then flat; glog/absl lines; a headerless 5 s log. Ends "
         "normally.", 25),
    Case("fairseq_cache_growth_sigkill", H6, ["wide500", "apps"],
         kill_at("cache_growth", "--steps 400 --period 0.13 --grow-mib 12 --style fairseq_tail", False, step=70),
         "cache_growth", ["cache_growth"], None,
         "Each step's temporary 12 MiB larger than the last: reserved and nvidia-smi grow, allocated flat; "
         "fairseq-style tails; killed with SIGKILL after step 70.", 25),
    Case("kv_slow_noisy_oom", H6, ["script1", "dmon"],
         simple("slow_noisy", "--steps 600 --period 0.08 --fraction 0.05 --warm-gib 1.5 --noise-mib 192 "
                "--leak-mib 32 --onset 25 --style kv_gb", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "A 1.5 GiB footprint under noisy batches (0-192 MiB a step), 32 MiB of statistics kept a step from step "
         "25 under a cap of 5 % of the GPU until a CUDA OOM; `key=value` GB lines; a headerless 1 s log.", 30),
    Case("megatron_lru_exit", H6, ["classic", "apps"],
         simple("lru", "--steps 90 --period 0.12 --cap-entries 30 --entry-mib 96 --style megatron", False),
         "no_leak", [], None,
         "An LRU cache of 96 MiB entries capped at 30 fills over 30 steps and then evicts; Megatron-style lines. "
         "Ends normally.", 25),
    Case("deepspeed_infer_leak_sigkill", H6, ["wide1", "dmon"],
         kill_at("infer", "--leak --steps 400 --period 0.12 --warm-gib 3 --max-batch 24 --out-mib 8 --onset 15 "
                 "--style deepspeed", True, step=120),
         "leak", ["leak"], "linear",
         "An inference loop caching every request's output (8 MiB) on the GPU from batch 15; DeepSpeed "
         "`see_memory_usage` lines; killed with SIGKILL after batch 120.", 28),
    Case("jax_flat_long_exit", H6, ["ms250", "apps"],
         simple("jax_train", "--steps 150 --period 0.12 --warm-gib 6 --every 4", False),
         "no_leak", [], None,
         "JAX training with a fixed 6 GiB footprint; memory_stats() logged every 4 steps. Ends normally.", 30),
    Case("jax_leak_sigkill", H6, ["wide1", "dmon"],
         kill_at("jax_train", "--leak --steps 400 --period 0.12 --warm-gib 2 --leak-mib 96 --onset 20 --every 2",
                 True, step=110),
         "leak", ["leak"], "linear",
         "JAX: each step's activations kept from step 20 (96 MiB a step), no cap; memory_stats() logged every 2 "
         "steps; killed with SIGKILL after step 110.", 30),
    Case("hf_trainer_plain_exit", H6, ["wide500", "apps"],
         simple("hf_trainer", "--steps 120 --period 0.1 --every 10 --style none", False),
         "no_leak", [], None,
         "A transformers Trainer run with no leak; memory numbers in the Trainer's log dicts. Ends normally.",
         38, timeout=120),
    Case("monitor_leak_oom", H6, ["wide1", "apps"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.06 --warm-gib 1 --leak-mib 128 --onset 10 "
                "--style none --monitor 0.5", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Predictions kept from step 10 (128 MiB a step) under a 6 % cap until a CUDA OOM; the only step-log "
         "lines are an NVML monitor thread's used/total every 0.5 s.", 26),
    Case("two_procs_phases_exit", H6, ["apps", "wide500"],
         two_procs("--steps 110 --period 0.15 --warm-gib 5 --style phases",
                   "linear_late", "--steps 70 --period 0.15 --warm-gib 1 --flat 12 --leak-mib 80 --style phases",
                   b_after_step=10),
         "leak", ["leak"], "linear",
         "Two processes on one GPU, both with the `log_memory(step_name)` helper: a flat 5 GiB trainer (a.log) "
         "and a second job (b.log) keeping 80 MiB a step from its step 13; both end normally.", 32),
    Case("crashloop_pipe_gb_staircase_oom_x2", H6, ["ms250", "dmon"],
         crash_loop("staircase", "--steps 400 --period 0.1 --fraction 0.1 --warm-gib 1 --stair-mib 768 "
                    "--stair-every 8 --style pipe_gb", runs=2, gap=2.0),
         "leak", ["leak", "gpu_oom"], "step",
         "A crash loop of two runs of a job keeping a 768 MiB snapshot every 8 steps under a 10 % cap; `| INFO |` "
         "lines in GB; each run dies of a CUDA OOM.", 36, timeout=100, stair_every=8),
    Case("short_leak_kv_sigkill", H6, ["wide1", "used5"],
         kill_at("linear_late", "--steps 400 --period 0.4 --warm-gib 1 --flat 3 --leak-mib 768 --style kv_gb",
                 True, step=12),
         "leak", ["leak"], "linear",
         "A short job: from step 4 each step keeps 768 MiB; killed with SIGKILL after step 12 (about 5 s), still "
         "growing; a 5 s `timestamp, memory.used` log beside a 1 s one.", 22),
    Case("spine_grad_accum_exit", H6, ["wide1", "apps2"],
         simple("grad_accum", "--steps 80 --period 0.13 --accum 4 --micro-mib 512 --style spine", False),
         "no_leak", [], None,
         "Gradient accumulation over 4 micro-batches of 512 MiB, freed at each optimizer step; Python logging "
         "lines. Ends normally.", 24),
    Case("bytes_k_leak_loggers_stopped", H6, ["script1", "apps"],
         stop_loggers_at("linear_late", "--steps 120 --period 0.12 --warm-gib 2 --flat 15 --leak-mib 64 "
                         "--style bytes_k", True, step=70),
         "leak", ["leak"], "linear",
         "A debug hook keeps 64 MiB a step from step 16; memory in raw bytes; the GPU loggers stop at step 70 "
         "while the job goes on to step 120 and ends normally.", 28),
]
CASES["heldout6"] = HELDOUT6


# ---- held-out set 7 (fifth session, 2026-12-06) -------------------------------------------------
# Written before recording and before this session's rule changes were merged; recorded once, run once when the
# rules are settled (bench/heldout7/). New: three print styles no recording used before (mmengine's logger with
# its per-interval peak `memory: N` in MB, loguru's default format with ultralytics-style `G` sizes, a tqdm bar
# whose refreshes share one physical line), a kernel OOM kill of one job before another job's GPU leak on the
# same host (the kill is context, not what ended the leak), the issue's staircase of +512 MiB every 20 steps.

H7 = "heldout7"

HELDOUT7 = [
    Case("mmengine_linear_leak_sigkill", H7, ["wide1", "apps"],
         kill_at("linear_late", "--steps 400 --period 0.12 --warm-gib 2 --flat 20 --leak-mib 64 --style mmengine "
                 "--every 5", True, step=110),
         "leak", ["leak"], "linear",
         "A debug hook keeps 64 MiB of activations a step from step 21; mmengine's logger every 5 steps (`memory:` "
         "the peak allocated MB since the last line); killed with SIGKILL after step 110.", 26),
    Case("loguru_staircase_exit", H7, ["ms250", "dmon"],
         simple("staircase", "--steps 100 --period 0.12 --warm-gib 2 --stair-mib 512 --stair-every 20 "
                "--style loguru", True),
         "leak", ["leak"], "step",
         "Every 20 steps a 512 MiB snapshot kept in a list; loguru lines with `gpu_mem 2.29G`. Ends normally.", 26,
         stair_every=20),
    Case("tqdm_leak_oom", H7, ["wide1", "apps"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.08 --warm-gib 1 --leak-mib 96 --onset 15 "
                "--style tqdm", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Predictions kept from step 15 (96 MiB a step) under an 8 % cap until a CUDA OOM; memory only in a tqdm "
         "bar's postfix (`mem=2.29G`), its refreshes joined by carriage returns on one line.", 26),
    Case("mmengine_flat_exit", H7, ["wide500", "used5"],
         simple("flat", "--steps 90 --period 0.12 --warm-gib 8 --style mmengine --every 5", False),
         "no_leak", [], None,
         "A fixed 8 GiB footprint; mmengine lines every 5 steps; a 5 s `timestamp, memory.used` log. Ends "
         "normally.", 24),
    Case("loguru_eval_spikes_sigkill", H7, ["wide1", "apps2"],
         kill_at("eval_spikes", "--steps 400 --period 0.13 --warm-gib 3 --eval-every 12 --eval-len 3 "
                 "--spike-gib 5 --style loguru", False, step=75),
         "no_leak", [], None,
         "A 3 GiB footprint with a 5 GiB evaluation every 12 steps, kept in the cache (no empty_cache); loguru "
         "lines; killed with SIGKILL after step 75.", 25),
    Case("tqdm_warmup_exit", H7, ["ms250", "apps"],
         simple("warmup_plateau", "--steps 90 --period 0.13 --ramp 20 --peak-gib 10 --style tqdm", False),
         "no_leak", [], None,
         "Curriculum warm-up to 10 GiB over 20 steps, then flat; a tqdm bar. Ends normally.", 25),
    Case("host_kill_then_leak_oom", H7, ["wide500", "apps", "dmon"],
         host_kill_then("--steps 400 --period 0.12 --host-mib 48 --style spine", limit="2G", fallback_step=150,
                        gap=3.0, kind="leak_oom", args="--steps 400 --period 0.12 --fraction 0.07 --warm-gib 1 "
                        "--leak-mib 128 --onset 12 --style kv_gb"),
         "leak", ["leak", "gpu_oom"], "linear",
         "A replay buffer of pinned host batches (48 MiB a step) in a 2 GiB memory cgroup until the kernel's OOM "
         "killer ends that job (job1.log); 3 s later a second job (job2.log) keeps 128 MiB a step from step 12 "
         "under a 7 % cap until a CUDA OOM. dmesg files taken right after: the kernel kill is the first job's.",
         48, kernel=True, timeout=120),
    Case("host_pinned_jsonl_oom_kill", H7, ["wide1", "apps"],
         host_oom("--steps 400 --period 0.12 --host-mib 48 --style jsonl", limit="2G", fallback_step=150),
         "no_leak", ["oom_kill"], None,
         "Pinned host batches (48 MiB a step) kept in a list, in a 2 GiB memory cgroup: the kernel's OOM killer "
         "ends the job; GPU memory flat; JSON metrics lines. dmesg files taken right after.", 24, kernel=True),
    Case("residual_worker_loguru_sigkill", H7, ["apps2", "wide1"],
         residual("--steps 400 --period 0.2 --warm-gib 3 --worker-gib 7 --style loguru", kill_step=30, hold=8.0),
         "leak", ["residual_process"], None,
         "A trainer (3 GiB) with an eval worker process holding 7 GiB; the trainer is SIGKILLed after step 30 and "
         "the orphaned worker keeps its memory for 8 s until it is killed too; loguru lines.", 30),
    Case("slow_noisy_deepspeed_exit", H7, ["wide1", "dmon"],
         simple("slow_noisy", "--steps 300 --period 0.1 --warm-gib 2 --noise-mib 256 --leak-mib 24 --onset 40 "
                "--style deepspeed --every 2", True),
         "leak", ["leak"], "linear",
         "A 2 GiB footprint under noisy batches (0-256 MiB a step), 24 MiB of statistics kept a step from step 40; "
         "DeepSpeed `see_memory_usage` lines every 2 steps. Ends normally.", 38),
    Case("jax_leak_loggers_stopped", H7, ["wide500", "apps"],
         stop_loggers_at("jax_train", "--leak --steps 140 --period 0.12 --warm-gib 2 --leak-mib 64 --onset 25 "
                         "--every 2", True, step=90),
         "leak", ["leak"], "linear",
         "JAX: each step's activations kept from step 25 (64 MiB a step); memory_stats() every 2 steps; the GPU "
         "loggers stop at step 90 while the job goes on to step 140 and ends normally.", 34),
    Case("cache_growth_loguru_exit", H7, ["ms250", "apps"],
         simple("cache_growth", "--steps 85 --period 0.13 --grow-mib 14 --style loguru", False),
         "cache_growth", ["cache_growth"], None,
         "Each step's temporary 14 MiB larger than the last: reserved and nvidia-smi grow, allocated flat; loguru "
         "lines. Ends normally.", 25),
    Case("two_procs_tqdm_loguru_exit", H7, ["apps", "wide1"],
         two_procs("--steps 110 --period 0.15 --warm-gib 4 --style tqdm",
                   "linear_late", "--steps 70 --period 0.15 --warm-gib 1 --flat 12 --leak-mib 96 --style loguru",
                   b_after_step=10),
         "leak", ["leak"], "linear",
         "Two processes on one GPU: a flat 4 GiB trainer with a tqdm bar (a.log) and a second job (b.log, loguru) "
         "keeping 96 MiB a step from its step 13; both end normally.", 32),
    Case("crashloop_mmengine_oom_x2", H7, ["wide1", "dmon"],
         crash_loop("leak_oom", "--steps 400 --period 0.1 --fraction 0.06 --warm-gib 1 --leak-mib 128 --onset 8 "
                    "--style mmengine --every 2", runs=2, gap=2.0),
         "leak", ["leak", "gpu_oom"], "linear",
         "A crash loop of two runs of a job keeping 128 MiB a step from step 8 under a 6 % cap; mmengine lines "
         "every 2 steps; each run dies of a CUDA OOM.", 36, timeout=100),
    Case("short_leak_loguru_exit", H7, ["wide1", "used5"],
         simple("linear_late", "--steps 14 --period 0.4 --warm-gib 1 --flat 3 --leak-mib 640 --style loguru", True),
         "leak", ["leak"], "linear",
         "A short job: from step 4 each step keeps 640 MiB; it ends normally after step 14 (about 6 s), still "
         "growing; loguru lines; a 5 s `timestamp, memory.used` log beside a 1 s one.", 22),
    Case("grad_accum_tqdm_sigkill", H7, ["wide500", "dmon_mu"],
         kill_at("grad_accum", "--steps 400 --period 0.13 --accum 4 --micro-mib 384 --style tqdm", False, step=70),
         "no_leak", [], None,
         "Gradient accumulation over 4 micro-batches of 384 MiB, freed at each optimizer step; a tqdm bar; killed "
         "with SIGKILL after step 70.", 24),
]
CASES["heldout7"] = HELDOUT7


# ---- held-out set 8 (sixth session): four print styles no recording used before (Composer's console logger,
# an axolotl HF Trainer dict, torchtitan's colored metrics line, detectron2's CommonMetricPrinter), each with
# a leak and a healthy job; written before the sixth session's rules were settled, run once after its merges
H8 = "heldout8"
HELDOUT8 = [
    Case("composer_linear_leak_sigkill", H8, ["wide1", "apps"],
         kill_at("linear_late", "--steps 400 --period 0.12 --warm-gib 2 --flat 15 --leak-mib 96 --style composer "
                 "--every 2", True, step=100),
         "leak", ["leak"], "linear",
         "A hook keeps 96 MiB a step from step 16; Composer's console blocks every 2 batches (`Train "
         "memory/allocated_mem: 2.1475`, bare GB of 1e9 bytes, no clock, the batch on the block's first line); "
         "killed with SIGKILL after step 100.", 26),
    Case("composer_flat_exit", H8, ["ms250", "dmon"],
         simple("flat", "--steps 90 --period 0.12 --warm-gib 6 --style composer --every 3", False),
         "no_leak", [], None,
         "A fixed 6 GiB footprint; Composer's console blocks every 3 batches. Ends normally.", 24),
    Case("axolotl_leak_oom", H8, ["wide500", "apps"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.07 --warm-gib 1 --leak-mib 128 --onset 12 "
                "--style axolotl", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Predictions kept from step 12 (128 MiB a step) under a 7 % cap until a CUDA OOM; HF Trainer log dicts "
         "with axolotl's memory keys (peaks reset each log, reserved live), no clock, no step.", 26),
    Case("axolotl_warmup_exit", H8, ["wide1", "used5"],
         simple("warmup_plateau", "--steps 90 --period 0.13 --ramp 25 --peak-gib 9 --style axolotl --every 2", False),
         "no_leak", [], None,
         "Curriculum warm-up to 9 GiB over 25 steps, then flat; axolotl log dicts every 2 steps; a 5 s "
         "`timestamp, memory.used` log. Ends normally.", 25),
    Case("torchtitan_staircase_sigkill", H8, ["wide1", "dmon"],
         kill_at("staircase", "--steps 400 --period 0.12 --warm-gib 2 --stair-mib 384 --stair-every 15 "
                 "--style torchtitan", True, step=95),
         "leak", ["leak"], "step",
         "Every 15 steps a 384 MiB snapshot kept in a list; torchtitan's metrics line in its default colors "
         "(`memory: 2.42GiB(3.02%)`, the peak reserved since the last line); killed with SIGKILL after step 95.",
         26, stair_every=15),
    Case("torchtitan_eval_spikes_exit", H8, ["ms250", "apps"],
         simple("eval_spikes", "--steps 90 --period 0.13 --warm-gib 3 --eval-every 15 --eval-len 3 --spike-gib 4 "
                "--style torchtitan", False),
         "no_leak", [], None,
         "A 3 GiB footprint with a 4 GiB evaluation every 15 steps, kept in the cache; torchtitan lines. Ends "
         "normally.", 25),
    Case("detectron2_slow_noisy_exit", H8, ["wide1", "dmon"],
         simple("slow_noisy", "--steps 300 --period 0.1 --warm-gib 2 --noise-mib 256 --leak-mib 32 --onset 50 "
                "--style detectron2 --every 5", True),
         "leak", ["leak"], "linear",
         "A 2 GiB footprint under noisy batches (0-256 MiB a step), 32 MiB kept a step from step 50; detectron2's "
         "`max_mem: NM` (the running peak allocated, never reset) every 5 iterations, a year-less clock. Ends "
         "normally.", 38),
    Case("detectron2_flat_sigkill", H8, ["wide500", "apps"],
         kill_at("flat", "--steps 400 --period 0.12 --warm-gib 5 --style detectron2 --every 5", False, step=80),
         "no_leak", [], None,
         "A fixed 5 GiB footprint; detectron2 lines every 5 iterations; killed with SIGKILL after step 80.", 24),
    Case("cache_growth_composer_exit", H8, ["wide1", "apps"],
         simple("cache_growth", "--steps 85 --period 0.13 --grow-mib 14 --style composer", False),
         "cache_growth", ["cache_growth"], None,
         "Each step's temporary 14 MiB larger than the last: reserved and nvidia-smi grow, allocated flat; "
         "Composer's console blocks. Ends normally.", 25),
    Case("jax_leak_oom_every3", H8, ["wide1", "apps"],
         simple("jax_train", "--leak --steps 400 --period 0.12 --fraction 0.08 --warm-gib 1 --leak-mib 192 "
                "--onset 15 --every 3", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "JAX: each step's activations kept from step 15 (192 MiB a step) until XLA runs out of memory "
         "(RESOURCE_EXHAUSTED) under an 8 % cap; memory_stats() every 3 steps.", 34),
    Case("two_procs_composer_axolotl_exit", H8, ["apps", "wide1"],
         two_procs("--steps 100 --period 0.15 --warm-gib 3 --style composer",
                   "linear_late", "--steps 60 --period 0.15 --warm-gib 1 --flat 10 --leak-mib 128 --style axolotl",
                   b_after_step=10),
         "leak", ["leak"], "linear",
         "Two processes on one GPU: a flat 3 GiB trainer with Composer blocks (a.log) and a second job (b.log, "
         "axolotl dicts) keeping 128 MiB a step from its step 11; both end normally.", 32),
    Case("host_kill_then_torchtitan_leak_oom", H8, ["wide500", "apps", "dmon"],
         host_kill_then("--steps 400 --period 0.12 --host-mib 48 --style detectron2", limit="2G", fallback_step=150,
                        gap=4.0, kind="leak_oom", args="--steps 400 --period 0.12 --fraction 0.07 --warm-gib 1 "
                        "--leak-mib 128 --onset 10 --style torchtitan"),
         "leak", ["leak", "gpu_oom"], "linear",
         "A job of pinned host batches (48 MiB a step) in a 2 GiB memory cgroup until the kernel's OOM killer ends "
         "it (job1.log, detectron2 lines); 4 s later a second job (job2.log, torchtitan lines) keeps 128 MiB a step "
         "from step 10 under a 7 % cap until a CUDA OOM. dmesg files taken right after.", 48, kernel=True,
         timeout=120),
    Case("crashloop_composer_oom_x2", H8, ["wide500", "apps"],
         crash_loop("leak_oom", "--steps 400 --period 0.1 --fraction 0.06 --warm-gib 1 --leak-mib 160 --onset 6 "
                    "--style composer --every 2", runs=2, gap=2.0),
         "leak", ["leak", "gpu_oom"], "linear",
         "A crash loop of two runs of a job keeping 160 MiB a step from step 6 under a 6 % cap; Composer blocks "
         "every 2 batches; each run dies of a CUDA OOM.", 36, timeout=100),
    Case("residual_worker_detectron2_sigkill", H8, ["apps2", "wide1"],
         residual("--steps 400 --period 0.2 --warm-gib 3 --worker-gib 6 --style detectron2 --every 2", kill_step=30,
                  hold=8.0),
         "leak", ["residual_process"], None,
         "A trainer (3 GiB) with an eval worker process holding 6 GiB; the trainer is SIGKILLed after step 30 and "
         "the orphaned worker keeps its memory for 8 s until it is killed too; detectron2 lines.", 30),
    Case("short_leak_torchtitan_exit", H8, ["wide1", "used5"],
         simple("linear_late", "--steps 14 --period 0.4 --warm-gib 1 --flat 3 --leak-mib 768 --style torchtitan",
                True),
         "leak", ["leak"], "linear",
         "A short job: from step 4 each step keeps 768 MiB; it ends normally after step 14 (about 6 s), still "
         "growing; torchtitan lines; a 5 s `timestamp, memory.used` log beside a 1 s one.", 22),
    Case("grad_accum_axolotl_sigkill", H8, ["wide500", "dmon_mu"],
         kill_at("grad_accum", "--steps 400 --period 0.13 --accum 4 --micro-mib 384 --style axolotl", False, step=70),
         "no_leak", [], None,
         "Gradient accumulation over 4 micro-batches of 384 MiB, freed at each optimizer step; axolotl log dicts; "
         "killed with SIGKILL after step 70.", 24),
]
CASES["heldout8"] = HELDOUT8


# ---- held-out set 9 (eighth session): two print styles no recording used before (fairseq's progress line with
# `gb_free`, the device's total minus the peak allocated; torch.cuda.memory_summary() tables logged every few
# steps) and a logger none used (`nvidia-smi -q -d MEMORY,PIDS -l 1`); written before the set was run, run once
# after the eighth session's merges
H9 = "heldout9"
HELDOUT9 = [
    Case("fairseq_linear_leak_sigkill", H9, ["q1", "apps"],
         kill_at("linear_late", "--steps 400 --period 0.12 --warm-gib 2 --flat 20 --leak-mib 64 --style fairseq "
                 "--every 5", True, step=110),
         "leak", ["leak"], "linear",
         "A hook keeps 64 MiB a step from step 21; fairseq's progress line every 5 updates (`gb_free=75.3`: the "
         "device's total GiB minus the peak allocated); killed with SIGKILL after step 110.", 28),
    Case("fairseq_flat_exit", H9, ["wide1", "q1"],
         simple("flat", "--steps 100 --period 0.12 --warm-gib 7 --style fairseq --every 5", False),
         "no_leak", [], None,
         "A fixed 7 GiB footprint; fairseq's progress line every 5 updates. Ends normally.", 24),
    Case("summary_staircase_exit", H9, ["wide500", "dmon"],
         simple("staircase", "--steps 140 --period 0.12 --warm-gib 2 --stair-mib 512 --stair-every 20 "
                "--style summary --every 10", True),
         "leak", ["leak"], "step",
         "Every 20 steps a 512 MiB snapshot kept in a list; torch.cuda.memory_summary() logged every 10 steps. "
         "Ends normally.", 30, stair_every=20),
    Case("summary_warmup_exit", H9, ["q1", "apps"],
         simple("warmup_plateau", "--steps 100 --period 0.12 --ramp 20 --peak-gib 8 --style summary --every 10", False),
         "no_leak", [], None,
         "Curriculum warm-up to 8 GiB over 20 steps, then flat; memory_summary() every 10 steps. Ends normally.", 25),
    Case("fairseq_leak_oom", H9, ["wide1", "q1"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.07 --warm-gib 1 --leak-mib 128 --onset 15 "
                "--style fairseq --every 2", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Predictions kept from step 15 (128 MiB a step) under a 7 % cap until a CUDA OOM; fairseq lines every 2 "
         "updates.", 26),
    Case("summary_leak_oom_sparse", H9, ["apps", "used5"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.07 --warm-gib 1 --leak-mib 128 --onset 8 "
                "--style summary --every 10", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Predictions kept from step 8 (128 MiB a step) under a 7 % cap until a CUDA OOM; memory_summary() every 10 "
         "steps; a 5 s `timestamp, memory.used` log.", 26),
    Case("fairseq_slow_noisy_exit", H9, ["wide1", "dmon"],
         simple("slow_noisy", "--steps 300 --period 0.1 --warm-gib 3 --noise-mib 320 --leak-mib 24 --onset 40 "
                "--style fairseq --every 10", True),
         "leak", ["leak"], "linear",
         "A 3 GiB footprint under noisy batches (0-320 MiB a step), 24 MiB kept a step from step 40; fairseq lines "
         "every 10 updates. Ends normally.", 38),
    Case("summary_cache_growth_exit", H9, ["wide1", "apps"],
         simple("cache_growth", "--steps 85 --period 0.13 --grow-mib 16 --style summary --every 5", False),
         "cache_growth", ["cache_growth"], None,
         "Each step's temporary 16 MiB larger than the last: reserved and nvidia-smi grow, allocated flat; "
         "memory_summary() every 5 steps (current allocated and reserved). Ends normally.", 25),
    Case("summary_eval_spikes_sigkill", H9, ["q1", "wide500"],
         kill_at("eval_spikes", "--steps 400 --period 0.13 --warm-gib 3 --eval-every 15 --eval-len 3 --spike-gib 4 "
                 "--style summary --every 5", False, step=80),
         "no_leak", [], None,
         "A 3 GiB footprint with a 4 GiB evaluation every 15 steps, kept in the cache; memory_summary() every 5 "
         "steps; killed with SIGKILL after step 80.", 26),
    Case("two_procs_fairseq_summary_exit", H9, ["apps", "q1"],
         two_procs("--steps 100 --period 0.15 --warm-gib 3 --style fairseq --every 5",
                   "linear_late", "--steps 60 --period 0.15 --warm-gib 1 --flat 10 --leak-mib 128 --style summary "
                   "--every 5", b_after_step=10),
         "leak", ["leak"], "linear",
         "Two processes on one GPU: a flat 3 GiB trainer with fairseq lines (a.log) and a second job (b.log, "
         "memory_summary() every 5 steps) keeping 128 MiB a step from its step 11; both end normally.", 32),
    Case("crashloop_fairseq_oom_x3", H9, ["wide500", "apps"],
         crash_loop("leak_oom", "--steps 400 --period 0.1 --fraction 0.05 --warm-gib 1 --leak-mib 160 --onset 5 "
                    "--style fairseq --every 2", runs=3, gap=2.0),
         "leak", ["leak", "gpu_oom"], "linear",
         "A crash loop of three runs of a job keeping 160 MiB a step from step 5 under a 5 % cap; fairseq lines "
         "every 2 updates; each run dies of a CUDA OOM.", 44, timeout=120),
    Case("host_kill_then_fairseq_leak_oom", H9, ["wide500", "apps", "dmon"],
         host_kill_then("--steps 400 --period 0.12 --host-mib 48 --style summary --every 10", limit="2G",
                        fallback_step=150, gap=4.0, kind="leak_oom", args="--steps 400 --period 0.12 --fraction 0.07 "
                        "--warm-gib 1 --leak-mib 128 --onset 10 --style fairseq --every 2"),
         "leak", ["leak", "gpu_oom"], "linear",
         "A job of pinned host batches (48 MiB a step) in a 2 GiB memory cgroup until the kernel's OOM killer ends "
         "it (job1.log, memory_summary() tables); 4 s later a second job (job2.log, fairseq lines) keeps 128 MiB a "
         "step from step 10 under a 7 % cap until a CUDA OOM. dmesg files taken right after.", 48, kernel=True,
         timeout=120),
    Case("residual_worker_fairseq_sigkill", H9, ["apps2", "q1"],
         residual("--steps 400 --period 0.2 --warm-gib 3 --worker-gib 6 --style fairseq --every 2", kill_step=30,
                  hold=8.0),
         "leak", ["residual_process"], None,
         "A trainer (3 GiB) with an eval worker process holding 6 GiB; the trainer is SIGKILLed after step 30 and "
         "the orphaned worker keeps its memory for 8 s until it is killed too; fairseq lines.", 30),
    Case("short_leak_fairseq_exit", H9, ["q1", "used5"],
         simple("linear_late", "--steps 14 --period 0.4 --warm-gib 1 --flat 3 --leak-mib 640 --style fairseq", True),
         "leak", ["leak"], "linear",
         "A short job: from step 4 each step keeps 640 MiB; it ends normally after step 14 (about 6 s), still "
         "growing; fairseq lines; `nvidia-smi -q` each second and a 5 s `timestamp, memory.used` log.", 22),
    Case("grad_accum_summary_sigkill", H9, ["wide1", "dmon_mu"],
         kill_at("grad_accum", "--steps 400 --period 0.13 --accum 4 --micro-mib 384 --style summary --every 4", False,
                 step=70),
         "no_leak", [], None,
         "Gradient accumulation over 4 micro-batches of 384 MiB, freed at each optimizer step; memory_summary() "
         "every 4 steps; killed with SIGKILL after step 70.", 24),
    Case("summary_slow_leak_q1_exit", H9, ["q1", "wide1"],
         simple("linear_late", "--steps 200 --period 0.1 --warm-gib 4 --flat 60 --leak-mib 24 --style summary "
                "--every 10", True),
         "leak", ["leak"], "linear",
         "A 4 GiB footprint, 24 MiB kept a step from step 61; memory_summary() every 10 steps; `nvidia-smi -q` "
         "each second (whole-second stamps). Ends normally.", 30),
]
CASES["heldout9"] = HELDOUT9


# ---- held-out set 10 (ninth session): two print styles no recording used before (Lightning's progress bar with
# `alloc_mb`/`reserved_mb` logged to it, tqdm's 3-digit numbers such as `2.11e+3`, one physical line an epoch;
# a script printing TensorFlow's get_memory_info() dict, `{'current': N, 'peak': N}` in bytes, after
# `gpu memory:`), the cases of set 9 otherwise; written before the set was recorded, run once after the ninth
# session's merges
H10 = "heldout10"
HELDOUT10 = [
    Case("lightning_linear_leak_sigkill", H10, ["q1", "apps"],
         kill_at("linear_late", "--steps 400 --period 0.12 --warm-gib 2 --flat 20 --leak-mib 64 --style lightning", True, step=110),
         "leak", ["leak"], "linear",
         "A hook keeps 64 MiB a step from step 21; Lightning's progress bar refreshed each step (`alloc_mb=2.11e+3, "
         "reserved_mb=2.56e+3` in its postfix, one physical line an epoch of 100 steps); killed with SIGKILL after step "
         "110.", 28),
    Case("lightning_flat_exit", H10, ["wide1", "q1"],
         simple("flat", "--steps 100 --period 0.12 --warm-gib 7 --style lightning", False),
         "no_leak", [], None,
         "A fixed 7 GiB footprint; Lightning's progress bar refreshed each step. Ends normally.", 24),
    Case("tfinfo_staircase_exit", H10, ["wide500", "dmon"],
         simple("staircase", "--steps 140 --period 0.12 --warm-gib 2 --stair-mib 512 --stair-every 20 "
                "--style tfinfo --every 10", True),
         "leak", ["leak"], "step",
         "Every 20 steps a 512 MiB snapshot kept in a list; the TF memory-info dict printed every 10 steps. "
         "Ends normally.", 30, stair_every=20),
    Case("tfinfo_warmup_exit", H10, ["q1", "apps"],
         simple("warmup_plateau", "--steps 100 --period 0.12 --ramp 20 --peak-gib 8 --style tfinfo --every 10", False),
         "no_leak", [], None,
         "Curriculum warm-up to 8 GiB over 20 steps, then flat; the TF memory-info dict every 10 steps. Ends normally.", 25),
    Case("lightning_leak_oom", H10, ["wide1", "q1"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.07 --warm-gib 1 --leak-mib 128 --onset 15 "
                "--style lightning", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Predictions kept from step 15 (128 MiB a step) under a 7 % cap until a CUDA OOM; Lightning's bar "
         "refreshed each step.", 26),
    Case("tfinfo_leak_oom_sparse", H10, ["apps", "used5"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.07 --warm-gib 1 --leak-mib 128 --onset 8 "
                "--style tfinfo --every 10", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Predictions kept from step 8 (128 MiB a step) under a 7 % cap until a CUDA OOM; the TF memory-info dict every 10 "
         "steps; a 5 s `timestamp, memory.used` log.", 26),
    Case("lightning_slow_noisy_exit", H10, ["wide1", "dmon"],
         simple("slow_noisy", "--steps 300 --period 0.1 --warm-gib 3 --noise-mib 320 --leak-mib 24 --onset 40 "
                "--style lightning", True),
         "leak", ["leak"], "linear",
         "A 3 GiB footprint under noisy batches (0-320 MiB a step), 24 MiB kept a step from step 40; Lightning's "
         "bar refreshed each step. Ends normally.", 38),
    Case("lightning_cache_growth_exit", H10, ["wide1", "apps"],
         simple("cache_growth", "--steps 85 --period 0.13 --grow-mib 16 --style lightning", False),
         "cache_growth", ["cache_growth"], None,
         "Each step's temporary 16 MiB larger than the last: reserved and nvidia-smi grow, allocated flat; "
         "Lightning's bar refreshed each step (alloc_mb and reserved_mb). Ends normally.", 25),
    Case("tfinfo_eval_spikes_sigkill", H10, ["q1", "wide500"],
         kill_at("eval_spikes", "--steps 400 --period 0.13 --warm-gib 3 --eval-every 15 --eval-len 3 --spike-gib 4 "
                 "--style tfinfo --every 5", False, step=80),
         "no_leak", [], None,
         "A 3 GiB footprint with a 4 GiB evaluation every 15 steps, kept in the cache; the TF memory-info dict every 5 "
         "steps; killed with SIGKILL after step 80.", 26),
    Case("two_procs_lightning_tfinfo_exit", H10, ["apps", "q1"],
         two_procs("--steps 100 --period 0.15 --warm-gib 3 --style lightning",
                   "linear_late", "--steps 60 --period 0.15 --warm-gib 1 --flat 10 --leak-mib 128 --style tfinfo "
                   "--every 5", b_after_step=10),
         "leak", ["leak"], "linear",
         "Two processes on one GPU: a flat 3 GiB trainer with Lightning's bar (a.log) and a second job (b.log, "
         "the TF memory-info dict every 5 steps) keeping 128 MiB a step from its step 11; both end normally.", 32),
    Case("crashloop_lightning_oom_x3", H10, ["wide500", "apps"],
         crash_loop("leak_oom", "--steps 400 --period 0.1 --fraction 0.05 --warm-gib 1 --leak-mib 160 --onset 5 "
                    "--style lightning", runs=3, gap=2.0),
         "leak", ["leak", "gpu_oom"], "linear",
         "A crash loop of three runs of a job keeping 160 MiB a step from step 5 under a 5 % cap; Lightning's bar "
         "refreshed each step; each run dies of a CUDA OOM.", 44, timeout=120),
    Case("host_kill_then_lightning_leak_oom", H10, ["wide500", "apps", "dmon"],
         host_kill_then("--steps 400 --period 0.12 --host-mib 48 --style tfinfo --every 10", limit="2G",
                        fallback_step=150, gap=4.0, kind="leak_oom", args="--steps 400 --period 0.12 --fraction 0.07 "
                        "--warm-gib 1 --leak-mib 128 --onset 10 --style lightning"),
         "leak", ["leak", "gpu_oom"], "linear",
         "A job of pinned host batches (48 MiB a step) in a 2 GiB memory cgroup until the kernel's OOM killer ends "
         "it (job1.log, the TF memory-info dict every 10 steps); 4 s later a second job (job2.log, Lightning's bar) keeps 128 MiB a "
         "step from step 10 under a 7 % cap until a CUDA OOM. dmesg files taken right after.", 48, kernel=True,
         timeout=120),
    Case("residual_worker_lightning_sigkill", H10, ["apps2", "q1"],
         residual("--steps 400 --period 0.2 --warm-gib 3 --worker-gib 6 --style lightning", kill_step=30,
                  hold=8.0),
         "leak", ["residual_process"], None,
         "A trainer (3 GiB) with an eval worker process holding 6 GiB; the trainer is SIGKILLed after step 30 and "
         "the orphaned worker keeps its memory for 8 s until it is killed too; Lightning's bar.", 30),
    Case("short_leak_lightning_exit", H10, ["q1", "used5"],
         simple("linear_late", "--steps 14 --period 0.4 --warm-gib 1 --flat 3 --leak-mib 640 --style lightning", True),
         "leak", ["leak"], "linear",
         "A short job: from step 4 each step keeps 640 MiB; it ends normally after step 14 (about 6 s), still "
         "growing; Lightning's bar; `nvidia-smi -q` each second and a 5 s `timestamp, memory.used` log.", 22),
    Case("grad_accum_tfinfo_sigkill", H10, ["wide1", "dmon_mu"],
         kill_at("grad_accum", "--steps 400 --period 0.13 --accum 4 --micro-mib 384 --style tfinfo --every 4", False,
                 step=70),
         "no_leak", [], None,
         "Gradient accumulation over 4 micro-batches of 384 MiB, freed at each optimizer step; the TF memory-info dict "
         "every 4 steps; killed with SIGKILL after step 70.", 24),
    Case("tfinfo_slow_leak_q1_exit", H10, ["q1", "wide1"],
         simple("linear_late", "--steps 200 --period 0.1 --warm-gib 4 --flat 60 --leak-mib 24 --style tfinfo "
                "--every 10", True),
         "leak", ["leak"], "linear",
         "A 4 GiB footprint, 24 MiB kept a step from step 61; the TF memory-info dict every 10 steps; `nvidia-smi -q` "
         "each second (whole-second stamps). Ends normally.", 30),
]
CASES["heldout10"] = HELDOUT10


# ---- held-out set 11 (tenth session): two print styles no recording used before (ultralytics' YOLO training bar:
# a header line each epoch and a `GPU_mem` column of reserved memory as `3.06G`, refreshed with `\r`; Keras 3's
# progress bar in a file: one line an update with its ANSI codes, `gpu_alloc_mb` / `gpu_reserved_mb` among the
# metrics), one JAX job, the endings and loggers of sets 9 and 10; written before the set was recorded, run once
# after the tenth session's merges
H11 = "heldout11"
HELDOUT11 = [
    Case("ultra_linear_leak_sigkill", H11, ["wide500", "apps"],
         kill_at("linear_late", "--steps 400 --period 0.12 --warm-gib 2 --flat 20 --leak-mib 64 --style ultralytics",
                 True, step=110),
         "leak", ["leak"], "linear",
         "A hook keeps 64 MiB a step from step 21; ultralytics' training bar (reserved memory in its `GPU_mem` "
         "column, `\\r` refreshes, 50 batches an epoch); killed with SIGKILL after step 110.", 28),
    Case("ultra_flat_exit", H11, ["q1", "dmon"],
         simple("flat", "--steps 100 --period 0.12 --warm-gib 6 --style ultralytics", False),
         "no_leak", [], None,
         "A fixed 6 GiB footprint; ultralytics' training bar. Ends normally.", 24),
    Case("keras_staircase_exit", H11, ["wide1", "apps"],
         simple("staircase", "--steps 140 --period 0.12 --warm-gib 2 --stair-mib 512 --stair-every 20 "
                "--style keras", True),
         "leak", ["leak"], "step",
         "Every 20 steps a 512 MiB snapshot kept in a list; Keras 3's progress bar in a file (a line an update, "
         "ANSI codes, gpu_alloc_mb and gpu_reserved_mb). Ends normally.", 30, stair_every=20),
    Case("keras_warmup_exit", H11, ["script1", "apps"],
         simple("warmup_plateau", "--steps 100 --period 0.12 --ramp 20 --peak-gib 8 --style keras", False),
         "no_leak", [], None,
         "Curriculum warm-up to 8 GiB over 20 steps, then flat; Keras 3's progress bar; a headerless "
         "`timestamp, index, memory.used, memory.total` log each second. Ends normally.", 25),
    Case("ultra_leak_oom", H11, ["wide1", "dmon"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.07 --warm-gib 1 --leak-mib 128 --onset 15 "
                "--style ultralytics", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Predictions kept from step 15 (128 MiB a step) under a 7 % cap until a CUDA OOM; ultralytics' bar.", 26),
    Case("keras_leak_oom_sparse", H11, ["apps", "used5"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.07 --warm-gib 1 --leak-mib 128 --onset 8 "
                "--style keras --every 5", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Predictions kept from step 8 (128 MiB a step) under a 7 % cap until a CUDA OOM; Keras' bar every 5 "
         "steps; a 5 s `timestamp, memory.used` log.", 26),
    Case("ultra_slow_noisy_exit", H11, ["wide1", "q1"],
         simple("slow_noisy", "--steps 300 --period 0.1 --warm-gib 3 --noise-mib 320 --leak-mib 24 --onset 40 "
                "--style ultralytics", True),
         "leak", ["leak"], "linear",
         "A 3 GiB footprint under noisy batches (0-320 MiB a step), 24 MiB kept a step from step 40; ultralytics' "
         "bar (reserved memory only). Ends normally.", 38),
    Case("keras_cache_growth_exit", H11, ["wide1", "apps"],
         simple("cache_growth", "--steps 85 --period 0.13 --grow-mib 16 --style keras", False),
         "cache_growth", ["cache_growth"], None,
         "Each step's temporary 16 MiB larger than the last: reserved and nvidia-smi grow, allocated flat; Keras' "
         "bar with gpu_alloc_mb and gpu_reserved_mb. Ends normally.", 25),
    Case("ultra_eval_spikes_sigkill", H11, ["q1", "wide500"],
         kill_at("eval_spikes", "--steps 400 --period 0.13 --warm-gib 3 --eval-every 15 --eval-len 3 --spike-gib 4 "
                 "--style ultralytics", False, step=80),
         "no_leak", [], None,
         "A 3 GiB footprint with a 4 GiB evaluation every 15 steps, kept in the cache; ultralytics' bar; killed "
         "with SIGKILL after step 80.", 26),
    Case("two_procs_ultra_keras_exit", H11, ["apps", "q1"],
         two_procs("--steps 100 --period 0.15 --warm-gib 3 --style ultralytics",
                   "linear_late", "--steps 60 --period 0.15 --warm-gib 1 --flat 10 --leak-mib 128 --style keras",
                   b_after_step=10),
         "leak", ["leak"], "linear",
         "Two processes on one GPU: a flat 3 GiB trainer with ultralytics' bar (a.log) and a second job (b.log, "
         "Keras' bar) keeping 128 MiB a step from its step 11; both end normally.", 32),
    Case("crashloop_keras_oom_x3", H11, ["wide500", "apps"],
         crash_loop("leak_oom", "--steps 400 --period 0.1 --fraction 0.05 --warm-gib 1 --leak-mib 160 --onset 5 "
                    "--style keras", runs=3, gap=2.0),
         "leak", ["leak", "gpu_oom"], "linear",
         "A crash loop of three runs of a job keeping 160 MiB a step from step 5 under a 5 % cap; Keras' bar; each "
         "run dies of a CUDA OOM.", 44, timeout=120),
    Case("host_kill_then_ultra_leak_oom", H11, ["wide500", "apps", "dmon"],
         host_kill_then("--steps 400 --period 0.12 --host-mib 48 --style keras", limit="2G",
                        fallback_step=150, gap=4.0, kind="leak_oom", args="--steps 400 --period 0.12 --fraction 0.07 "
                        "--warm-gib 1 --leak-mib 128 --onset 10 --style ultralytics"),
         "leak", ["leak", "gpu_oom"], "linear",
         "A job of pinned host batches (48 MiB a step) in a 2 GiB memory cgroup until the kernel's OOM killer ends "
         "it (job1.log, Keras' bar); 4 s later a second job (job2.log, ultralytics' bar) keeps 128 MiB a step from "
         "step 10 under a 7 % cap until a CUDA OOM. dmesg files taken right after.", 48, kernel=True, timeout=120),
    Case("residual_worker_keras_sigkill", H11, ["apps2", "q1"],
         residual("--steps 400 --period 0.2 --warm-gib 3 --worker-gib 6 --style keras", kill_step=30, hold=8.0),
         "leak", ["residual_process"], None,
         "A trainer (3 GiB) with an eval worker process holding 6 GiB; the trainer is SIGKILLed after step 30 and "
         "the orphaned worker keeps its memory for 8 s until it is killed too; Keras' bar.", 30),
    Case("jax_leak_oom_q1", H11, ["q1", "apps"],
         simple("jax_train", "--leak --steps 400 --period 0.12 --fraction 0.07 --warm-gib 1 --leak-mib 192 "
                "--onset 12 --every 2", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "JAX: each step's activations kept from step 12 (192 MiB a step) until XLA runs out of memory "
         "(RESOURCE_EXHAUSTED) under a 7 % cap; memory_stats() every 2 steps; `nvidia-smi -q` each second.", 34),
    Case("short_leak_keras_exit", H11, ["wide1", "apps"],
         simple("linear_late", "--steps 16 --period 0.4 --warm-gib 1 --flat 3 --leak-mib 640 --style keras", True),
         "leak", ["leak"], "linear",
         "A short job: from step 4 each step keeps 640 MiB; it ends normally after step 16 (about 7 s), still "
         "growing; Keras' bar.", 22),
    Case("ultra_leak_loggers_stopped", H11, ["script1", "apps"],
         stop_loggers_at("linear_late", "--steps 120 --period 0.12 --warm-gib 2 --flat 15 --leak-mib 64 "
                         "--style ultralytics", True, step=70),
         "leak", ["leak"], "linear",
         "A hook keeps 64 MiB a step from step 16; ultralytics' bar (reserved memory); the GPU loggers stop at "
         "step 70 while the job goes on to step 120 and ends normally.", 28),
]
CASES["heldout11"] = HELDOUT11

# ---- held-out set 12 (eleventh session): two print styles no recording used, nanotron's iteration line (memory
# items only on the first iterations and each 10th, sizes in 1000s as `2.15G`, disk sizes beside them named
# `hd_*_memory_tb`) and the PEFT/Accelerate examples' TorchTracemalloc epoch summary (bare MB, no clock), and
# loggers little used so far (classic, ms250, dmon_mu, script5), written before recording
H12 = "heldout12"
HELDOUT12 = [
    Case("nanotron_linear_leak_sigkill", H12, ["wide500", "apps"],
         kill_at("linear_late", "--steps 400 --period 0.12 --warm-gib 2 --flat 20 --leak-mib 64 --style nanotron",
                 True, step=110),
         "leak", ["leak"], "linear",
         "A hook keeps 64 MiB a step from step 21; nanotron's iteration line (cuda_memory_allocated on iterations "
         "1-4 and every 10th); killed with SIGKILL after step 110.", 28),
    Case("tracemalloc_flat_exit", H12, ["classic", "dmon_mu"],
         simple("flat", "--steps 100 --period 0.12 --warm-gib 6 --style tracemalloc", False),
         "no_leak", [], None,
         "A fixed 6 GiB footprint; TorchTracemalloc's summary after each 10-step epoch. Ends normally.", 24),
    Case("nanotron_staircase_exit", H12, ["ms250", "apps"],
         simple("staircase", "--steps 140 --period 0.12 --warm-gib 2 --stair-mib 512 --stair-every 20 "
                "--style nanotron", True),
         "leak", ["leak"], "step",
         "Every 20 steps a 512 MiB snapshot kept in a list; nanotron's line (memory every 10th iteration). Ends "
         "normally.", 30, stair_every=20),
    Case("tracemalloc_warmup_exit", H12, ["script5", "apps"],
         simple("warmup_plateau", "--steps 100 --period 0.12 --ramp 20 --peak-gib 8 --style tracemalloc", False),
         "no_leak", [], None,
         "Curriculum warm-up to 8 GiB over 20 steps, then flat; TorchTracemalloc's epoch summary; a headerless "
         "`timestamp, index, memory.used, memory.total` log every 5 s. Ends normally.", 25),
    Case("nanotron_leak_oom", H12, ["wide1", "dmon"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.12 --warm-gib 1 --leak-mib 128 --onset 15 "
                "--style nanotron", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Predictions kept from step 15 (128 MiB a step) under a 12 % cap until a CUDA OOM; nanotron's line.", 30),
    Case("tracemalloc_leak_oom", H12, ["wide1", "apps"],
         simple("leak_oom", "--steps 400 --period 0.12 --fraction 0.10 --warm-gib 1 --leak-mib 96 --onset 8 "
                "--style tracemalloc", True),
         "leak", ["leak", "gpu_oom"], "linear",
         "Predictions kept from step 8 (96 MiB a step) under a 10 % cap until a CUDA OOM; TorchTracemalloc's "
         "summary after each 10-step epoch (the last, unfinished epoch prints none).", 30),
    Case("nanotron_slow_noisy_exit", H12, ["wide1", "q1"],
         simple("slow_noisy", "--steps 300 --period 0.1 --warm-gib 3 --noise-mib 320 --leak-mib 24 --onset 40 "
                "--style nanotron", True),
         "leak", ["leak"], "linear",
         "A 3 GiB footprint under noisy batches (0-320 MiB a step), 24 MiB kept a step from step 40; nanotron's "
         "line. Ends normally.", 38),
    Case("tracemalloc_cache_growth_exit", H12, ["wide1", "apps"],
         simple("cache_growth", "--steps 85 --period 0.13 --grow-mib 16 --style tracemalloc", False),
         "cache_growth", ["cache_growth"], None,
         "Each step's temporary 16 MiB larger than the last: reserved and nvidia-smi grow, allocated flat (its "
         "epoch peaks grow); TorchTracemalloc's summary. Ends normally.", 25),
    Case("nanotron_eval_spikes_sigkill", H12, ["q1", "wide500"],
         kill_at("eval_spikes", "--steps 400 --period 0.13 --warm-gib 3 --eval-every 15 --eval-len 3 --spike-gib 4 "
                 "--style nanotron", False, step=80),
         "no_leak", [], None,
         "A 3 GiB footprint with a 4 GiB evaluation every 15 steps, kept in the cache; nanotron's line; killed "
         "with SIGKILL after step 80.", 26),
    Case("two_procs_nanotron_tracemalloc_exit", H12, ["apps", "classic"],
         two_procs("--steps 100 --period 0.15 --warm-gib 3 --style nanotron",
                   "linear_late", "--steps 60 --period 0.15 --warm-gib 1 --flat 10 --leak-mib 128 "
                   "--style tracemalloc", b_after_step=10),
         "leak", ["leak"], "linear",
         "Two processes on one GPU: a flat 3 GiB trainer with nanotron's line (a.log) and a second job (b.log, "
         "TorchTracemalloc's summary) keeping 128 MiB a step from its step 11; both end normally.", 32),
    Case("crashloop_tracemalloc_oom_x3", H12, ["wide500", "apps"],
         crash_loop("leak_oom", "--steps 400 --period 0.1 --fraction 0.08 --warm-gib 1 --leak-mib 160 --onset 5 "
                    "--style tracemalloc", runs=3, gap=2.0),
         "leak", ["leak", "gpu_oom"], "linear",
         "A crash loop of three runs of a job keeping 160 MiB a step from step 5 under an 8 % cap; "
         "TorchTracemalloc's summary; each run dies of a CUDA OOM.", 50, timeout=120),
    Case("host_kill_then_nanotron_leak_oom", H12, ["wide500", "apps", "dmon"],
         host_kill_then("--steps 400 --period 0.12 --host-mib 48 --style tracemalloc", limit="2G",
                        fallback_step=150, gap=4.0, kind="leak_oom", args="--steps 400 --period 0.12 --fraction 0.10 "
                        "--warm-gib 1 --leak-mib 128 --onset 10 --style nanotron"),
         "leak", ["leak", "gpu_oom"], "linear",
         "A job of pinned host batches (48 MiB a step) in a 2 GiB memory cgroup until the kernel's OOM killer ends "
         "it (job1.log, TorchTracemalloc's summary); 4 s later a second job (job2.log, nanotron's line) keeps "
         "128 MiB a step from step 10 under a 10 % cap until a CUDA OOM. dmesg files taken right after.", 50,
         kernel=True, timeout=120),
    Case("residual_worker_nanotron_sigkill", H12, ["apps2", "q1"],
         residual("--steps 400 --period 0.2 --warm-gib 3 --worker-gib 6 --style nanotron", kill_step=30, hold=8.0),
         "leak", ["residual_process"], None,
         "A trainer (3 GiB) with an eval worker process holding 6 GiB; the trainer is SIGKILLed after step 30 and "
         "the orphaned worker keeps its memory for 8 s until it is killed too; nanotron's line.", 30),
    Case("grad_accum_tracemalloc_exit", H12, ["ms250", "apps"],
         simple("grad_accum", "--steps 90 --period 0.14 --accum 6 --micro-mib 512 --style tracemalloc", False),
         "no_leak", [], None,
         "Gradient accumulation over 6 micro-batches (each graph ~512 MiB of saved activations) before one "
         "backward; no empty_cache(): allocated is a sawtooth, reserved and nvidia-smi stay at the peak; "
         "TorchTracemalloc's summary. Ends normally.", 25),
    Case("short_leak_nanotron_exit", H12, ["wide1", "apps"],
         simple("linear_late", "--steps 16 --period 0.4 --warm-gib 1 --flat 3 --leak-mib 640 --style nanotron", True),
         "leak", ["leak"], "linear",
         "A short job: from step 4 each step keeps 640 MiB; it ends normally after step 16 (about 7 s), still "
         "growing; nanotron's line (memory on iterations 1-4 and 11 only).", 22),
    Case("lru_nanotron_exit", H12, ["script5", "dmon_mu"],
         simple("lru", "--steps 100 --period 0.14 --cap-entries 30 --entry-mib 96 --style nanotron", False),
         "no_leak", [], None,
         "An LRU cache of encoded prompts (96 MiB each, at most 30 entries) fills over the first ~35 steps, then "
         "evicts the oldest entry for each new one: memory rises to ~2.8 GiB and stays; nanotron's line. Ends "
         "normally.", 26),
]
CASES["heldout12"] = HELDOUT12
