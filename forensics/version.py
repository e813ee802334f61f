"""The package's version, in a module of its own: every layer may import it without importing the
package's top (which offers the Python API, forensics.analyze, and so sits above them all)."""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gpu-forensics")
except PackageNotFoundError:  # running from a checkout without install
    __version__ = "0.0.0+local"
