"""The package's version, in a module of its own: every layer may import it without importing the
package's top (which offers the Python API, forensics.analyze, and so sits above them all). The build
reads it from here (pyproject.toml, [tool.hatch.version]): a literal, so `gpu-forensics --version` needs
no importlib.metadata."""
__version__ = "0.1.0"
