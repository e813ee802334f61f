#!/usr/bin/env python3
"""GPU workloads for the incident corpus (tests/corpus/): real leaks and healthy look-alikes.

    python3 tools/corpus/workloads.py KIND [--steps N --period S --style STYLE ...]

record.py runs each of these in a fork of its own process (torch already imported, CUDA not yet
initialised), with stdout and stderr sent to the case's log files, which is the same as running the
command above with `> train.log 2> stderr.log`.

Every workload
- writes its own step log on stdout in one of several styles (--style, see StepLog);
- lets real errors (the CUDA OOM traceback) go to stderr;
- appends what really happened to the side file named by $GFC_SIDE, one JSON object a line: its pid,
  each step's wall time and torch.cuda.memory_allocated()/memory_reserved(), the bytes its bug keeps
  alive so far (`kept`), the step where the bug starts keeping memory, worker pids, the OOM. The
  truth.json of a case is computed from that file (tools/corpus/truth.py), never typed by hand.
"""
from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import random
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tools/: recorder_common.py

from recorder_common import Pacer, append_row  # noqa: E402

MiB = 2**20
GiB = 2**30


# ---- side file ---------------------------------------------------------------------------------

def side(ev: str, **fields) -> None:
    append_row(os.environ.get("GFC_SIDE"), ev, **fields)


def host_rss() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# ---- step logs in several styles ---------------------------------------------------------------

STYLES = ("spine", "pipe_gb", "bytes_k", "megatron", "deepspeed", "plain", "none",
          # styles of 2026-12-06 (held-out set 2 and the multi-style recording)
          "kv_gb", "tutorial", "fairseq_tail", "phases", "jsonl", "absl",
          # styles of the fifth session (held-out set 7): mmengine's logger, loguru's default format, a tqdm bar
          "mmengine", "loguru", "tqdm",
          # styles of the sixth session (held-out set 8): Composer's console logger, an axolotl HF Trainer dict,
          # torchtitan's metrics line, detectron2's CommonMetricPrinter
          "composer", "axolotl", "torchtitan", "detectron2",
          # styles of the eighth session (held-out set 9): fairseq's progress line (`gb_free`), torch's
          # memory_summary() table logged every few steps
          "fairseq", "summary",
          # styles of the ninth session (held-out set 10): Lightning's progress bar with memory logged to it
          # (tqdm's 3-digit numbers, `2.05e+3`), TensorFlow's get_memory_info() dict printed by the script
          "lightning", "tfinfo",
          # styles of the tenth session (held-out set 11): ultralytics' YOLO training bar (a `GPU_mem` column of
          # reserved memory in `G`, under a header line each epoch), Keras 3's progress bar in a file (one line an
          # update, its ANSI codes kept, a callback's `gpu_alloc_mb` and `gpu_reserved_mb` among the metrics)
          "ultralytics", "keras",
          # styles of the eleventh session (held-out set 12): nanotron's iteration line (its LogItems joined by ` | `,
          # sizes by human_format: 3 significant digits, K/M/G of 1000, no `B`; the memory items only on the first
          # iterations and each checkpoint interval), the PEFT/Accelerate examples' TorchTracemalloc summary (bare
          # MB after each epoch, no clock)
          "nanotron", "tracemalloc")
# A --style may join several with "+" (kv_gb+tutorial+jsonl): the first goes to stdout, each other one to
# its own file <style>.log in --csv-dir, all from the same readings, so the files can be checked to agree.
LOG_FORMATS = {
    "spine": ("%(asctime)s %(levelname)s {name}: %(message)s", None),
    "pipe_gb": ("%(asctime)s | %(levelname)s | %(message)s", None),
    "bytes_k": ("[%(asctime)s] %(message)s", "%Y-%m-%dT%H:%M:%S"),
    "deepspeed": ("[%(asctime)s] [%(levelname)s] [utils.py:802:see_memory_usage] %(message)s", None),
    "kv_gb": ("%(asctime)s - {name} - %(levelname)s - %(message)s", None),
    "fairseq_tail": ("%(asctime)s | %(levelname)s | {name} | %(message)s", "%Y-%m-%d %H:%M:%S"),
    "absl": ("%(levelname).1s%(asctime)s {pid} {name}.py:88] %(message)s", "%m%d %H:%M:%S.%f"),
    # mmengine/logging/logger.py: MMFormatter's "%(asctime)s - %(name)s - %(levelname)s - %(message)s", "%Y/%m/%d %H:%M:%S"
    "mmengine": ("%(asctime)s - mmengine - %(levelname)s - %(message)s", "%Y/%m/%d %H:%M:%S"),
    # loguru's default "{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line} - {message}"
    "loguru": ("%(asctime)s.%(msecs)03d | %(levelname)-8s | __main__:train:{pid_line} - %(message)s", "%Y-%m-%d %H:%M:%S"),
    # torchtitan's logger: `[titan] ` before logging's default asctime (with milliseconds), "root", the level
    "torchtitan": ("[titan] %(asctime)s - root - %(levelname)s - %(message)s", None),
    # detectron2's setup_logger: "[%(asctime)s %(name)s]: " with "%m/%d %H:%M:%S" for the terminal
    "detectron2": ("[%(asctime)s d2.utils.events]: %(message)s", "%m/%d %H:%M:%S"),
    # fairseq_cli/train.py's logging.basicConfig; SimpleProgressBar logs under the tag `train_inner`
    "fairseq": ("%(asctime)s | %(levelname)s | train_inner | %(message)s", "%Y-%m-%d %H:%M:%S"),
    "summary": ("%(asctime)s - {name} - %(levelname)s - %(message)s", None),
    # nanotron/logging.py: "%(asctime)s [%(levelname)s|DP=..|PP=..|TP=..|host]: %(message)s", "%m/%d/%Y %H:%M:%S"
    "nanotron": ("%(asctime)s [%(levelname)s|DP=0|PP=0|TP=0|ip-26-0-160-225]: %(message)s", "%m/%d/%Y %H:%M:%S"),
}
class Formatter(logging.Formatter):
    """logging's Formatter, with %f (microseconds, as glog/absl print them) in a date format."""

    def formatTime(self, record, datefmt=None):
        if datefmt and "%f" in datefmt:
            return datetime.fromtimestamp(record.created).strftime(datefmt)
        return super().formatTime(record, datefmt)


PRINTED = ("megatron", "plain", "tutorial", "phases", "jsonl", "tqdm", "composer", "axolotl", "lightning",
           "tfinfo", "ultralytics", "keras", "tracemalloc")   # print(), no prefix


