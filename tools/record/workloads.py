#!/usr/bin/env python3
"""PyTorch workloads that really leak GPU (or host) memory, and healthy look-alikes, for sample_logs/.

Run by record.py on a machine with an NVIDIA GPU: `python3 workloads.py KIND [--steps N ...]`.

Each workload
- prints step markers in the project's spine format through python logging on stdout:
  `2026-11-30 03:04:08,405 INFO train: [step 12] allocated: 1234.56 MB, cached: 2048.00 MB`
  (allocated = torch.cuda.memory_allocated() / 2**20, cached = torch.cuda.memory_reserved() / 2**20);
- lets real errors (the CUDA OOM traceback) go to stderr;
- writes what really happened (its pid, each step's time and allocator numbers, the step where the
  leak begins, worker pids) as JSON lines to the file named by $GF_TRUTH. record.py writes the
  incident's README.md from that file, so no number in a README is typed by hand.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tools/: recorder_common.py

from recorder_common import Pacer, append_row  # noqa: E402

MiB = 2**20
GiB = 2**30
log = logging.getLogger("train")


def setup_logging() -> None:
    logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                        format="%(asctime)s %(levelname)s train: %(message)s")


def truth(ev: str, **fields) -> None:
    """Append one fact to the side file ($GF_TRUTH); workers of a workload append to the same file."""
    append_row(os.environ.get("GF_TRUTH"), ev, **fields)


def host_memory() -> dict:
    """This process's resident memory from /proc/self/status, in bytes (pinned buffers show as shmem)."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                    out[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return out


def marker(torch, step: int, **extra) -> None:
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    reserved = torch.cuda.memory_reserved()
    log.info("[step %d] allocated: %.2f MB, cached: %.2f MB", step, allocated / MiB, reserved / MiB)
    truth("step", step=step, allocated=allocated, reserved=reserved, **extra)


def start(torch, args, **fields) -> None:
    props = torch.cuda.get_device_properties(0)
    truth("start", kind=args.kind, period=args.period, steps=args.steps, torch=torch.__version__,
          gpu=props.name, gpu_total=props.total_memory, **fields)


def train_step(torch, model, opt, batch: int, width: int) -> None:
    """One ordinary optimizer step on random data; its memory is freed when it returns."""
    x = torch.randn(batch, width, device="cuda")
    loss = model(x).float().pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def small_model(torch, width: int = 2048):
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width)).cuda()
    return model, torch.optim.SGD(model.parameters(), lr=1e-4)


# ---- leaks -------------------------------------------------------------------------------------

def linear(torch, args) -> None:
    """Each step's logits (4096 x 6400 fp32 = 100 MiB) are appended to a list for an epoch-end
    metric, from step `onset` on, without .detach().cpu(): allocated grows 100 MiB per step."""
    model = torch.nn.Linear(1024, 6400).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    start(torch, args, onset=args.onset)
    log.info("training for %d steps, batch 4096", args.steps)
    epoch_logits = []
    pacer = Pacer(args.period)
    for step in range(1, args.steps + 1):
        x = torch.randn(4096, 1024, device="cuda")
        logits = model(x)
        loss = logits.pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= args.onset:
            if step == args.onset:
                truth("leak_start", step=step)
            epoch_logits.append(logits)          # the bug: keeps every step's output alive
        marker(torch, step)
        pacer.wait()
    log.info("training finished")


