"""The wheel of this repository installed into a fresh venv outside it: the tool as a new team gets it.

``installed`` (a fixture; import it into a test module) returns that venv's bin folder. The wheel is
built with ``pip wheel --no-deps``; the fresh venv gets the wheel (no dependencies) and reaches the
dependencies through a .pth line naming this venv's site-packages (no network; a .pth inside that
folder, such as this repository's editable install, is not processed from there), so
``rag_experiments`` is imported from the installed wheel.

One build per test process: every module that imports the fixture shares the first build (under
pytest-xdist each worker builds its own; a build and install take about 10 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_BUILT: dict[str, Path] = {}  # "bin" -> the venv's bin folder, once built in this process


def build_installed_venv(tmp: Path) -> Path:
    """Build the wheel into ``tmp/dist``, make ``tmp/venv`` and install the wheel there; its bin folder."""
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                            "-q", "-w", str(tmp / "dist")], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("rag_experiments-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "deps-from-the-test-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                              "-q", str(wheel)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    return venv / "bin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin folder of a fresh venv holding the wheel of this repository (built once per process)."""
    built = _BUILT.get("bin")
    if built is None or not (built / "rag-exp").exists():
        built = _BUILT["bin"] = build_installed_venv(tmp_path_factory.mktemp("wheel"))
    return built


def project_env(installed_bin: Path, **extra: str) -> dict[str, str]:
    """The environment of a new team's shell: this one without the repository's settings, the
    installed venv first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAG_EXP_HOME", "MLFLOW_TRACKING_URI", "PYTHONPATH")}
    env.update(PATH=f"{installed_bin}{os.pathsep}{env.get('PATH', '')}", **extra)
    return env