class StepLog:
    """The step log of a job, in one or several styles. Every call to step() also writes the side file's
    step row; phase() writes the multi-point-per-step lines of the `phases` style."""

    def __init__(self, torch, style: str, every: int = 1, steps: int = 0, name: str = "train", out_dir: str = "."):
        self.torch, self.every, self.steps = torch, max(1, every), steps
        self.styles = style.split("+")
        self.style = self.styles[0]
        self.t_last = self.t0 = time.time()
        self.streams, self.logs = {}, {}
        for i, st in enumerate(self.styles):
            stream = sys.stdout if i == 0 else open(os.path.join(out_dir, f"{st}.log"), "w", buffering=1)
            self.streams[st] = stream
            lg = logging.getLogger(f"{name}.{st}")
            lg.setLevel(logging.INFO)
            lg.propagate = False
            h = logging.StreamHandler(stream)
            fmt, datefmt = LOG_FORMATS.get(st, ("%(asctime)s %(levelname)s %(message)s", None))
            h.setFormatter(Formatter(fmt.format(name=name, pid=os.getpid(), pid_line=142), datefmt))
            lg.addHandler(h)
            self.logs[st] = lg
        self.log = self.logs[self.style]
        self.hooks = []        # extra sinks of each logged reading (TensorBoard)
        self.tm_begin, self.tm_cpu = 0, 0   # the tracemalloc style's epoch start

    def info(self, msg: str, *a) -> None:
        if self.style in PRINTED:
            print(msg % a if a else msg, flush=True)
        elif self.style != "none":
            self.log.info(msg, *a)

    def out(self, st: str, text: str) -> None:
        print(text, file=self.streams[st], flush=True)

    def phase(self, step: int, where: str) -> None:
        """The widely taught `log_memory(step_name)` helper, called at several points of a step."""
        if "phases" in self.styles and (step % self.every == 0 or step == 1):
            a = self.torch.cuda.memory_allocated() / GiB
            r = self.torch.cuda.memory_reserved() / GiB
            self.out("phases", f"[step {step} {where}] Allocated: {a:.2f}GB, Reserved: {r:.2f}GB")

    def step(self, step: int, loss: float | None = None, **extra) -> dict:
        torch = self.torch
        torch.cuda.synchronize()
        a = torch.cuda.memory_allocated()
        r = torch.cuda.memory_reserved()
        row = dict(step=step, allocated=a, reserved=r, **extra)
        side("step", **row)
        if step % self.every == 0 or step == 1:
            for st in self.styles:
                if st == "phases":
                    self.out(st, f"[step {step} after step] Allocated: {a / GiB:.2f}GB, Reserved: {r / GiB:.2f}GB")
                else:
                    self.emit(st, step, a, r, loss, extra)
            for hook in self.hooks:
                hook(step, a, r, loss)
        return row

    def emit(self, s, step, a, r, loss, extra) -> None:
        torch, log = self.torch, self.logs[s]
        loss = 0.0 if loss is None else loss
        if s == "spine":
            more = ""
            if "host_rss" in extra:
                more = f", host rss: {extra['host_rss'] / MiB:.2f} MB"
            log.info("[step %d] allocated: %.2f MB, cached: %.2f MB%s", step, a / MiB, r / MiB, more)
        elif s == "pipe_gb":
            log.info("step %d | loss %.4f | mem_alloc %.2f GB | mem_reserved %.2f GB", step, loss, a / GiB, r / GiB)
        elif s == "bytes_k":
            log.info("iter %d torch.cuda.memory_allocated()=%d torch.cuda.memory_reserved()=%d", step, a, r)
        elif s == "megatron":
            now = time.time()
            ms = (now - self.t_last) * 1000 / self.every
            self.t_last = now
            self.out(s, f" [{datetime.now():%Y-%m-%d %H:%M:%S}] iteration {step:8d}/{self.steps:8d} | consumed samples:"
                        f" {step * 64:12d} | elapsed time per iteration (ms): {ms:.1f} | learning rate: 1.000E-04 |"
                        f" global batch size:    64 | lm loss: {loss:.6E} | loss scale: 1.0 |"
                        f" number of skipped iterations:   0 | number of nan iterations:   0 |")
            self.out(s, f"[Rank 0] (after {step} iterations) memory (MB) | allocated: {a / MiB} | max allocated: "
                        f"{torch.cuda.max_memory_allocated() / MiB} | reserved: {r / MiB} | max reserved: "
                        f"{torch.cuda.max_memory_reserved() / MiB}")
        elif s == "deepspeed":
            ma, mr = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
            log.info("step %d", step)
            log.info("MA %s GB         Max_MA %s GB         CA %s GB         Max_CA %s GB ",
                     round(a / GiB, 2), round(ma / GiB, 2), round(r / GiB, 2), round(mr / GiB))
            rss = host_rss() or 0
            log.info("CPU Virtual Memory:  used = %.2f GB, percent = %.1f%%", rss / GiB, 100.0 * rss / (128 * GiB))
            torch.cuda.reset_peak_memory_stats()
        elif s == "plain":
            self.out(s, f"step {step}: allocated {a / MiB:.1f} MiB, reserved {r / MiB:.1f} MiB, loss {loss:.4f}")
        elif s == "kv_gb":
            log.info("step=%d loss=%.4f lr=1.0e-04 gpu_mem_alloc=%.2fGB gpu_mem_reserved=%.2fGB", step, loss,
                     a / GiB, r / GiB)
        elif s == "tutorial":
            per = 20
            self.out(s, f"Epoch [{(step - 1) // per + 1}/{max(1, -(-self.steps // per))}], Step [{(step - 1) % per + 1}"
                        f"/{per}], Loss: {loss:.4f}, Mem: {a / MiB:.0f}MB")
        elif s == "fairseq_tail":
            log.info("epoch 001 | step %05d | loss %.3f | lr 0.0001 | mem allocated %.1f MiB reserved %.1f MiB",
                     step, loss, a / MiB, r / MiB)
        elif s == "jsonl":
            self.out(s, json.dumps({"step": step, "loss": round(loss, 4), "gpu_mem_allocated_mb": round(a / MiB, 1),
                                    "gpu_mem_reserved_mb": round(r / MiB, 1), "time": round(time.time(), 3)}))
        elif s == "absl":
            log.info("step %d: loss=%.4f memory allocated %.1f MiB, reserved %.1f MiB", step, loss, a / MiB, r / MiB)
        elif s == "mmengine":
            # mmengine's LogProcessor: `memory` is max_memory_allocated in MB since the last log line, then reset
            mm = torch.cuda.max_memory_allocated() // MiB
            torch.cuda.reset_peak_memory_stats()
            per = 200
            now = time.time()
            log.info("Epoch(train)  [%d][%4d/%d]  lr: 1.0000e-04  eta: 0:00:%02d  time: %.4f  data_time: 0.0051  "
                     "memory: %d  loss: %.4f", (step - 1) // per + 1, (step - 1) % per + 1, per,
                     int(max(0, self.steps - step) * 0.12) % 60, (now - self.t_last) / self.every, mm, loss)
            self.t_last = now
        elif s == "loguru":
            # ultralytics-style `G` (1e9 bytes, 3 significant digits)
            log.info("step %d/%d | loss %.4f | gpu_mem %.3gG | reserved %.3gG", step, self.steps, loss, a / 1e9,
                     r / 1e9)
        elif s == "composer":
            # Composer's ConsoleLogger block per batch; MemoryMonitor's memory_stats() bytes / 1e9 to 5 significant
            # digits (composer/callbacks/memory_monitor.py _get_memory_report), bare
            def g5(b: int) -> str:
                return f"{float(f'{b / 1e9:.5g}'):.4f}"
            st = torch.cuda.memory_stats()
            self.out(s, f"[batch={step}/{self.steps}]:\n         Train time/batch: {step - 1}\n"
                        f"         Train time/sample: {(step - 1) * 256}\n"
                        f"         Train memory/allocated_mem: {g5(st.get('allocated_bytes.all.current', a))}\n"
                        f"         Train memory/active_mem: {g5(st.get('active_bytes.all.current', a))}\n"
                        f"         Train memory/inactive_mem: {g5(st.get('inactive_split_bytes.all.current', 0))}\n"
                        f"         Train memory/reserved_mem: {g5(st.get('reserved_bytes.all.current', r))}\n"
                        f"         Train memory/alloc_retries: {st.get('num_alloc_retries', 0)}\n"
                        f"         Train loss/train/total: {loss:.4f}")
        elif s == "axolotl":
            # HF Trainer's log dict with axolotl's GPU memory callback (GiB, 2 decimals; the peaks reset per log)
            ma = torch.cuda.max_memory_allocated()
            act = torch.cuda.memory_stats().get("active_bytes.all.peak", ma)
            torch.cuda.reset_peak_memory_stats()
            self.out(s, str({"loss": round(loss, 4), "grad_norm": 1.25, "learning_rate": 5e-06,
                             "memory/max_mem_active(gib)": round(act / GiB, 2),
                             "memory/max_mem_allocated(gib)": round(ma / GiB, 2),
                             "memory/device_mem_reserved(gib)": round(r / GiB, 2),
                             "epoch": round(step / max(1, self.steps), 2)}))
        elif s == "torchtitan":
            # torchtitan metrics.py: max_reserved since the last log in GiB and its share of the device, then reset
            mr = torch.cuda.max_memory_reserved()
            cap = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.reset_peak_memory_stats()
            # (in color, torchtitan's default: utils.Color's codes, kept when stdout is a file)
            log.info("\033[31mstep: %2d  \033[32mloss: %7.4f  \033[38;2;255;165;0mgrad_norm: %7.4f  "
                     "\033[38;2;54;234;195mmemory: %5.2fGiB(%.2f%%)  \033[34mtps: 8,302  \033[36mtflops: 120.31  "
                     "\033[35mmfu: 12.16%%\033[39m", step, loss, 1.25, mr / GiB, 100 * mr / cap)
        elif s == "detectron2":
            # detectron2 CommonMetricPrinter: iteration from 0, max_mem = max_memory_allocated() / 1024 / 1024, not reset
            mm = torch.cuda.max_memory_allocated() / MiB
            log.info(" eta: 0:%02d:%02d  iter: %d  total_loss: %.3f  loss_cls: 0.412  time: 0.1200  last_time: 0.1198  "
                     "data_time: 0.0031  last_data_time: 0.0029  lr: 0.0001  max_mem: %.0fM",
                     int(max(0, self.steps - step) * 0.12) // 60, int(max(0, self.steps - step) * 0.12) % 60,
                     step - 1, loss, mm)
        elif s == "fairseq":
            # fairseq/trainer.py: gb_free = cuda_env.total_memory_in_GB - max_memory_allocated() GiB, the peak
            # reset at each update, rounded to 0.1 (a weight-0 meter: the line shows the last value); here the
            # peak since the last line. SimpleProgressBar.log: "epoch 001:    100 / 1000 k=v, ..."
            total = torch.cuda.get_device_properties(0).total_memory / GiB
            free = total - torch.cuda.max_memory_allocated() / GiB
            torch.cuda.reset_peak_memory_stats()
            per = 200
            now = time.time()
            log.info("epoch %03d:  %5d / %d loss=%.3f, nll_loss=%.3f, ppl=%.2f, wps=52922, ups=%.2f, wpb=4096, bsz=32, "
                     "num_updates=%d, lr=0.0001, gnorm=1.25, loss_scale=128, train_wall=%d, gb_free=%.1f, wall=%d",
                     (step - 1) // per + 1, (step - 1) % per + 1, per, loss, loss * 0.9, 2 ** (loss * 0.9),
                     self.every / max(now - self.t_last, 1e-3), step, int(now - self.t0), free, int(now - self.t0))
            self.t_last = now
        elif s == "summary":
            # a script that logs torch.cuda.memory_summary() every few steps (the table, as torch prints it)
            log.info("step %d memory summary:\n%s", step, torch.cuda.memory_summary())
        elif s == "lightning":
            # Lightning's TQDMProgressBar (refresh every step, `\r`, a newline at each epoch's end) with
            # `self.log("alloc_mb", memory_allocated() / 2**20, prog_bar=True)` and `reserved_mb` likewise: the
            # postfix's floats by tqdm's format_num ('{:.3g}' with the exponent's leading zero dropped, or str(n)
            # where that is shorter)
            def num(x: float) -> str:
                f = f"{x:.3g}".replace("+0", "+").replace("-0", "-")
                return f if len(f) < len(str(x)) else str(x)
            per = 100
            n, ep = (step - 1) % per + 1, (step - 1) // per
            el = time.time() - self.t0
            self.streams[s].write(tqdm_refresh(f"Epoch {ep}", n, per, step / el if el > 0 else 0.0, el,
                                               f"v_num=0, train_loss={num(round(loss, 4))}, alloc_mb={num(a / MiB)}, "
                                               f"reserved_mb={num(r / MiB)}") + ("\n" if n == per else ""))
            self.streams[s].flush()
        elif s == "tfinfo":
            # a script that prints TensorFlow's tf.config.experimental.get_memory_info('GPU:0') (bytes: 'current'
            # in use, 'peak' since the last reset, never reset here) after its step counter
            peak = torch.cuda.max_memory_allocated()
            self.out(s, f"step {step}/{self.steps} loss {loss:.4f} gpu memory: {{'current': {a}, 'peak': {peak}}}")
        elif s == "ultralytics":
            # ultralytics/engine/trainer.py: LOGGER.info(progress_string()) (a header of "%11s" columns) before each
            # epoch's TQDM bar, whose description is ("%11s" * 2 + "%11.4g" * 5) % (f"{epoch}/{epochs}",
            # f"{_get_memory():.3g}G", box, cls, dfl, instances, imgsz); _get_memory() is memory_reserved() / 2**30;
            # the bar ("{l_bar}{bar:10}{r_bar}") refreshed with `\r`, a newline at each epoch's end
            per = 50
            n, ep = (step - 1) % per + 1, (step - 1) // per + 1
            if n == 1 or step == 1:
                self.streams[s].write("\n" + "%11s" * 7 % ("Epoch", "GPU_mem", "box_loss", "cls_loss", "dfl_loss",
                                                          "Instances", "Size") + "\n")
            el = time.time() - self.t0
            rate = step / el if el > 0 else 0.0
            desc = ("%11s" * 2 + "%11.4g" * 5) % (f"{ep}/{max(1, -(-self.steps // per))}", f"{r / GiB:.3g}G", loss,
                                                   loss * 1.7, loss * 1.1, 37 + step % 11, 640)
            left = (per - n) / rate if rate else 0.0
            fill = int(10 * n / per)
            blocks = "\u2588" * fill + " " * (10 - fill)
            self.streams[s].write(f"\r{desc}: {100 * n // per:3d}%|{blocks}| {n}/{per} "
                                  f"[{int(el) // 60:02d}:{int(el) % 60:02d}<{int(left) // 60:02d}:{int(left) % 60:02d}, "
                                  f"{rate:5.2f}it/s]" + ("\n" if n == per else ""))
            self.streams[s].flush()
        elif s == "keras":
            # Keras 3's Progbar written to a file (not a terminal): "Epoch e/E", then each update on a new line
            # ("\n" first), its bold/green ANSI codes kept, ETA and time a step, then " - name: value" (".4f");
            # a callback puts the allocator's figures (MiB) into the logs
            per = 50
            n, ep = (step - 1) % per + 1, (step - 1) // per + 1
            out = self.streams[s]
            if n == 1:
                out.write(f"Epoch {ep}/{max(1, -(-self.steps // per))}\n")
            now = time.time()
            unit = (now - self.t_last) / self.every
            self.t_last = now
            done = int(20 * n / per)
            green, grey = "━" * done, "━" * (20 - done)
            bar = (f"\x1b[1m{n:2d}/{per}\x1b[0m " + (f"\x1b[32m{green}\x1b[0m" if done else "")
                   + f"\x1b[37m{grey}\x1b[0m")
            info = f" \x1b[1m{unit * (per - n):.0f}s\x1b[0m" if n < per else f" \x1b[1m{unit * per:.0f}s\x1b[0m"
            info += f" {unit * 1000:.0f}ms/step - loss: {loss:.4f} - gpu_alloc_mb: {a / MiB:.4f} - " \
                    f"gpu_reserved_mb: {r / MiB:.4f}"
            out.write("\n" + bar + info + ("\n" if n == per else ""))
            out.flush()
        elif s == "nanotron":
            # nanotron/trainer.py train_step_logs: LogItems joined by " | "; the memory items (and the disk's,
            # from shutil.disk_usage("/")) only when iteration_step < 5 or (iteration_step - 1) %
            # checkpoint_interval == 0 (here 10); max_memory_reserved is never reset
            now = time.time()
            ms = (now - self.t_last) * 1000 / self.every
            self.t_last = now
            tps = 64 * 1024 / max(ms / 1000, 1e-3)
            items = [f"iteration: {step} / {self.steps}", f"consumed_tokens: {human_format(step * 64 * 1024)}",
                     f"elapsed_time_per_iteration_ms: {human_format(ms)}", f"tokens_per_sec: {human_format(tps)}",
                     f"tokens_per_sec_per_gpu: {human_format(tps / 8)}", "global_batch_size: 64",
                     f"lm_loss: {human_format(loss)}", "lr: 0.0003", "model_tflops_per_gpu: 38.3",
                     "hardware_tflops_per_gpu: 38.3", f"grad_norm: {human_format(1.25)}"]
            if step < 5 or (step - 1) % 10 == 0:
                import shutil
                total, used, free = shutil.disk_usage("/")
                items += [f"cuda_memory_allocated: {human_format(a)}",
                          f"cuda_max_memory_reserved: {human_format(torch.cuda.max_memory_reserved())}",
                          f"hd_total_memory_tb: {human_format(total)}", f"hd_used_memory_tb: {human_format(used)}",
                          f"hd_free_memory_tb: {human_format(free)}"]
            log.info(" | ".join(items))
        elif s == "tracemalloc":
            # the PEFT examples' TorchTracemalloc (as in accelerate's peak_memory_usage.py) around each epoch (here
            # 10 steps): b2mb(x) = int(x / 2**20); begin = memory_allocated() at the epoch's start (the peak reset
            # there), then after the epoch "consumed" = b2mb(end - begin), "peaked" = b2mb(peak - begin); the
            # epoch's tqdm bar goes to stderr. (Its gc.collect()/empty_cache() are left out: they would change
            # the case's allocator behaviour.)
            per = 10
            n = (step - 1) % per + 1
            if n == 1:
                self.tm_begin, self.tm_cpu = a, host_rss() or 0
                torch.cuda.reset_peak_memory_stats()
            el = time.time() - self.t0
            fill = int(10 * n / per)
            sys.stderr.write(f"\r{100 * n // per:3d}%|{'█' * fill}{' ' * (10 - fill)}| {n}/{per} "
                             f"[00:{int(el) % 60:02d}<00:00, {step / max(el, 1e-3):.2f}it/s]" + ("\n" if n == per else ""))
            sys.stderr.flush()
            if n == per:
                b2mb = lambda x: int(x / 2**20)  # noqa: E731
                begin, peak = self.tm_begin, torch.cuda.max_memory_allocated()
                cpu_end = host_rss() or 0
                used, peaked = b2mb(a - begin), b2mb(peak - begin)
                cpu_used = b2mb(cpu_end - self.tm_cpu)
                for line in (f"GPU Memory before entering the train : {b2mb(begin)}",
                             f"GPU Memory consumed at the end of the train (end-begin): {used}",
                             f"GPU Peak Memory consumed during the train (max-begin): {peaked}",
                             f"GPU Total Peak Memory consumed during the train (max): {peaked + b2mb(begin)}",
                             f"CPU Memory before entering the train : {b2mb(self.tm_cpu)}",
                             f"CPU Memory consumed at the end of the train (end-begin): {cpu_used}",
                             f"CPU Peak Memory consumed during the train (max-begin): {max(cpu_used, 0)}",
                             f"CPU Total Peak Memory consumed during the train (max): "
                             f"{max(cpu_used, 0) + b2mb(self.tm_cpu)}",
                             f"epoch={(step - 1) // per}: train_ppl=tensor({2.718 ** loss:.4f}, device='cuda:0') "
                             f"train_epoch_loss=tensor({loss:.4f}, device='cuda:0')"):
                    self.out(s, line)
        elif s == "tqdm":
            # tqdm's refresh: `\r` and the bar, no newline; the whole run is one physical line in the file
            n, total = step, max(self.steps, step)
            el = time.time() - self.t0
            self.streams[s].write(tqdm_refresh("Epoch 1", n, total, n / el if el > 0 else 0.0, el,
                                               f"loss={loss:.3f}, mem={a / GiB:.2f}G"))
            self.streams[s].flush()


