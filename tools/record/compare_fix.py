#!/usr/bin/env python3
"""The recorded pair of sample_logs/compare_fix_before and compare_fix_after: one training loop, with
the bug and with its fix, each run under `gpu-forensics record` on a real GPU.

The bug: a monitoring loss on a held-out batch, computed every step outside `torch.no_grad()` and kept
in a list for a running mean (`monitor.append(loss_fn(model(xv), yv))`): no backward ever runs through
it, so each step's autograd graph, with the activations it saved (~96 MiB), stays alive. The fix:
`monitor.append(loss_fn(model(xv), yv).item())`. Markers come from forensics.markers.log_memory, one
per step.

`--truth FILE` writes what really happened (pid, step times, allocated after each step) as JSON, for
the README's numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import torch

from forensics.markers import log_memory


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixed", action="store_true", help="keep the held-out loss as a number (.item()), not the tensor")
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--period", type=float, default=0.8, help="seconds between steps")
    ap.add_argument("--truth")
    args = ap.parse_args()

    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    model = torch.nn.Sequential(torch.nn.Linear(4096, 8192), torch.nn.ReLU(), torch.nn.Linear(8192, 4096)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    xv = torch.randn(2048, 4096, device=dev)   # the held-out batch
    yv = torch.randn(2048, 4096, device=dev)
    monitor: list = []
    steps = []
    t_next = time.monotonic()
    for step in range(1, args.steps + 1):
        x = torch.randn(2048, 4096, device=dev)
        y = torch.randn(2048, 4096, device=dev)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        held_out = torch.nn.functional.mse_loss(model(xv), yv)
        monitor.append(held_out.item() if args.fixed else held_out)
        if step % 10 == 0:
            mean = sum(float(v) for v in monitor[-10:]) / 10
            print(f"step {step} loss {loss.item():.4f} held-out {mean:.4f}", flush=True)
        torch.cuda.synchronize()
        log_memory("train", step=step)
        steps.append({"step": step, "t": time.time(), "allocated": torch.cuda.memory_allocated(dev),
                      "reserved": torch.cuda.memory_reserved(dev)})
        t_next += args.period
        time.sleep(max(0.0, t_next - time.monotonic()))
    if args.truth:
        with open(args.truth, "w") as f:
            json.dump({"pid": os.getpid(), "fixed": args.fixed, "steps": steps,
                       "device": torch.cuda.get_device_name(dev), "torch": torch.__version__}, f)


if __name__ == "__main__":
    main()
