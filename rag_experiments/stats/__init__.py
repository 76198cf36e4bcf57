"""Statistics over per-case metric values: bootstrap intervals, paired tests, Holm correction."""
