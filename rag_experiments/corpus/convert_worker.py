"""Converters run in a child process with a time and a memory limit.

A converter is third-party code parsing a file someone dropped into a folder: a 3 MB DOCX whose
60 MB of varied XML passes every archive check made mammoth run > 400 s at 2.1 GB until it was
killed (issue 55), and a page nested deeply enough overflows the recursion of an HTML walk. So
each file the conversion cache does not hold is converted in one child process per load
(:class:`ConversionWorker`: started on the first cache miss, so a corpus whose conversions are all
cached, or that is all Markdown, starts none), which

* runs under ``RLIMIT_AS`` = :data:`MEMORY_ENV` MiB (default :data:`DEFAULT_MEMORY_MB`): a converter
  that needs more gets a MemoryError, or dies, and the file is one line in the load report;
* is killed when one file takes more than :data:`SECONDS_ENV` seconds (default
  :data:`DEFAULT_SECONDS`) and started again for the next file;
* converts in a thread with a 256 MiB stack and a recursion limit of :data:`RECURSION_LIMIT`, so a
  page nested thousands of elements deep (sqlite3-doc's doc_backlink_crossref.html) is converted,
  not skipped with RecursionError; deeper still is one line, as before.

A failure at a limit is stored in the conversion cache with the limits it ran under
(:meth:`~.convert_cache.ConversionCache.put`): the file is not tried again on every run, only when
its bytes change or a limit is raised. Protocol: length-prefixed pickles over the child's
stdin/stdout (both ends are this module); the child's own stdout is sent to stderr, so a converter
that prints cannot corrupt it.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from ..errors import UserError
from .convert import ConversionError, Converted, convert_bytes

SECONDS_ENV = "RAG_EXP_CONVERT_TIMEOUT"
MEMORY_ENV = "RAG_EXP_CONVERT_MEMORY_MB"
DEFAULT_SECONDS = 120.0  # pypdf reads a 1,000-page PDF in well under a minute; mammoth ~4 s per MB of XML
DEFAULT_MEMORY_MB = 2048  # mammoth: ~33 MiB per MB of XML; MAX_XML_BYTES (64 MiB) would need ~2.1 GB
RECURSION_LIMIT = 60_000
STACK_BYTES = 256 * 2**20
START_SECONDS = 60.0  # the child's start-up (Python, the converter modules): not the file's time
_READY = b"R"


@dataclass(frozen=True)
class Limits:
    """What one file's conversion may take: wall-clock seconds and address space (MiB)."""

    seconds: float = DEFAULT_SECONDS
    memory_mb: int = DEFAULT_MEMORY_MB

    @classmethod
    def from_env(cls) -> Limits:
        def number(name: str, default: float, kind):
            raw = os.environ.get(name, "").strip()
            if not raw:
                return default
            try:
                value = kind(raw)
            except ValueError:
                value = 0
            if value <= 0:
                raise UserError(f"{name}={raw!r}: must be a positive number", hint=f"unset it for {default}")
            return value
        return cls(number(SECONDS_ENV, DEFAULT_SECONDS, float), number(MEMORY_ENV, DEFAULT_MEMORY_MB, int))

    def to_json(self) -> dict:
        return {"seconds": self.seconds, "memory_mb": self.memory_mb}

    def exceed(self, recorded: dict) -> bool:
        """True when these limits give more room than ``recorded`` (a failure's limits): retry."""
        return self.seconds > float(recorded.get("seconds", 0)) or self.memory_mb > int(recorded.get("memory_mb", 0))


class ConversionWorker:
    """``convert(data, suffix)`` -> (:class:`Converted` or a failure reason, whether a limit ended it).
    One child at a time; ``close()`` (or the context manager) ends it."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits.from_env()
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> ConversionWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", __name__, str(self.limits.memory_mb)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                close_fds=True)
        try:
            if _read_exact(proc.stdout.fileno(), 1, time.monotonic() + START_SECONDS) != _READY:
                raise EOFError
        except (TimeoutError, EOFError, OSError):
            _kill(proc)
            raise ConversionError("the converter process did not start (run python -m "
                                  f"{__name__} 2048 to see why)") from None
        return proc

    def convert(self, data: bytes, suffix: str) -> tuple[Converted | str, bool]:
        if self._proc is None or self._proc.poll() is not None:
            try:
                self._proc = self._start()
            except ConversionError as exc:
                return exc.reason, False
        proc = self._proc
        payload = pickle.dumps((suffix, data), protocol=pickle.HIGHEST_PROTOCOL)
        deadline = time.monotonic() + self.limits.seconds
        try:
            proc.stdin.write(len(payload).to_bytes(8, "big") + payload)
            proc.stdin.flush()
            size = int.from_bytes(_read_exact(proc.stdout.fileno(), 8, deadline), "big")
            kind, value = pickle.loads(_read_exact(proc.stdout.fileno(), size, deadline))
        except TimeoutError:
            self.close()
            return (f"conversion took more than {self.limits.seconds:g} s, the limit ({SECONDS_ENV}); "
                    "not tried again until the file changes or the limit is raised"), True
        except (EOFError, OSError, pickle.UnpicklingError):
            code = self.close()
            how = f"signal {signal.Signals(-code).name}" if code and code < 0 else f"exit {code}"
            return (f"the converter process died ({how}): over its {self.limits.memory_mb} MiB memory limit "
                    f"({MEMORY_ENV})?"), True
        if kind == "ok":
            return Converted.from_json(value), False
        return value, kind == "limit"

    def close(self) -> int | None:
        proc, self._proc = self._proc, None
        return _kill(proc) if proc is not None else None


def _kill(proc: subprocess.Popen) -> int | None:
    if proc.poll() is None:
        proc.kill()
    for stream in (proc.stdin, proc.stdout):
        try:
            stream.close()
        except OSError:
            pass
    return proc.wait()


def _read_exact(fd: int, n: int, deadline: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError
        chunk = os.read(fd, min(n - len(buf), 2**20))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


# --------------------------------------------------------------------------------------------
# the child
# --------------------------------------------------------------------------------------------


def _convert_one(data: bytes, suffix: str, memory_mb: int) -> tuple[str, object]:
    try:
        return "ok", convert_bytes(data, suffix).to_json()
    except ConversionError as exc:
        if exc.reason.startswith("ran out of memory"):
            return "limit", f"ran out of its {memory_mb} MiB memory limit converting it ({MEMORY_ENV})"
        return "fail", exc.reason
    except MemoryError:
        return "limit", f"ran out of its {memory_mb} MiB memory limit converting it ({MEMORY_ENV})"


def _child(memory_mb: int) -> int:
    import resource

    if memory_mb > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
    sys.setrecursionlimit(RECURSION_LIMIT)
    threading.stack_size(min(STACK_BYTES, max(memory_mb, 64) * 2**20 // 4))
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a converter that prints writes to stderr, never into the protocol
    requests = sys.stdin.buffer
    channel.write(_READY)
    channel.flush()
    while True:
        head = requests.read(8)
        if len(head) < 8:
            return 0
        suffix, data = pickle.loads(requests.read(int.from_bytes(head, "big")))
        result: list[tuple[str, object]] = []
        worker = threading.Thread(target=lambda: result.append(_convert_one(data, suffix, memory_mb)))
        worker.start()
        worker.join()
        reply = pickle.dumps(result[0] if result else ("fail", "conversion failed (no result)"),
                             protocol=pickle.HIGHEST_PROTOCOL)
        channel.write(len(reply).to_bytes(8, "big") + reply)
        channel.flush()


if __name__ == "__main__":
    sys.exit(_child(int(sys.argv[1])))
