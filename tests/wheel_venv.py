"""The wheel of this repository installed into a fresh venv outside it: the tool as a new team gets it.

``installed`` (a fixture; import it into a test module) returns that venv's bin folder. The wheel is
built with ``pip wheel --no-deps``; the fresh venv gets the wheel (no dependencies) and reaches the
dependencies through a .pth line naming this venv's site-packages (no network; a .pth inside that
folder, such as this repository's editable install, is not processed from there), so
``rag_experiments`` is imported from the installed wheel.

One build per test session: every module that imports the fixture shares the first build, and under
pytest-xdist the workers share it too (a folder of the run's, under a lock: the first builds, the
others wait for it or find it made). A build takes 15-30 s on a loaded 2-core machine; the install
is uv's when the venv has it (~1 s against pip's ~6 s: the same wheel, bytecode compiled as pip does).
"""

from __future__ import annotations

import fcntl
import os
import shutil
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
    uv = Path(sys.executable).with_name("uv")
    # bytecode compiled at install, as pip does: PYTHONDONTWRITEBYTECODE (set here) would leave
    # every command of the tests compiling the package again
    installer = ([str(uv), "pip", "install", "--offline", "--link-mode", "copy", "--compile-bytecode"] if uv.exists()
                 else [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index"])
    install = subprocess.run([*installer, "--python", str(py), "--no-deps", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    return venv / "bin"


def _session_folder(tmp_path_factory) -> Path:
    """A folder every xdist worker of this run shares (the workers' temp folders' parent, named by
    the run's id); without xdist, this process's own."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if os.environ.get("PYTEST_XDIST_WORKER") and run:
        return tmp_path_factory.getbasetemp().parent / f"wheel-{run}"
    return tmp_path_factory.mktemp("wheel")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin folder of a fresh venv holding the wheel of this repository (built once per session)."""
    built = _BUILT.get("bin")
    if built is None or not (built / "rag-exp").exists():
        folder = _session_folder(tmp_path_factory)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "build.lock", "w") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # another worker's build: wait for it
            done = folder / "built"
            if not done.exists():
                for partial in ("dist", "venv"):  # a worker that died mid-build
                    shutil.rmtree(folder / partial, ignore_errors=True)
                done.write_text(str(build_installed_venv(folder)))
            built = _BUILT["bin"] = Path(done.read_text())
    return built


def project_env(installed_bin: Path, **extra: str) -> dict[str, str]:
    """The environment of a new team's shell: this one without the repository's settings, the
    installed venv first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAG_EXP_HOME", "MLFLOW_TRACKING_URI", "PYTHONPATH")}
    env.update(PATH=f"{installed_bin}{os.pathsep}{env.get('PATH', '')}", **extra)
    return env
