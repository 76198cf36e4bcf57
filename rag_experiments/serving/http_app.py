"""The ASGI app ``rag-exp serve`` runs under uvicorn: MLflow's scoring server for the model in
``$RAG_EXP_SERVED_MODEL`` (a ``models:/...`` URI), behind :class:`.http_guard.GuardedApp` (no
stack traces, no echoed input, JSON errors only). Importing this module loads the model."""

from __future__ import annotations

import os

from mlflow.pyfunc import scoring_server

from .http_app_env import MODEL_ENV
from .http_guard import GuardedApp

app = GuardedApp(scoring_server.init(scoring_server.load_model_with_mlflow_config(os.environ[MODEL_ENV])))
