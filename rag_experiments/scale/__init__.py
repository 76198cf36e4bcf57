"""Scaling out: sweeps and ingest on a Ray cluster with a shared PostgreSQL and MLflow server."""
