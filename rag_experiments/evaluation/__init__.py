"""Evaluation: span relevance, metrics (trec_eval/ranx conventions), per-case and segmented results."""