def human_format(num: float) -> str:
    """nanotron/logging.py human_format: 3 significant digits, then K, M, G, ... of 1000."""
    if abs(num) < 1:
        return "{:.3g}".format(num)
    sizes = ["", "K", "M", "G", "T", "P", "E"]
    num = float("{:.3g}".format(num))
    magnitude = 0
    while abs(num) >= 1000 and magnitude < len(sizes) - 1:
        magnitude += 1
        num /= 1000.0
    return "{}{}".format("{:f}".format(num).rstrip("0").rstrip("."), sizes[magnitude])


def tqdm_refresh(desc: str, n: int, total: int, rate: float, elapsed: float, postfix: str) -> str:
    """One refresh of a tqdm bar as it writes it (`\r`, no newline): `{desc}: {pct}%|{bar}| {n}/{total}
    [{elapsed}<{remaining}, {rate}it/s, {postfix}]`."""
    left = (total - n) / rate if rate else 0.0
    fill = int(10 * n / total)
    bar = "\u2588" * fill + " " * (10 - fill)
    return (f"\r{desc}: {100 * n // total:3d}%|{bar}| {n}/{total} [{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}<"
            f"{int(left) // 60:02d}:{int(left) % 60:02d}, {rate:5.2f}it/s, {postfix}]")


