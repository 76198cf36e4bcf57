"""Secret redaction takes linear time on hostile lines (issue 55 probe 4).

`corpus show` on a document with one 300,000-letter line took 4 min 29 s, and a 100,000-character
`golden add --query` 26.7 s before saying the limit is 4,000: the patterns tried a match from
every letter of a run and scanned the rest of the run each time. tools/redaction_time.py
measures it (300,000 characters: under a second now; 20,000 dotted characters took 62 s before).
Here each shape runs in a child process with a deadline two orders of magnitude above what the
linear patterns need, so the test says "hangs" or "does not", not how fast; and the masking
itself still works on the same lines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rag_experiments.redaction import redact_text

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD_S = 60  # the old patterns: ~25 min for the dotted line (62 s at 20,000); the new: ~1 s

CHILD = r"""
import sys
from rag_experiments import redaction
n = 100_000
for text in ("a" * n, "a." * (n // 2), "x://h?" + "?" * n, "password= " + " " * n + "a", "ab-" * (n // 3)):
    redaction.redact_text(text)
    redaction.register_argv(["golden", "add", "--query", text, f"x={text}"])
print("done")
"""


def test_redaction_of_100000_character_lines_does_not_hang():
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert proc.stdout.strip() == "done", proc.stderr[-2000:]


def test_masking_still_finds_secrets_at_the_end_of_long_runs():
    run = "a." * 50_000
    text = f"{run} db.password=Long-Run-S3cret postgresql://u:Url-Long-S3cret@h/db?sslpassword=Q-Long-S3cret {run}"
    out = redact_text(text)
    for secret in ("Long-Run-S3cret", "Url-Long-S3cret", "Q-Long-S3cret"):
        assert secret not in out
    assert "db.password=***" in out and "postgresql://u:***@h/db" in out
    assert out.startswith(run) and out.endswith(run)