def linear_oom(torch, args) -> None:
    """From step `onset` on, a monitoring loss on a fixed batch is computed with autograd on and
    summed without .item(): every step's graph, with the activations it saved, stays alive until
    the process hits its memory cap (set_per_process_memory_fraction) and dies of a CUDA OOM."""
    torch.cuda.set_per_process_memory_fraction(args.fraction)
    width, batch = 4096, 4096
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x_mon = torch.randn(batch, width, device="cuda")
    y_mon = torch.randn(batch, width, device="cuda")
    mse = torch.nn.functional.mse_loss
    cap = int(args.fraction * torch.cuda.get_device_properties(0).total_memory)
    start(torch, args, onset=args.onset, fraction=args.fraction, cap_bytes=cap)
    log.info("training for %d steps, batch %d, memory fraction %.3f", args.steps, batch, args.fraction)
    monitor_total = 0.0
    pacer = Pacer(args.period)
    step = 0
    try:
        for step in range(1, args.steps + 1):
            x = torch.randn(batch, width, device="cuda")
            y = torch.randn(batch, width, device="cuda")
            loss = mse(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if step >= args.onset:
                if step == args.onset:
                    truth("leak_start", step=step)
                    log.info("monitoring loss enabled")
                monitor_total += mse(model(x_mon), y_mon)   # the bug: no torch.no_grad(), no .item()
            marker(torch, step)
            pacer.wait()
    except torch.cuda.OutOfMemoryError:
        truth("oom", step=step, allocated=torch.cuda.memory_allocated(),
              reserved=torch.cuda.memory_reserved())
        raise                                       # the real traceback goes to stderr
    log.info("training finished, monitor loss %.4f", float(monitor_total))


def eval_oom(torch, args) -> None:
    """An evaluation loop (forward only, no backward) that, from step `onset` on, adds each batch's
    loss to a running total without .item() and outside torch.no_grad(): every step's graph, with the
    activations it saved (input, hidden, output and target: 4 x 64 MiB), stays alive until the
    process hits its memory cap (set_per_process_memory_fraction) and dies of a CUDA OOM."""
    torch.cuda.set_per_process_memory_fraction(args.fraction)
    width, batch = 4096, 4096
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width)).cuda().eval()
    mse = torch.nn.functional.mse_loss
    cap = int(args.fraction * torch.cuda.get_device_properties(0).total_memory)
    start(torch, args, onset=args.onset, fraction=args.fraction, cap_bytes=cap)
    log.info("evaluating %d batches of %d, memory fraction %.3f", args.steps, batch, args.fraction)
    total = 0.0
    pacer = Pacer(args.period)
    step = 0
    try:
        for step in range(1, args.steps + 1):
            x = torch.randn(batch, width, device="cuda")
            y = torch.randn(batch, width, device="cuda")
            loss = mse(model(x), y)               # autograd is on: the graph keeps what it saved
            if step >= args.onset:
                if step == args.onset:
                    truth("leak_start", step=step)
                    log.info("warm-up batches done, accumulating the eval loss")
                total += loss                     # the bug: no .item(), no torch.no_grad()
            else:
                total += loss.item()
            marker(torch, step)
            pacer.wait()
    except torch.cuda.OutOfMemoryError:
        truth("oom", step=step, allocated=torch.cuda.memory_allocated(),
              reserved=torch.cuda.memory_reserved())
        raise                                       # the real traceback goes to stderr
    log.info("evaluation finished, mean loss %.4f", float(total) / args.steps)


def preprocess_oom(torch, args) -> None:
    """A GPU feature-preprocessing job (elementwise only: normalize and squash 256 MiB batches) that,
    from step `onset` on, keeps each processed batch in a list on the GPU "to export at the end",
    until the process hits its memory cap and dies of a CUDA OOM."""
    torch.cuda.set_per_process_memory_fraction(args.fraction)
    numel = 64 * MiB                                   # 256 MiB of fp32 a batch
    mean = torch.randn(4096, device="cuda")
    scale = torch.rand(4096, device="cuda") + 0.5
    cap = int(args.fraction * torch.cuda.get_device_properties(0).total_memory)
    start(torch, args, onset=args.onset, fraction=args.fraction, cap_bytes=cap)
    log.info("preprocessing %d batches of %d features, memory fraction %.3f", args.steps, numel, args.fraction)
    processed = []
    checksum = 0.0
    pacer = Pacer(args.period)
    step = 0
    try:
        for step in range(1, args.steps + 1):
            raw = torch.randn(numel // 4096, 4096, device="cuda")
            feats = torch.tanh((raw - mean) * scale)
            checksum += float(feats.sum())
            if step >= args.onset:
                if step == args.onset:
                    truth("leak_start", step=step)
                    log.info("warm-up batches done, keeping features for export")
                processed.append(feats)           # the bug: every processed batch stays on the GPU
            marker(torch, step)
            pacer.wait()
    except torch.cuda.OutOfMemoryError:
        truth("oom", step=step, allocated=torch.cuda.memory_allocated(),
              reserved=torch.cuda.memory_reserved())
        raise                                       # the real traceback goes to stderr
    log.info("preprocessing finished, %d batches kept, checksum %.4f", len(processed), checksum)


def staircase(torch, args) -> None:
    """A new Adam optimizer and LR scheduler are built at every epoch, and each scheduler (holding
    its optimizer and that optimizer's state) is kept in a list: +1 GiB of Adam state per epoch."""
    width = 8192
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width)).cuda()    # 2 x 256 MiB of weights
    per_epoch = args.steps_per_epoch
    epochs = args.steps // per_epoch
    start(torch, args, onset=per_epoch + 1, steps_per_epoch=per_epoch, epochs=epochs)
    schedulers = []
    pacer = Pacer(args.period)
    step = 0
    for epoch in range(1, epochs + 1):
        log.info("epoch %d/%d", epoch, epochs)
        truth("epoch", epoch=epoch, first_step=step + 1)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=per_epoch)
        schedulers.append(sched)                  # the bug: the old ones stay referenced
        for _ in range(per_epoch):
            step += 1
            x = torch.randn(1024, width, device="cuda")
            loss = model(x).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            if step == per_epoch + 1:
                truth("leak_start", step=step)
            marker(torch, step)
            pacer.wait()
    log.info("training finished")