class NvmlMonitor:
    """A server's monitor thread: NVML's used/total of GPU 0 every --monitor-period s, behind a
    `%m-%d %H:%M:%S` stamp without a year (as vLLM-style loggers print), to stdout or a file."""

    def __init__(self, period: float, path: str | None = None):
        import threading
        import pynvml
        pynvml.nvmlInit()
        self.nvml, self.h = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        self.period, self.stream = period, (open(path, "w", buffering=1) if path else sys.stdout)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            m = self.nvml.nvmlDeviceGetMemoryInfo(self.h)
            print(f"INFO {datetime.now():%m-%d %H:%M:%S} [monitor.py:57] GPU 0 memory: used={m.used / MiB:.0f}MiB "
                  f"total={m.total / MiB:.0f}MiB", file=self.stream, flush=True)
            self.stop.wait(self.period)


class TensorBoardLog:
    """Memory scalars logged to TensorBoard (`add_scalar("memory/allocated_mib", ...)`), as training
    scripts do, into --csv-dir/tb."""

    def __init__(self, out_dir: str):
        from torch.utils.tensorboard import SummaryWriter
        self.w = SummaryWriter(os.path.join(out_dir, "tb"))

    def __call__(self, step: int, a: int, r: int, loss: float | None) -> None:
        self.w.add_scalar("memory/allocated_mib", a / MiB, step)
        self.w.add_scalar("memory/reserved_mib", r / MiB, step)
        if loss is not None:
            self.w.add_scalar("train/loss", loss, step)
        self.w.flush()


def make_log(torch, args, name: str = "train") -> StepLog:
    log = StepLog(torch, args.style, args.every, args.steps, name=name, out_dir=args.csv_dir)
    if args.monitor:
        log.monitor = NvmlMonitor(args.monitor, None if args.monitor_file is None
                                  else os.path.join(args.csv_dir, args.monitor_file))
    if args.tensorboard:
        log.hooks.append(TensorBoardLog(args.csv_dir))
    return log


def begin(torch, args, **fields) -> None:
    props = torch.cuda.get_device_properties(0)
    side("start", kind=args.kind, period=args.period, steps=args.steps, torch=torch.__version__,
         gpu_name=props.name, gpu_total=props.total_memory, style=args.style, **fields)


def cap(torch, args) -> int | None:
    if args.fraction:
        torch.cuda.set_per_process_memory_fraction(args.fraction)
        return int(args.fraction * torch.cuda.get_device_properties(0).total_memory)
    return None


def mlp(torch, width: int, depth: int = 2):
    layers = []
    for i in range(depth):
        layers.append(torch.nn.Linear(width, width))
        if i < depth - 1:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).cuda()


def train_step(torch, model, opt, x, phase=None) -> float:
    """One step; `phase(where)` (a StepLog.phase bound to the step) is called at its points."""
    phase = phase or (lambda where: None)
    phase("before forward")
    loss = model(x).float().pow(2).mean()
    phase("after forward")
    opt.zero_grad(set_to_none=True)
    loss.backward()
    phase("after backward")
    opt.step()
    return float(loss)


def oom_guard(torch, fn, stepref: list) -> None:
    """Run fn; on a CUDA OOM, note it in the side file and let the real traceback through."""
    try:
        fn()
    except torch.cuda.OutOfMemoryError:
        side("oom", step=stepref[0], allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved())
        raise


def finish(log: StepLog, msg: str, *a) -> None:
    log.info(msg, *a)
    side("end")


# ---- leaks -------------------------------------------------------------------------------------

