"""gpu-forensics: forensics of GPU memory leaks from the logs a job leaves behind."""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("gpu-forensics")
except PackageNotFoundError:  # running from a checkout without install
    __version__ = "0.0.0+local"
