"""The browser tests' screenshots are CI artifacts (issue 48 item 6): a GitHub workflow runs the
suite through .ci/run and uploads test-artifacts/browser/ even when a test failed, and the browser
test writes its screenshots exactly there (relative to the repository, as in a clean CI clone)."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SHOTS = "test-artifacts/browser"


def _workflows() -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text(encoding="utf-8"))
            for p in sorted((ROOT / ".github" / "workflows").glob("*.yml"))}


def test_a_workflow_runs_the_ci_script_and_uploads_the_screenshots_always():
    found = []
    for name, wf in _workflows().items():
        for job_name, job in (wf.get("jobs") or {}).items():
            steps = job.get("steps") or []
            if not any(".ci/run" in str(s.get("run", "")) for s in steps):
                continue
            uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@")
                       and SHOTS in str((s.get("with") or {}).get("path", ""))]
            assert uploads, f"{name}: job {job_name} runs .ci/run but uploads no {SHOTS}/"
            assert all(str(s.get("if", "")).replace(" ", "") == "always()" for s in uploads), \
                f"{name}: the upload must run when a test failed (if: always())"
            # .ci/run installs Debian's chromium with apt-get: a Debian container, as root
            assert "bookworm" in str(job.get("container", "")) or "debian" in str(job.get("container", ""))
            found.append(f"{name}:{job_name}")
    assert found, "no workflow in .github/workflows runs .ci/run"


def test_the_browser_test_writes_its_screenshots_where_ci_uploads_them():
    from tests.tracking import test_ui_browser

    assert test_ui_browser.SHOTS == ROOT / SHOTS
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in script and "chromium" in script