def linear_late(torch, args) -> None:
    """Start-up takes a working set (weights, buffers: --warm-gib), training runs flat for --flat steps,
    then a debug hook keeps every step's hidden activations (`debug_acts.append(h)`, --leak-mib a step)."""
    torch.manual_seed(args.seed)
    limit = cap(torch, args)
    width = 2048
    model = mlp(torch, width)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    working = torch.empty(int(args.warm_gib * GiB), dtype=torch.uint8, device="cuda").fill_(1)
    batch = max(1, int(args.leak_mib * MiB) // (width * 4))
    log = make_log(torch, args)
    begin(torch, args, onset=args.flat + 1, leak_bytes=batch * width * 4, working=working.numel(), cap_bytes=limit)
    log.info("model ready, working set %.0f MB; training %d steps, batch %d", working.numel() / MiB, args.steps, batch)
    debug_acts, kept = [], 0
    pacer = Pacer(args.period)
    ref = [0]

    def loop():
        nonlocal kept
        for step in range(1, args.steps + 1):
            ref[0] = step
            log.phase(step, "before forward")
            x = torch.randn(batch, width, device="cuda")
            h = model[0](x)
            loss = model[2](model[1](h)).pow(2).mean()
            log.phase(step, "after forward")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            log.phase(step, "after backward")
            opt.step()
            if step > args.flat:
                if step == args.flat + 1:
                    side("leak_start", step=step)
                    log.info("debug hook enabled: keeping activations")
                debug_acts.append(h.detach())      # the bug: every step's activations stay on the GPU
                kept += h.numel() * h.element_size()
            log.step(step, float(loss), kept=kept)
            pacer.wait()
    oom_guard(torch, loop, ref)
    finish(log, "training finished, %d activations kept", len(debug_acts))


def slow_noisy(torch, args) -> None:
    """A large footprint (--warm-gib) under noisy load (each step holds a random 0..--noise-mib of
    activations at its marker), with a slow leak from --onset on: a per-step statistics tensor of
    --leak-mib kept in a history list on the GPU."""
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    limit = cap(torch, args)
    width = 4096
    model = mlp(torch, width)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    working = torch.empty(int(args.warm_gib * GiB), dtype=torch.uint8, device="cuda").fill_(1)
    log = make_log(torch, args)
    leak = int(args.leak_mib * MiB)
    begin(torch, args, onset=args.onset, leak_bytes=leak, working=working.numel(), noise_max=int(args.noise_mib * MiB),
          cap_bytes=limit)
    log.info("footprint %.0f MB, noisy batches, %d steps", working.numel() / MiB, args.steps)
    history, kept = [], 0
    pacer = Pacer(args.period)
    ref = [0]

    def loop():
        nonlocal kept
        for step in range(1, args.steps + 1):
            ref[0] = step
            noise = int(rng.uniform(0, args.noise_mib) * MiB) // (width * 4)
            x = torch.randn(256, width, device="cuda")
            loss = train_step(torch, model, opt, x)
            held = torch.randn(max(1, noise), width, device="cuda") if noise else None   # variable activations
            if step >= args.onset:
                if step == args.onset:
                    side("leak_start", step=step)
                stats = torch.empty(leak // 4, device="cuda").normal_()
                history.append(stats)             # the bug: metric history kept on the GPU
                kept += stats.numel() * 4
            log.step(step, loss, kept=kept, noise=0 if held is None else held.numel() * 4)
            del held
            pacer.wait(args.period * rng.uniform(0.6, 1.4))
    oom_guard(torch, loop, ref)
    finish(log, "training finished")


def staircase(torch, args) -> None:
    """Every --stair-every steps a 'best model' snapshot (--stair-mib of weights and optimizer state)
    is appended to a list that is never pruned: flat, then one stair, flat, one stair..."""
    torch.manual_seed(args.seed)
    limit = cap(torch, args)
    width = 4096
    model = mlp(torch, width)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    base = torch.empty(int(args.warm_gib * GiB), dtype=torch.uint8, device="cuda").fill_(1)
    log = make_log(torch, args)
    stair = int(args.stair_mib * MiB)
    begin(torch, args, onset=args.stair_every, stair_bytes=stair, stair_every=args.stair_every, cap_bytes=limit,
          working=base.numel())
    log.info("training %d steps, snapshot every %d steps", args.steps, args.stair_every)
    snapshots, kept = [], 0
    pacer = Pacer(args.period)
    ref = [0]

    def loop():
        nonlocal kept
        for step in range(1, args.steps + 1):
            ref[0] = step
            loss = train_step(torch, model, opt, torch.randn(1024, width, device="cuda"))
            if step % args.stair_every == 0:
                if step == args.stair_every:
                    side("leak_start", step=step)
                snap = torch.empty(stair, dtype=torch.uint8, device="cuda").fill_(step % 251)
                snapshots.append(snap)            # the bug: every snapshot stays referenced
                kept += snap.numel()
                side("stair", step=step, bytes=snap.numel())
                log.info("saved best-model snapshot at step %d (%d kept)", step, len(snapshots))
            log.step(step, loss, kept=kept)
            pacer.wait()
    oom_guard(torch, loop, ref)
    finish(log, "training finished")


def infer(torch, args) -> None:
    """An inference server: requests arrive in irregular batches (0..--max-batch, bursts and lulls),
    each request's output is --out-mib. With --leak, from --onset on the outputs are cached by request
    id in a dict that is never evicted (`response_cache[rid] = out`); without, they are returned and
    dropped."""
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    limit = cap(torch, args)
    hidden = 1024
    seq = int(args.out_mib * MiB) // (hidden * 4)
    model = torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden), torch.nn.GELU(),
                                torch.nn.Linear(4 * hidden, hidden)).cuda().eval()
    weights = torch.empty(int(args.warm_gib * GiB), dtype=torch.uint8, device="cuda").fill_(1)
    log = make_log(torch, args, name="server")
    begin(torch, args, onset=args.onset if args.leak else None, leak=args.leak, out_bytes=seq * hidden * 4,
          working=weights.numel(), cap_bytes=limit)
    log.info("serving: %d request batches, up to %d requests each", args.steps, args.max_batch)
    cache: dict[int, object] = {}
    kept, rid = 0, 0
    pacer = Pacer(args.period)
    ref = [0]

    def loop():
        nonlocal kept, rid
        burst = 0
        for step in range(1, args.steps + 1):
            ref[0] = step
            if burst <= 0 and rng.random() < 0.12:
                burst = rng.randint(3, 8)
            if burst > 0:
                b = rng.randint(args.max_batch // 2, args.max_batch)
                burst -= 1
            else:
                b = rng.choice([0, 1, 1, 2, 3, 4, 6, 8, rng.randint(1, max(1, args.max_batch // 2))])
            out = None
            if b:
                with torch.no_grad():
                    x = torch.randn(b, seq, hidden, device="cuda")
                    out = model(x)
                if args.leak and step >= args.onset:
                    if "leaking" not in ref:
                        ref.append("leaking")
                        side("leak_start", step=step)
                    for i in range(b):
                        rid += 1
                        cache[rid] = out[i]          # the bug: the cache is never evicted
                    kept += out.numel() * 4
            log.step(step, None, kept=kept, batch=b, requests=rid)
            del out
            pacer.wait(args.period * rng.uniform(0.5, 1.5))
    oom_guard(torch, loop, ref)
    finish(log, "server stopped, %d cached responses", len(cache))


def leak_oom(torch, args) -> None:
    """Validation predictions kept for an epoch-end metric (`val_preds.append(preds)`, --leak-mib a
    step) from --onset on, under a memory cap (--fraction): grows until a CUDA OOM."""
    torch.manual_seed(args.seed)
    limit = cap(torch, args)
    width = 2048
    model = mlp(torch, width)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    base = torch.empty(int(args.warm_gib * GiB), dtype=torch.uint8, device="cuda").fill_(1)
    batch = max(1, int(args.leak_mib * MiB) // (width * 4))
    log = make_log(torch, args)
    begin(torch, args, onset=args.onset, leak_bytes=batch * width * 4, cap_bytes=limit, working=base.numel())
    log.info("training %d steps, batch %d, memory fraction %s", args.steps, batch, args.fraction)
    preds, kept = [], 0
    pacer = Pacer(args.period)
    ref = [0]

    def loop():
        nonlocal kept
        for step in range(1, args.steps + 1):
            ref[0] = step
            x = torch.randn(batch, width, device="cuda")
            loss = train_step(torch, model, opt, x, lambda where: log.phase(step, where))
            if step >= args.onset:
                if step == args.onset:
                    side("leak_start", step=step)
                with torch.no_grad():
                    p = model(x)
                preds.append(p)                    # the bug: predictions stay on the GPU
                kept += p.numel() * 4
            log.step(step, loss, kept=kept)
            pacer.wait()
    oom_guard(torch, loop, ref)
    finish(log, "training finished")


# ---- healthy look-alikes -----------------------------------------------------------------------

def flat(torch, args) -> None:
    """Training with a fixed footprint (--warm-gib taken at start: weights, preallocated buffers)."""
    torch.manual_seed(args.seed)
    limit = cap(torch, args)
    model = mlp(torch, 2048)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    fp = torch.empty(int(args.warm_gib * GiB), dtype=torch.uint8, device="cuda").fill_(0)
    log = make_log(torch, args)
    begin(torch, args, working=fp.numel(), cap_bytes=limit)
    log.info("preallocated %.0f MB for weights and cache", fp.numel() / MiB)
    pacer = Pacer(args.period)
    for step in range(1, args.steps + 1):
        loss = train_step(torch, model, opt, torch.randn(4096, 2048, device="cuda"),
                          lambda where: log.phase(step, where))
        log.step(step, loss, kept=0)
        pacer.wait()
    finish(log, "training finished")


def warmup_plateau(torch, args) -> None:
    """Sequence-length curriculum: the activations a step holds (256 MiB blocks, one a layer) grow
    linearly to --peak-gib over the first --ramp steps, then stay at the maximum length: reserved and
    allocated rise in the first part, then plateau (freed blocks are reused, same sizes)."""
    torch.manual_seed(args.seed)
    model = mlp(torch, 2048)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    log = make_log(torch, args)
    chunk = 256 * MiB
    begin(torch, args, ramp=args.ramp, peak=int(args.peak_gib * GiB))
    log.info("curriculum: length ramps over %d steps", args.ramp)
    pacer = Pacer(args.period)
    for step in range(1, args.steps + 1):
        frac = min(1.0, step / args.ramp)
        n = max(1, round(args.peak_gib * GiB * frac / chunk))
        acts = [torch.empty(chunk // 4, device="cuda").normal_() for _ in range(n)]
        loss = train_step(torch, model, opt, torch.randn(2048, 2048, device="cuda"))
        log.step(step, loss, kept=0, acts=n * chunk)
        del acts
        pacer.wait()
    finish(log, "training finished")


def lru(torch, args) -> None:
    """An LRU cache of encoded prompts (--entry-mib each, at most --cap-entries): fills, then evicts."""
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    model = mlp(torch, 2048)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    log = make_log(torch, args)
    begin(torch, args, cap_entries=args.cap_entries, entry_bytes=int(args.entry_mib * MiB))
    log.info("LRU cache up to %d entries of %.0f MB", args.cap_entries, args.entry_mib)
    cache: collections.OrderedDict = collections.OrderedDict()
    pacer = Pacer(args.period)
    hits = 0
    for step in range(1, args.steps + 1):
        loss = train_step(torch, model, opt, torch.randn(2048, 2048, device="cuda"))
        key = step if rng.random() < 0.85 or not cache else rng.choice(list(cache))
        if key in cache:
            cache.move_to_end(key)
            hits += 1
        else:
            cache[key] = torch.empty(int(args.entry_mib * MiB) // 4, device="cuda").normal_()
            if len(cache) > args.cap_entries:
                cache.popitem(last=False)
        log.step(step, loss, kept=0, entries=len(cache))
        pacer.wait()
    finish(log, "done, %d entries, %d hits", len(cache), hits)


def eval_spikes(torch, args) -> None:
    """Training with an evaluation every --eval-every steps that holds --spike-gib for --eval-len steps
    and frees it; with --empty-cache the cache goes back to the driver after each evaluation."""
    torch.manual_seed(args.seed)
    model = mlp(torch, 2048)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    base = torch.empty(int(args.warm_gib * GiB), dtype=torch.uint8, device="cuda").fill_(1)
    log = make_log(torch, args)
    begin(torch, args, eval_every=args.eval_every, eval_len=args.eval_len, spike=int(args.spike_gib * GiB),
          empty_cache=args.empty_cache, working=base.numel())
    pacer = Pacer(args.period)
    evalbuf: list = []
    for step in range(1, args.steps + 1):
        loss = train_step(torch, model, opt, torch.randn(2048, 2048, device="cuda"))
        phase = step % args.eval_every
        if phase == 0:
            log.info("evaluating at step %d", step)
        if evalbuf or phase == 0:
            evalbuf.append(torch.empty(int(args.spike_gib * GiB) // args.eval_len // 4, device="cuda").normal_())
            if len(evalbuf) == args.eval_len:
                score = sum(float(t[:1024].mean()) for t in evalbuf)
                evalbuf.clear()
                if args.empty_cache:
                    torch.cuda.empty_cache()
                log.info("eval done at step %d, score %.4f", step, score)
        log.step(step, loss, kept=0, eval=len(evalbuf))
        pacer.wait()
    finish(log, "training finished")


def grad_accum(torch, args) -> None:
    """Gradient accumulation done by summing micro-batch losses and calling backward once every
    --accum micro-batches: each micro-batch's graph (its saved activations) is alive until then, so
    allocated climbs for --accum steps and drops. With --empty-cache the cache is released too."""
    torch.manual_seed(args.seed)
    width = 4096
    model = mlp(torch, width, depth=3)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    log = make_log(torch, args)
    batch = max(1, int(args.micro_mib * MiB) // (width * 4 * 4))
    begin(torch, args, accum=args.accum, micro_batch=batch, empty_cache=args.empty_cache)
    log.info("accumulating %d micro-batches of %d", args.accum, batch)
    pacer = Pacer(args.period)
    total = None
    for step in range(1, args.steps + 1):
        log.phase(step, "before forward")
        x = torch.randn(batch, width, device="cuda")
        loss = model(x).pow(2).mean()
        total = loss if total is None else total + loss
        lv = float(loss)
        log.phase(step, "after forward")
        if step % args.accum == 0:
            total.backward()
            log.phase(step, "after backward")
            opt.step()
            opt.zero_grad(set_to_none=True)
            total = None
            if args.empty_cache:
                torch.cuda.empty_cache()
        log.step(step, lv, kept=0)
        pacer.wait()
    finish(log, "training finished")


def cache_growth(torch, args) -> None:
    """Batches sorted by length: each step's temporary is --grow-mib larger than the last (freed at
    once), so the caching allocator reserves a new segment each step and keeps the old ones: reserved
    grows, allocated stays flat. With --empty-cache-at-end the cache is released before exit."""
    torch.manual_seed(args.seed)
    model = mlp(torch, 2048)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    log = make_log(torch, args)
    begin(torch, args, grow=int(args.grow_mib * MiB), empty_cache_at_end=args.empty_cache_at_end)
    pacer = Pacer(args.period)
    for step in range(1, args.steps + 1):
        n = int((64 + args.grow_mib * step) * MiB)
        tmp = torch.empty(n // 4, device="cuda")
        tmp.normal_()
        tmp.mul_(0.5)
        del tmp
        loss = train_step(torch, model, opt, torch.randn(2048, 2048, device="cuda"))
        log.step(step, loss, kept=0, temp=n)
        pacer.wait()
    if args.empty_cache_at_end:
        torch.cuda.empty_cache()
        side("empty_cache")
        log.info("released the cache: torch.cuda.empty_cache()")
        log.step(args.steps + 1, None, kept=0, after_empty_cache=True)
        time.sleep(args.linger)
    finish(log, "training finished")


# ---- several processes -------------------------------------------------------------------------

def _worker(gib: float, style: str, limit_s: float) -> None:
    side("worker_start")
    import torch
    buf = torch.empty(int(gib * GiB), dtype=torch.uint8, device="cuda")
    buf.fill_(1)
    torch.cuda.synchronize()
    side("worker_ready", bytes=buf.numel(), allocated=torch.cuda.memory_allocated(),
         reserved=torch.cuda.memory_reserved())
    print(f"{datetime.now():%Y-%m-%d %H:%M:%S,%f}"[:-3] + f" INFO eval-worker: pid {os.getpid()} ready, "
          f"holding {buf.numel() / MiB:.2f} MB on cuda:0", flush=True)
    end = time.time() + limit_s                 # a safety net: never outlive the recorder by much
    while time.time() < end:
        time.sleep(0.5)


def residual(torch, args) -> None:
    """The trainer forks (before touching CUDA) an eval worker with torch.multiprocessing; the worker
    takes --worker-gib on the GPU and waits for work. The recorder SIGKILLs the trainer; the worker,
    orphaned, lives on holding its memory until it is killed too."""
    ctx = torch.multiprocessing.get_context("fork")
    worker = ctx.Process(target=_worker, args=(args.worker_gib, args.style, 90.0), name="eval-worker")
    worker.start()
    torch.manual_seed(args.seed)
    model = mlp(torch, 2048)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    base = torch.empty(int(args.warm_gib * GiB), dtype=torch.uint8, device="cuda").fill_(1)
    log = make_log(torch, args)
    begin(torch, args, worker_pid=worker.pid, worker_bytes=int(args.worker_gib * GiB), working=base.numel())
    log.info("started eval worker pid %d", worker.pid)
    pacer = Pacer(args.period)
    for step in range(1, args.steps + 1):
        loss = train_step(torch, model, opt, torch.randn(4096, 2048, device="cuda"),
                          lambda where: log.phase(step, where))
        log.step(step, loss, kept=0)
        pacer.wait()
    worker.terminate()
    finish(log, "training finished")


def pinned_host(torch, args) -> None:
    """A replay buffer of pinned host batches (--host-mib each, `torch.empty(..., pin_memory=True)`)
    that is never trimmed: host memory grows each step, GPU memory stays flat. record.py puts the
    process in a small memory cgroup, so the kernel's OOM killer ends it."""
    torch.manual_seed(args.seed)
    model = mlp(torch, 2048)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    log = make_log(torch, args)
    begin(torch, args, onset=1, host_bytes=int(args.host_mib * MiB), cgroup=os.environ.get("GFC_CGROUP"))
    log.info("replay buffer of pinned batches, %.0f MB each", args.host_mib)
    replay, kept = [], 0
    pacer = Pacer(args.period)
    for step in range(1, args.steps + 1):
        hb = torch.empty(int(args.host_mib * MiB) // 4, pin_memory=True)
        hb.fill_(float(step))
        xb = hb[: 2048 * 2048].view(2048, 2048).cuda(non_blocking=True)
        loss = train_step(torch, model, opt, xb)
        replay.append(hb)                         # the bug: every pinned batch stays alive
        kept += hb.numel() * 4
        log.step(step, loss, kept=0, host_kept=kept, host_rss=host_rss() or 0, pinned=hb.is_pinned())
        pacer.wait()
    finish(log, "training finished")


# ---- real frameworks ---------------------------------------------------------------------------

def _filtered(cls, kwargs: dict) -> dict:
    import inspect
    try:
        names = set(inspect.signature(cls.__init__).parameters)
    except (TypeError, ValueError):
        return kwargs
    dropped = [k for k in kwargs if k not in names]
    if dropped:
        side("dropped_kwargs", cls=cls.__name__, names=dropped)
    return {k: v for k, v in kwargs.items() if k in names}


def hf_trainer(torch, args) -> None:
    """A transformers Trainer run: a tiny GPT-2 built from a config (random weights, no download) on
    random tokens. With --leak, a callback keeps a copy of the token-embedding matrix every step from
    --onset on ("for an embedding-drift plot"), 64 MiB a step; memory numbers are added to the
    Trainer's own log dicts."""
    import transformers
    from transformers import (GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments)
    transformers.set_seed(args.seed)
    vocab, seq = 32768, 128
    cfg = GPT2Config(n_layer=2, n_head=8, n_embd=512, vocab_size=vocab, n_positions=seq)
    model = GPT2LMHeadModel(cfg)

    class RandomTokens(torch.utils.data.Dataset):
        def __len__(self):
            return 1_000_000

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(0, vocab, (seq,), generator=g)
            return {"input_ids": ids, "labels": ids.clone()}

    state = {"kept": 0, "started": False}
    pacer = Pacer(args.period)
    keep: list = []
    log = StepLog(torch, "none", 1, args.steps)

    class Drift(TrainerCallback):
        def on_step_end(self, a, st, control, model=None, **kw):
            step = st.global_step
            if not state["started"]:
                state["started"] = True
                begin(torch, args, onset=args.onset if args.leak else None, leak=args.leak,
                      transformers=transformers.__version__)
            if args.leak and step >= args.onset:
                if step == args.onset:
                    side("leak_start", step=step)
                w = model.transformer.wte.weight.detach().clone()
                keep.append(w)                    # the bug: every snapshot stays on the GPU
                state["kept"] += w.numel() * w.element_size()
            log.step(step, None, kept=state["kept"])
            pacer.wait()

    class MemoryInLogs(TrainerCallback):
        def on_log(self, a, st, control, logs=None, **kw):
            if logs is not None:
                logs["memory_allocated (GB)"] = round(torch.cuda.memory_allocated() / GiB, 2)
                logs["max_memory_allocated (GB)"] = round(torch.cuda.max_memory_allocated() / GiB, 2)
                logs["memory_reserved (GB)"] = round(torch.cuda.memory_reserved() / GiB, 2)

    targs = TrainingArguments(**_filtered(TrainingArguments, dict(
        output_dir="/tmp/gfc_hf_out", max_steps=args.steps, per_device_train_batch_size=16,
        learning_rate=3e-4, logging_steps=args.every, logging_strategy="steps", save_strategy="no",
        eval_strategy="no", report_to="none", seed=args.seed, dataloader_num_workers=0,
        disable_tqdm=False, skip_memory_metrics=False)))
    trainer = Trainer(model=model, args=targs, train_dataset=RandomTokens(), callbacks=[Drift()])
    trainer.callback_handler.callbacks.insert(0, MemoryInLogs())   # before the printer sees the dict
    trainer.train()
    side("end")


def lightning_leak(torch, args) -> None:
    """A Lightning run (pytorch_lightning, or lightning with --lightning-pkg lightning) of a small
    language model on random tokens, logged with CSVLogger and Lightning's own stdout. The module keeps
    every training step's logits, graph attached, in `self.training_step_outputs` from --onset on and
    never clears it (the epoch-end hook that should is missing)."""
    if args.lightning_pkg == "lightning":
        import lightning.pytorch as pl
        from lightning.pytorch.loggers import CSVLogger
    else:
        import pytorch_lightning as pl
        from pytorch_lightning.loggers import CSVLogger
    pl.seed_everything(args.seed)
    limit = cap(torch, args)
    vocab, dim, seq, batch = 8192, 512, 128, 32
    pacer = Pacer(args.period)
    log = StepLog(torch, "none", 1, args.steps)
    started = {"v": False}
    counter = {"step": 0}

    class TinyLM(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, dim)
            self.block = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                                             torch.nn.Linear(4 * dim, dim))
            self.head = torch.nn.Linear(dim, vocab)
            self.training_step_outputs = []

        def training_step(self, b, idx):
            x, y = b
            logits = self.head(self.block(self.emb(x)))
            loss = torch.nn.functional.cross_entropy(logits.view(-1, vocab), y.view(-1))
            step = counter["step"] + 1
            if args.leak and step >= args.onset:
                if step == args.onset:
                    side("leak_start", step=step)
                self.training_step_outputs.append(logits)   # the bug: kept with its graph, never cleared
            self.log("train_loss", loss, prog_bar=True)
            self.log("gpu_mem_alloc_mb", torch.cuda.memory_allocated() / MiB)
            self.log("gpu_mem_reserved_mb", torch.cuda.memory_reserved() / MiB)
            return loss

        def on_train_batch_end(self, outputs, b, idx):
            counter["step"] += 1
            if not started["v"]:
                started["v"] = True
                begin(torch, args, onset=args.onset if args.leak else None, leak=args.leak, cap_bytes=limit,
                      lightning=pl.__version__)
            log.step(counter["step"], None, kept_tensors=len(self.training_step_outputs))
            pacer.wait()

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=3e-4)

    g = torch.Generator().manual_seed(args.seed)
    n = batch * (args.steps + 5)
    data = torch.randint(0, vocab, (n, seq + 1), generator=g)
    ds = torch.utils.data.TensorDataset(data[:, :-1], data[:, 1:])
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=0)
    csv = CSVLogger(save_dir=args.csv_dir, name="lightning_logs", version=0)
    trainer = pl.Trainer(accelerator="gpu", devices=1, max_steps=args.steps, max_epochs=1, logger=csv,
                         enable_checkpointing=False, log_every_n_steps=args.every, num_sanity_val_steps=0)
    ref = [0]

    def fit():
        trainer.fit(TinyLM(), dl)
    try:
        fit()
    except torch.cuda.OutOfMemoryError:
        side("oom", step=counter["step"] + 1, allocated=torch.cuda.memory_allocated(),
             reserved=torch.cuda.memory_reserved())
        raise
    side("end")


# ---- JAX ---------------------------------------------------------------------------------------

def jax_train(torch, args) -> None:
    """A JAX training-like loop (a jitted two-layer MLP step, its weights updated each step). With --leak,
    from --onset on each step's hidden activations are kept in a Python list (`history.append(h)`,
    --leak-mib a step) until XLA's allocator runs out under its cap (XLA_PYTHON_CLIENT_MEM_FRACTION =
    --fraction; no preallocation, so nvidia-smi shows the pool grow). Device 0's memory_stats() is logged
    every --every steps; the RESOURCE_EXHAUSTED traceback goes to stderr as JAX prints it."""
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if args.fraction:
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = str(args.fraction)
    import jax
    import jax.numpy as jnp
    dev = jax.devices()[0]
    width = 4096
    rows = max(1, int(args.leak_mib * MiB) // (width * 4))
    key = jax.random.PRNGKey(args.seed)
    k1, k2, k3 = jax.random.split(key, 3)
    w1 = jax.random.normal(k1, (width, width)) * 0.01
    w2 = jax.random.normal(k2, (width, width)) * 0.01
    working = jnp.ones((int(args.warm_gib * GiB) // 4,), dtype=jnp.float32)

    @jax.jit
    def step_fn(w1, w2, x):
        def loss_fn(w1, w2):
            h = jnp.tanh(x @ w1)
            return jnp.mean((h @ w2) ** 2), h
        (loss, h), (g1, g2) = jax.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True)(w1, w2)
        return w1 - 1e-3 * g1, w2 - 1e-3 * g2, loss, h

    log = logging.getLogger("train")
    log.setLevel(logging.INFO)
    log.propagate = False
    hd = logging.StreamHandler(sys.stdout)
    fmt, datefmt = LOG_FORMATS["absl"]
    hd.setFormatter(Formatter(fmt.format(name="train", pid=os.getpid()), datefmt))
    log.addHandler(hd)
    stats = dev.memory_stats() or {}
    side("start", kind=args.kind, period=args.period, steps=args.steps, jax=jax.__version__, gpu_name=dev.device_kind,
         gpu_total=stats.get("bytes_limit"), style="absl+memory_stats", onset=args.onset if args.leak else None,
         leak=args.leak, leak_bytes=rows * width * 4, cap_bytes=stats.get("bytes_limit"), working=working.size * 4)
    log.info("JAX %s on %s; training %d steps, batch %d", jax.__version__, dev.device_kind, args.steps, rows)
    history, kept, cur = [], 0, 0
    pacer = Pacer(args.period)
    try:
        for step in range(1, args.steps + 1):
            cur = step
            k3, sub = jax.random.split(k3)
            x = jax.random.normal(sub, (rows, width))
            w1, w2, loss, h = step_fn(w1, w2, x)
            loss = float(loss)
            if args.leak and step >= args.onset:
                if step == args.onset:
                    side("leak_start", step=step)
                history.append(h)                  # the bug: every step's activations stay on the GPU
                kept += h.size * 4
            h.block_until_ready()
            m = dev.memory_stats() or {}
            side("step", step=step, allocated=m.get("bytes_in_use", 0),
                 reserved=m.get("pool_bytes", m.get("bytes_reserved", m.get("bytes_in_use", 0))), kept=kept)
            if step % args.every == 0 or step == 1:
                log.info("step %d loss=%.4f memory_stats=%s", step, loss, m)
            pacer.wait()
    except Exception as e:  # noqa: BLE001
        if "RESOURCE_EXHAUSTED" in str(e):
            m = dev.memory_stats() or {}
            side("oom", step=cur, allocated=m.get("bytes_in_use"), reserved=m.get("pool_bytes"))
        raise
    log.info("training finished, %d arrays kept", len(history))
    side("end")


KINDS = {f.__name__: f for f in (linear_late, slow_noisy, staircase, infer, leak_oom, flat, warmup_plateau, lru,
                                  eval_spikes, grad_accum, cache_growth, residual, pinned_host, hf_trainer,
                                  lightning_leak, jax_train)}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=sorted(KINDS))
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--period", type=float, default=0.2, help="seconds a step")
    p.add_argument("--style", default="spine", help="one of %s, or several joined by +" % ", ".join(STYLES))
    p.add_argument("--every", type=int, default=1, help="log a marker every k steps")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--fraction", type=float, default=0.0, help="set_per_process_memory_fraction cap")
    p.add_argument("--warm-gib", type=float, default=1.0)
    p.add_argument("--flat", type=int, default=40, help="linear_late: flat steps before the leak")
    p.add_argument("--leak-mib", type=float, default=64)
    p.add_argument("--onset", type=int, default=20)
    p.add_argument("--noise-mib", type=float, default=512)
    p.add_argument("--stair-mib", type=float, default=512)
    p.add_argument("--stair-every", type=int, default=20)
    p.add_argument("--leak", action="store_true")
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--out-mib", type=float, default=4)
    p.add_argument("--ramp", type=int, default=30)
    p.add_argument("--peak-gib", type=float, default=16)
    p.add_argument("--cap-entries", type=int, default=32)
    p.add_argument("--entry-mib", type=float, default=96)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--eval-len", type=int, default=5)
    p.add_argument("--spike-gib", type=float, default=6)
    p.add_argument("--empty-cache", action="store_true")
    p.add_argument("--accum", type=int, default=8)
    p.add_argument("--micro-mib", type=float, default=384)
    p.add_argument("--grow-mib", type=float, default=6)
    p.add_argument("--empty-cache-at-end", action="store_true")
    p.add_argument("--linger", type=float, default=2.0)
    p.add_argument("--worker-gib", type=float, default=6)
    p.add_argument("--host-mib", type=float, default=64)
    p.add_argument("--lightning-pkg", default="pytorch_lightning")
    p.add_argument("--csv-dir", default=".")
    p.add_argument("--monitor", type=float, default=0.0, help="NVML monitor thread period (s); 0: none")
    p.add_argument("--monitor-file", default=None, help="the monitor's file in --csv-dir (default: stdout)")
    p.add_argument("--tensorboard", action="store_true", help="memory scalars to --csv-dir/tb")
    return p


def selftest(torch, args) -> None:
    """Not a corpus workload: a torch-free stand-in to dry-run record.py on a machine without a GPU."""
    side("start", kind="selftest", period=args.period, steps=args.steps)
    print("selftest starting", flush=True)
    kept = 0
    for step in range(1, args.steps + 1):
        if args.leak and step >= args.onset:
            if step == args.onset:
                side("leak_start", step=step)
            kept += 64 * MiB
        side("step", step=step, allocated=100 * MiB + kept, reserved=128 * MiB + kept, kept=kept)
        print(f"step {step}", flush=True)
        time.sleep(args.period)
    if args.fraction:
        side("oom", step=args.steps + 1, allocated=1, reserved=1)
        raise MemoryError("selftest OOM")
    side("end")


KINDS["selftest"] = selftest


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    torch = None
    if args.kind not in ("selftest", "jax_train"):
        import torch
    KINDS[args.kind](torch, args)


if __name__ == "__main__":
    main()
