"""gpu-forensics: forensics of GPU memory leaks from the logs a job leaves behind."""
import os as _os
import sys as _sys

if "polars" not in _sys.modules:
    # polars' allocator (jemalloc, configured from this variable when polars is imported) gives freed
    # pages back to the OS after 0.5 s; a big file is read in 32 MB columns that are freed and allocated
    # again every few hundred ms, and each page taken back costs a fault on reuse (5 s of system time on
    # a month of nvidia-smi CSV, 10-15 % of the run). Kept 10 s: ~150 MB more at the peak. A value the
    # user set comes after ours and wins.
    _mine = "dirty_decay_ms:10000,muzzy_decay_ms:10000"
    _theirs = _os.environ.get("_RJEM_MALLOC_CONF")
    _os.environ["_RJEM_MALLOC_CONF"] = _mine + ("," + _theirs if _theirs else "")

from forensics.version import __version__  # noqa: E402,F401  (after the allocator setting above)


def __getattr__(name: str):
    # the API loads polars and the detectors only when used: `gpu-forensics --version` stays quick
    if name in ("analyze", "Result"):
        from forensics import api

        return getattr(api, name)
    raise AttributeError(f"module 'forensics' has no attribute {name!r}")
