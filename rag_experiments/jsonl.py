"""One line of a JSONL file the tool reads (a golden set, a BEIR collection, a stored run), decoded
with the one error wording they share: ``FILE:LINE: not valid JSON (msg at column N)``. Below every
layer; what a valid line must hold is each reader's own check."""

from __future__ import annotations

import json
from typing import Any


def json_line(where: str, line: str, error: type[Exception]) -> Any:
    """``json.loads(line)``, or ``error`` naming ``where`` (``path:line``) and the decoder's message."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
