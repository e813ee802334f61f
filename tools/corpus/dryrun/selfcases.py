"""Dry-run cases for record.py on a machine without a GPU or torch (the `selftest` workload and a fake
nvidia-smi beside this file):

    PATH=tools/corpus/dryrun:$PATH PYTHONPATH=tools/corpus/dryrun \
        python3 tools/corpus/record.py --half tune --out /tmp/dry --cases-module selfcases
"""
from cases import Case, crash_loop, kill_at, sequential, simple, stop_loggers_at

S = "tune"
TUNE = [
    Case("st_exit", S, ["wide500", "apps"], simple("selftest", "--steps 10 --period 0.1 --leak --onset 4", True),
         "leak", ["leak"], "linear", "dry run", 5),
    Case("st_kill", S, ["classic"], kill_at("selftest", "--steps 100 --period 0.1 --leak --onset 4", True, step=8),
         "leak", ["leak"], "linear", "dry run", 5),
    Case("st_stop", S, ["classic", "dmon"], stop_loggers_at("selftest", "--steps 20 --period 0.1", False, step=5),
         "no_leak", [], None, "dry run", 5),
    Case("st_loop", S, ["classic"], crash_loop("selftest", "--steps 5 --period 0.1 --leak --onset 2 --fraction 0.1",
                                               runs=3, gap=0.5), "leak", ["leak", "gpu_oom"], "linear", "dry run", 8),
    Case("st_seq", S, ["classic"], sequential(("selftest", "--steps 5 --period 0.1", False, "job1.log"), 0.5,
                                              ("selftest", "--steps 8 --period 0.1 --leak --onset 2", True, "job2.log")),
         "leak", ["leak"], "linear", "dry run", 8),
]
CASES = {"tune": TUNE, "heldout": []}
