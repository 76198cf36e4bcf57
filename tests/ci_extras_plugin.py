"""``-p tests.ci_extras_plugin``: the CI-extras wrapper as a plugin, for the subprocess in
tests/test_ci_extras.py (whose throwaway test file lies outside this conftest's reach)."""

from tests import ci_extras

ci_extras.install()