def pin_memory(torch, args) -> None:
    """DataLoader(pin_memory=True) batches of 64 MiB are appended to a replay list: the pinned host
    buffers pile up until the kernel's OOM killer ends the process (record.py runs it inside a small
    memory cgroup). GPU memory stays flat."""
    from torch.utils.data import DataLoader, Dataset

    class RandomImages(Dataset):
        def __len__(self):
            return 1_000_000

        def __getitem__(self, i):
            return torch.randn(4, 1024, 1024)      # 16 MiB a sample, 64 MiB a batch of 4

    # fork, as on Linux by default up to Python 3.13: the dataset class is local to this function
    loader = DataLoader(RandomImages(), batch_size=4, num_workers=2, pin_memory=True,
                        multiprocessing_context="fork")
    model = torch.nn.Linear(1024, 1024).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    start(torch, args, onset=1, batch_bytes=64 * MiB)
    log.info("training for %d steps, batch 4 x 4 x 1024 x 1024, pin_memory=True, 2 workers", args.steps)
    batches = iter(loader)
    truth("leak_start", step=1, worker_pids=[w.pid for w in getattr(batches, "_workers", [])])
    replay = []
    pacer = Pacer(args.period)
    for step in range(1, args.steps + 1):
        batch = next(batches)
        xb = batch.cuda(non_blocking=True)
        loss = model(xb).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        replay.append(batch)                      # the bug: every pinned host batch stays alive
        marker(torch, step, host=host_memory(), pinned=batch.is_pinned())
        pacer.wait()
    log.info("training finished")


def _residual_worker(gib: float) -> None:
    """Runs in a torch.multiprocessing child: takes GPU memory and waits for work that never comes."""
    setup_logging()
    import torch
    buf = torch.empty(int(gib * GiB), dtype=torch.uint8, device="cuda")
    buf.fill_(1)
    torch.cuda.synchronize()
    truth("worker_ready", bytes=buf.numel(), allocated=torch.cuda.memory_allocated())
    log.info("eval worker pid %d ready, holding %.2f MB on cuda:0", os.getpid(), buf.numel() / MiB)
    while True:
        time.sleep(1)


def residual(torch, args) -> None:
    """The trainer starts a torch.multiprocessing (spawn) eval worker that keeps a CUDA buffer; the
    trainer is then SIGKILLed by record.py and the worker lives on, holding its GPU memory."""
    ctx = torch.multiprocessing.get_context("spawn")
    worker = ctx.Process(target=_residual_worker, args=(args.worker_gib,), name="eval-worker")
    worker.start()
    model, opt = small_model(torch)
    start(torch, args, worker_pid=worker.pid, worker_bytes=int(args.worker_gib * GiB))
    log.info("started eval worker pid %d", worker.pid)
    pacer = Pacer(args.period)
    for step in range(1, args.steps + 1):
        train_step(torch, model, opt, 4096, 2048)
        marker(torch, step)
        pacer.wait()
    log.info("training finished")
    worker.terminate()


# ---- healthy look-alikes -----------------------------------------------------------------------

