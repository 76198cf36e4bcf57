"""Tracking: MLflow logging, the Hydra sweep callback, plots, comparison and promotion."""
