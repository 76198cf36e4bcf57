"""The golden set: append-only records, their resolution into evaluation cases, and tools."""

from .resolve import EvalCase, Evidence, GoldenSet, load_golden
from .golden_file import GoldenFile

__all__ = ["EvalCase", "Evidence", "GoldenSet", "GoldenFile", "load_golden"]
