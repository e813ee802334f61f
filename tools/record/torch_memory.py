#!/usr/bin/env python3
"""Real runs for PyTorch's own memory tools and the loggers platform teams keep, for sample_logs/.

Runs on a machine with an NVIDIA GPU, PyTorch, Lightning, nvcc and compute-sanitizer:

    python3 torch_memory.py record --out DIR [--only NAME,NAME]     # on the GPU machine
    python3 torch_memory.py readme DIR                              # here: README.md from each truth file

Workloads (`python3 torch_memory.py work KIND`) and what they leave in their folder:

- snapshot_leak: a training loop with `_record_memory_history(max_entries=...)` and two leaks of different kinds
  (each step's features appended to a list; a validation loss computed with autograd on and kept with its
  graph), under a memory cap, printing `torch.cuda.memory_stats()` (an OrderedDict) every 5 steps; at the CUDA
  OOM it prints the stats once more, dumps the snapshot (`_dump_snapshot`) and re-raises.
- snapshot_healthy: the same loop without the two bugs, expandable segments on, `memory_stats()` printed as JSON,
  the snapshot dumped at the normal end.
- snapshot_legacy: the legacy API (`_record_memory_history(True, trace_alloc_max_entries=...)`) and
  `pickle.dump(torch.cuda.memory._snapshot())`, a short run keeping each step's output.
- lightning_leak / lightning_healthy: a LightningModule trained with `DeviceStatsMonitor` and `CSVLogger`; the
  leaking one appends each step's output to a list on the module.
- ddp_gloo_rank1_leak: `torchrun --nproc-per-node 2 --tee 3`, both ranks on the one GPU with the gloo backend
  (NCCL refuses two ranks on one GPU); rank 1 keeps each step's output until its memory cap, then dies of a
  CUDA OOM; rank 0 fails in its next collective (ddp_gloo_healthy, ddp_gloo_both_leak: see INCIDENTS).
- sanitizer_cpp_shared_helper: shared_helper.cu under `compute-sanitizer --leak-check full`.

Each workload writes what really happened to $GF_TRUTH (JSON lines); `readme` turns that into the folder's
README front matter, so no number there is typed by hand. Leak sites are the allocating source lines marked LEAK-SITE.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))   # tools/: recorder_common.py

from recorder_common import append_row, stop_groups  # noqa: E402

MiB = 2**20
log = logging.getLogger("train")
GPU_QUERY = "timestamp,index,uuid,pci.bus_id,name,memory.total,memory.used,memory.free"
APPS_QUERY = "timestamp,gpu_uuid,pid,process_name,used_memory"


def truth(ev: str, **fields) -> None:
    append_row(os.environ.get("GF_TRUTH"), ev, **fields)


def setup_logging(prefix: str = "") -> None:
    logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                        format=f"%(asctime)s %(levelname)s {prefix}train: %(message)s")


def cap(torch, mib: int) -> None:
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(mib * MiB / total)
    truth("cap", bytes=mib * MiB, total=total)


def mlp(torch, width: int):
    return torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                               torch.nn.ReLU(), torch.nn.Linear(width, width)).cuda()


def step_marker(torch, step: int) -> None:
    torch.cuda.synchronize()
    a, r = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    log.info("[step %d] allocated: %.2f MB, cached: %.2f MB", step, a / MiB, r / MiB)
    truth("step", step=step, allocated=a, reserved=r)


# ---- snapshot workloads ---------------------------------------------------------------------------

def keep_features(store: list, features) -> None:
    store.append(features)  # the bug: each step's features kept on the GPU


def validate(torch, model, x_val, kept: list | None):
    loss = model(x_val).pow(2).mean()  # LEAK-SITE val_graph: computed with autograd on
    if kept is not None:
        kept.append(loss)  # the bug: the loss keeps its graph and the activations it saved
    return loss.item()


def train_step(torch, model, opt, x, features: list | None):
    h = model[0](x)  # LEAK-SITE features: allocated here, kept by keep_features
    if features is not None:
        keep_features(features, h)
    out = model[1:](h)
    loss = out.pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


def snapshot_run(torch, args, leak: bool, stats_as: str) -> None:
    torch.cuda.memory._record_memory_history(max_entries=args.max_entries, stacks="python")
    cap(torch, args.cap_mib)
    width, batch = 2048, 1024
    model = mlp(torch, width)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    warm_cache = torch.empty(256 * MiB // 4, device="cuda")   # made once and kept: footprint, not a leak
    x_val = torch.randn(512, width, device="cuda")
    features: list | None = [] if leak else None
    val_kept: list | None = [] if leak else None
    truth("start", kind=args.kind, torch=torch.__version__, max_entries=args.max_entries, leak=leak,
          features_bytes_per_step=batch * width * 4 if leak else 0)
    log.info("training %d steps, batch %d, width %d", args.steps, batch, width)
    step = 0
    try:
        for step in range(1, args.steps + 1):
            x = torch.randn(batch, width, device="cuda")
            before = torch.cuda.memory_allocated()
            train_step(torch, model, opt, x, features)
            mid = torch.cuda.memory_allocated()
            with torch.enable_grad() if leak else torch.no_grad():
                validate(torch, model, x_val, val_kept)
            after = torch.cuda.memory_allocated()
            del x
            truth("kept", step=step, train=mid - before, val=after - mid)
            step_marker(torch, step)
            if step % 5 == 0:
                print_stats(torch, step, stats_as)
            time.sleep(args.period)
    except torch.OutOfMemoryError:
        truth("oom", step=step)
        print_stats(torch, step, stats_as)
        torch.cuda.memory._dump_snapshot(args.snapshot)
        truth("snapshot", path=args.snapshot, at="oom")
        raise
    _ = warm_cache
    torch.cuda.memory._dump_snapshot(args.snapshot)
    truth("snapshot", path=args.snapshot, at="end")
    log.info("training finished")


def print_stats(torch, step: int, stats_as: str) -> None:
    stats = torch.cuda.memory_stats()
    truth("memory_stats", step=step, **{k: stats.get(k) for k in (
        "allocated_bytes.all.current", "reserved_bytes.all.current", "active_bytes.all.current",
        "num_ooms", "num_alloc_retries")})
    if stats_as == "json":
        log.info("memory_stats step=%d %s", step, json.dumps(stats))
    else:
        log.info("step %d memory_stats: %s", step, stats)   # an OrderedDict: its repr


def snapshot_legacy(torch, args) -> None:
    torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=args.max_entries,
                                             trace_alloc_record_context=True)
    model = mlp(torch, 1024)
    kept = []
    truth("start", kind=args.kind, torch=torch.__version__, max_entries=args.max_entries, leak=True,
          features_bytes_per_step=512 * 1024 * 4)
    for step in range(1, args.steps + 1):
        with torch.no_grad():
            out = model(torch.randn(512, 1024, device="cuda"))  # LEAK-SITE outputs: allocated here
        kept.append(out)  # the bug: each step's output kept
        truth("kept", step=step, train=out.numel() * 4, val=0)
        step_marker(torch, step)
        time.sleep(args.period)
    with open(args.snapshot, "wb") as f:
        pickle.dump(torch.cuda.memory._snapshot(), f)
    truth("snapshot", path=args.snapshot, at="end")
    print("memory_stats:", dict(torch.cuda.memory_stats()), flush=True)


# ---- Lightning ------------------------------------------------------------------------------------

def lightning_run(torch, args, leak: bool) -> None:
    import lightning as L
    from lightning.pytorch.callbacks import DeviceStatsMonitor
    from lightning.pytorch.loggers import CSVLogger

    class Regressor(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048))
            self.outputs = []

        def training_step(self, batch, batch_idx):
            (x,) = batch
            out = self.net(x)  # LEAK-SITE module_outputs: allocated here
            loss = out.pow(2).mean()
            self.log("train_loss", loss)
            if leak:
                self.outputs.append(out)  # the bug: each step's output kept on the module
            time.sleep(args.period)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e-4)

    data = torch.utils.data.TensorDataset(torch.randn(args.steps * 1024, 2048))
    loader = torch.utils.data.DataLoader(data, batch_size=1024)
    truth("start", kind=args.kind, torch=torch.__version__, lightning=L.__version__, leak=leak,
          features_bytes_per_step=1024 * 2048 * 4 if leak else 0)
    trainer = L.Trainer(accelerator="gpu", devices=1, max_epochs=1, callbacks=[DeviceStatsMonitor()],
                        logger=CSVLogger(args.logdir, name="lightning_logs"), log_every_n_steps=1,
                        enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False)
    trainer.fit(Regressor(), loader)
    truth("end", steps=trainer.global_step)


# ---- DDP (gloo, both ranks on one GPU) -----------------------------------------------------------

def ddp_run(torch, args) -> None:
    import datetime as dt
    import torch.distributed as dist
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    dist.init_process_group("gloo", timeout=dt.timedelta(seconds=args.timeout))
    torch.cuda.set_device(0)
    log.info("rank %d local_rank %d pid %d device cuda:0 CUDA_VISIBLE_DEVICES=%s", rank, local_rank, os.getpid(),
             os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"))
    leaking = rank == args.leak_rank or args.leak_rank == -2   # -1: no rank leaks, -2: every rank
    if leaking:
        cap(torch, args.cap_mib)
    model = torch.nn.parallel.DistributedDataParallel(mlp(torch, 2048))
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    truth("start", kind=args.kind, rank=rank, local_rank=local_rank, leak=leaking, torch=torch.__version__)
    kept = []
    for step in range(1, args.steps + 1):
        out = model(torch.randn(1024, 2048, device="cuda"))  # LEAK-SITE rank_outputs: allocated here
        loss = out.pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()            # gradients all-reduced across the ranks
        opt.step()
        if leaking and step >= args.onset:
            kept.append(out)  # the bug: rank 1 keeps each step's output
        torch.cuda.synchronize()
        a, r = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
        log.info("[rank %d] [step %d] allocated: %.2f MB, cached: %.2f MB", rank, step, a / MiB, r / MiB)
        truth("step", step=step, rank=rank, allocated=a, reserved=r)
        time.sleep(args.period)
    dist.destroy_process_group()
    log.info("rank %d finished", rank)


# ---- the recorder ----------------------------------------------------------------------------------

INCIDENTS = {
    "snapshot_leak": (["work", "snapshot_leak", "--steps", "200", "--cap-mib", "1536", "--max-entries", "1500",
                       "--period", "0.1", "--snapshot", "snapshot.pickle"], 90),
    "snapshot_healthy": (["work", "snapshot_healthy", "--steps", "60", "--max-entries", "1500", "--period", "0.1",
                          "--snapshot", "snapshot.pickle"], 60),
    "snapshot_legacy": (["work", "snapshot_legacy", "--steps", "30", "--max-entries", "400", "--period", "0.1",
                         "--snapshot", "snapshot.pickle"], 60),
    "lightning_leak": (["work", "lightning_leak", "--steps", "80", "--period", "0.1", "--logdir", "lightning"], 120),
    "lightning_healthy": (["work", "lightning_healthy", "--steps", "60", "--period", "0.1", "--logdir", "lightning"],
                          120),
    "ddp_gloo_rank1_leak": (["--steps", "200", "--leak-rank", "1"], 150),
    "ddp_gloo_healthy": (["--steps", "60", "--leak-rank", "-1"], 120),   # no rank keeps anything
    # every rank keeps its outputs (a shared bug), each under its own cap
    "ddp_gloo_both_leak": (["--steps", "200", "--leak-rank", "-2"], 150),
    "sanitizer_cpp_shared_helper": ([], 120),
}


class Loggers:
    def __init__(self, folder: Path):
        cmds = {
            "nvidia-smi.csv": ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv", "-lms", "500"],
            "compute-apps.csv": ["sh", "-c", f"while :; do nvidia-smi --query-compute-apps={APPS_QUERY} "
                                             "--format=csv; sleep 0.5; done"],
        }
        self.files = [open(folder / n, "w") for n in cmds]
        self.procs = [subprocess.Popen(c, stdout=f, stderr=subprocess.DEVNULL, start_new_session=True)
                      for c, f in zip(cmds.values(), self.files)]

    def stop(self) -> None:
        stop_groups(self.procs)
        for f in self.files:
            f.close()


def run_one(name: str, out: Path) -> None:
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GF_TRUTH=str(out / f"{name}.jsonl"), PYTHONUNBUFFERED="1")
    if name == "snapshot_healthy":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    args, timeout = INCIDENTS[name]
    t0 = time.time()
    truth_path = Path(env["GF_TRUTH"])
    with open(truth_path, "a") as f:
        f.write(json.dumps({"ev": "recorder_start", "t": t0}) + "\n")
    if name == "sanitizer_cpp_shared_helper":
        exe = out / "shared_helper"
        subprocess.run(["nvcc", "-lineinfo", "-g", "-Xcompiler", "-rdynamic", "-o", str(exe),
                        str(HERE / "shared_helper.cu")], check=True, cwd=folder)
        with open(folder / "sanitizer.txt", "w") as f:
            r = subprocess.run(["compute-sanitizer", "--leak-check", "full", str(exe)], stdout=f,
                               stderr=subprocess.STDOUT, cwd=folder, timeout=timeout)
        rc = r.returncode
    else:
        loggers = Loggers(folder)
        time.sleep(2)
        if name.startswith("ddp_gloo"):
            cmd = ["torchrun", "--nproc-per-node", "2", "--tee", "3", "--log-dir", str(out / f"torchrun-{name}"),
                   str(HERE / "torch_memory.py"), "work", "ddp", "--onset", "10", "--cap-mib", "1200",
                   "--period", "0.15", "--timeout", "30", *args]
        else:
            cmd = [sys.executable, str(HERE / "torch_memory.py"), *args]
        with open(folder / "train.log", "w") as so, open(folder / "stderr.log", "w") as se:
            try:
                rc = subprocess.run(cmd, stdout=so, stderr=se, cwd=folder, env=env, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        time.sleep(4)
        loggers.stop()
    if name.startswith("lightning"):
        csvs = sorted(folder.glob("lightning/lightning_logs/version_*/metrics.csv"))
        if csvs:
            shutil.copy(csvs[-1], folder / "metrics.csv")
        shutil.rmtree(folder / "lightning", ignore_errors=True)
    with open(truth_path, "a") as f:
        f.write(json.dumps({"ev": "recorder_end", "t": time.time(), "exit": rc}) + "\n")
    print(f"{name}: exit {rc} in {time.time() - t0:.1f}s; files: "
          + ", ".join(f"{p.name} {p.stat().st_size}" for p in sorted(folder.iterdir())), flush=True)


def record(out: Path, only: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    names = only or list(INCIDENTS)
    for name in names:
        try:
            run_one(name, out)
        except Exception as e:  # one failed run must not lose the others
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
    env = {}
    for cmd in (["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                ["compute-sanitizer", "--version"], [sys.executable, "-c", "import torch,lightning;"
                                                     "print(torch.__version__, lightning.__version__)"]):
        try:
            env[cmd[0]] = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
        except Exception as e:
            env[cmd[0]] = repr(e)
    (out / "environment.json").write_text(json.dumps(env, indent=1))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--out", required=True)
    r.add_argument("--only", default="")
    w = sub.add_parser("work")
    w.add_argument("kind")
    for opt, typ, default in (("--steps", int, 50), ("--cap-mib", int, 2048), ("--max-entries", int, 1500),
                              ("--period", float, 0.1), ("--snapshot", str, "snapshot.pickle"),
                              ("--logdir", str, "lightning"), ("--onset", int, 10), ("--timeout", int, 30),
                              ("--leak-rank", int, 1)):
        w.add_argument(opt, type=typ, default=default)
    rd = sub.add_parser("readme")
    rd.add_argument("dir")
    args = ap.parse_args(argv)
    if args.cmd == "record":
        record(Path(args.out), [x for x in args.only.split(",") if x])
        return
    if args.cmd == "readme":
        from torch_memory_readme import write_readmes
        write_readmes(Path(args.dir))
        return
    import torch
    if args.kind == "ddp":
        setup_logging()
        ddp_run(torch, args)
        return
    setup_logging()
    if args.kind == "snapshot_leak":
        snapshot_run(torch, args, leak=True, stats_as="repr")
    elif args.kind == "snapshot_healthy":
        snapshot_run(torch, args, leak=False, stats_as="json")
    elif args.kind == "snapshot_legacy":
        snapshot_legacy(torch, args)
    elif args.kind in ("lightning_leak", "lightning_healthy"):
        lightning_run(torch, args, leak=args.kind == "lightning_leak")
    else:
        raise SystemExit(f"unknown workload {args.kind}")


if __name__ == "__main__":
    main()
