"""Under ``CI=true`` a test that needs an extra fails when the extra is missing, instead of skipping.

``make test`` installs every extra, so here those tests run; but a CI whose extra failed to install
would otherwise pass with the tests that need it quietly skipped (issue 33). Loaded by
``tests/conftest.py``: it wraps ``pytest.importorskip`` for every test file, present and future, so
no test has to remember to. Outside CI a missing extra still skips, with its reason.
"""

from __future__ import annotations

import os

import pytest

_importorskip = pytest.importorskip


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def import_or_fail_in_ci(modname: str, minversion: str | None = None, reason: str | None = None, **kwargs):
    try:
        return _importorskip(modname, minversion=minversion, reason=reason, **kwargs)
    except pytest.skip.Exception as exc:
        if in_ci():
            pytest.fail(f"{modname} cannot be imported under CI=true ({exc.msg}): a missing extra fails the run "
                        "here; `make test` installs every extra (see the Makefile's setup-test)", pytrace=False)
        raise


def install() -> None:
    pytest.importorskip = import_or_fail_in_ci
