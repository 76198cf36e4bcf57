"""Hydra plugins of rag-experiments (Hydra loads sweepers only from the hydra_plugins namespace)."""
