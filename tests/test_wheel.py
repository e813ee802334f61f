"""The built wheel carries the templates and the JSON summary's schema: install it into a fresh virtual
environment and render a report from a folder outside the repository (so the repo's own templates/
cannot be found)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from test_cli import write_incident

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_renders_report(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is needed to copy the tree")
    dist = tmp_path / "dist"
    # --no-isolation: build with the hatchling already installed (no download)
    res = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(ROOT)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    wheel = next(dist.glob("gpu_forensics-*.whl"))
    venv = tmp_path / "venv"
    # the environment's dependencies are reused; the package itself comes only from the wheel
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    # --system-site-packages reaches the base interpreter's packages only; when the tests run from a
    # virtual environment (as .ci/run does) its packages are where the dependencies are: a .pth file
    # puts its folders after the new environment's own (.pth files inside them, such as the editable
    # install's, are not read, so the package still comes from the wheel)
    new_site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    Path(new_site, "_test_deps.pth").write_text("".join(f"{d}\n" for d in ours))
    res = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    where = subprocess.run([str(py), "-c", "import forensics, pathlib, json; from importlib import resources; "
                            "p = pathlib.Path(forensics.__file__).parent; print(p); print((p / 'templates').is_dir()); "
                            "print(json.loads(resources.files('forensics.report').joinpath('summary.schema.json')"
                            ".read_text())['title'].replace(' ', '_')); "
                            "from importlib.metadata import version; print(version('gpu-forensics') == forensics.__version__)"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=60)
    pkg_dir, has_templates, schema_title, same_version = where.stdout.split()
    assert str(venv) in pkg_dir, f"imported from {pkg_dir}, not the wheel"
    assert has_templates == "True"
    assert schema_title == "gpu-forensics_JSON_summary"   # the summary's JSON Schema ships in the package
    assert same_version == "True"   # the wheel's metadata takes its version from forensics/version.py
    job = write_incident(tmp_path / "job")
    res = subprocess.run([str(venv / "bin" / "gpu-forensics"), "report", str(job), "-o", "r.html", "--json", "s.json",
                          "--tz", "UTC"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "<svg" in (tmp_path / "r.html").read_text()
    assert json.loads((tmp_path / "s.json").read_text())["verdict"] == "leak"