def sawtooth(torch, args) -> None:
    """Predictions (300 MiB a step) are buffered over a 10-step evaluation window, then reduced and
    released with torch.cuda.empty_cache(): memory climbs and returns to baseline every 10 steps."""
    model, opt = small_model(torch)
    start(torch, args, window=10)
    window = []
    pacer = Pacer(args.period)
    for step in range(1, args.steps + 1):
        train_step(torch, model, opt, 4096, 2048)
        window.append(torch.randn(300 * MiB // 4, device="cuda"))
        if step % 10 == 0:
            score = sum(float(t.mean()) for t in window) / len(window)
            window.clear()
            torch.cuda.empty_cache()
            log.info("eval window ending at step %d: score %.4f", step, score)
        marker(torch, step)
        pacer.wait()
    log.info("training finished")


def stable(torch, args) -> None:
    """A large footprint taken at start (weights and a preallocated cache, `--gib` GiB), then flat."""
    model, opt = small_model(torch)
    reserve = torch.empty(int(args.gib * GiB), dtype=torch.uint8, device="cuda")
    reserve.fill_(0)
    start(torch, args, footprint=reserve.numel())
    log.info("preallocated %.0f MB for weights and cache", reserve.numel() / MiB)
    pacer = Pacer(args.period)
    for step in range(1, args.steps + 1):
        train_step(torch, model, opt, 4096, 2048)
        marker(torch, step)
        pacer.wait()
    log.info("training finished")


def warmup(torch, args) -> None:
    """A bounded feature cache fills during the first steps, each step adding less than the one
    before (512 MiB x 0.75^k), and nothing after step 15: growth that flattens, not a leak."""
    model, opt = small_model(torch)
    start(torch, args, fill_steps=15)
    cache = []
    pacer = Pacer(args.period)
    for step in range(1, args.steps + 1):
        train_step(torch, model, opt, 4096, 2048)
        if step <= 15:
            size = int(512 * MiB * 0.75 ** (step - 1)) // 4 * 4
            cache.append(torch.randn(size // 4, device="cuda"))
        marker(torch, step)
        pacer.wait()
    log.info("training finished, %d cache entries", len(cache))


def cache_growth(torch, args) -> None:
    """Batches sorted by length: each step needs a temporary buffer 8 MiB larger than the last, so
    the caching allocator reserves a new segment every step and keeps the smaller freed ones cached.
    allocated at step end is flat; reserved (cached) and nvidia-smi's memory.used grow."""
    model, opt = small_model(torch)
    start(torch, args)
    pacer = Pacer(args.period)
    for step in range(1, args.steps + 1):
        n = (64 + 8 * step) * MiB
        tmp = torch.empty(n // 4, device="cuda")
        tmp.normal_()
        tmp.mul_(0.5)
        del tmp
        train_step(torch, model, opt, 4096, 2048)
        marker(torch, step, temp_bytes=n)
        pacer.wait()
    log.info("training finished")


def alloc_cache(torch, args) -> None:
    """Short, for compute-sanitizer: tensors are freed each step, but the caching allocator keeps the
    segments, and nothing calls empty_cache() before exit."""
    start(torch, args)
    for step in range(1, args.steps + 1):
        a = torch.randn(64 * MiB, device="cuda")      # 256 MiB
        b = a * 2
        total = float(b.sum())
        del a, b
        marker(torch, step, value=total)
    log.info("done, %.2f MB still cached by the allocator at exit", torch.cuda.memory_reserved() / MiB)


KINDS = {f.__name__: f for f in (linear, linear_oom, eval_oom, preprocess_oom, staircase, pin_memory, residual, sawtooth, stable,
                                  warmup, cache_growth, alloc_cache)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=sorted(KINDS))
    p.add_argument("--steps", type=int, default=90)
    p.add_argument("--period", type=float, default=0.3, help="seconds per step")
    p.add_argument("--onset", type=int, default=20, help="first leaking step (linear, *_oom)")
    p.add_argument("--fraction", type=float, default=0.09, help="memory fraction cap (linear_oom)")
    p.add_argument("--steps-per-epoch", type=int, default=12)
    p.add_argument("--worker-gib", type=float, default=6.0)
    p.add_argument("--gib", type=float, default=100.0, help="footprint of `stable`")
    args = p.parse_args(argv)
    setup_logging()
    import torch
    KINDS[args.kind](torch, args)


if __name__ == "__main__":
    main()
