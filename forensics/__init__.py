"""gpu-forensics: forensics of GPU memory leaks from the logs a job leaves behind."""
import sys as _sys

if "polars" not in _sys.modules:
    # polars' allocator reads its setting once, when polars is imported: how long freed pages are kept
    # (forensics/allocator.py says why, and when a memory limit makes them handed back at once)
    from forensics import allocator as _allocator

    _allocator.configure()

from forensics.version import __version__  # noqa: E402,F401  (after the allocator setting above)


def __getattr__(name: str):
    # the API loads polars and the detectors only when used: `gpu-forensics --version` stays quick
    if name in ("analyze", "Result"):
        from forensics import api

        return getattr(api, name)
    raise AttributeError(f"module 'forensics' has no attribute {name!r}")
