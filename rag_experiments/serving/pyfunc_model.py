"""The champion as an MLflow pyfunc model: ``mlflow.pyfunc.load_model(...).predict`` and
``mlflow models serve`` both run :class:`RetrieverModel`.

Input: a list of query strings, or a DataFrame with a ``query`` column. Params: ``k`` (hits per
query, default 10; 1 to 100 queries a call). The served model never ingests: a database without
the corpus answers 503 until an operator ingests (``rag-exp ingest``; ``Retriever.from_config(...,
ingest=True)`` from Python); a request's ``params.ingest`` is refused.
Output: a DataFrame, one row per hit (``query``, then the :class:`SearchHit` fields).

Errors follow MLflow's scoring server, which answers an ``MlflowException`` with the HTTP status
of its ``error_code`` and a JSON body ``{"error_code", "message"}`` (anything else becomes a 400
with a stack trace): bad input raises ``INVALID_PARAMETER_VALUE`` (400); a database that does
not hold the promoted corpus raises ``TEMPORARILY_UNAVAILABLE`` (503: the server is up but cannot
serve until someone ingests); other user errors (unreachable database, bad config) ``INVALID_STATE``;
anything else ``INTERNAL_ERROR`` (500) with one line, its traceback in the server's log only: no
response carries a stack trace.
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
from typing import Any

import mlflow.pyfunc
import numpy as np
import pandas as pd
import yaml
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, INVALID_PARAMETER_VALUE, INVALID_STATE, TEMPORARILY_UNAVAILABLE

from ..errors import UserError
from ..redaction import redact_text
from .hits import ARTIFACT_CONFIG, ARTIFACT_MANIFEST, DEFAULT_K, hits_frame
from .retriever import InvalidQuery, NotIngested, Retriever


def _mlflow_error(exc: Exception):
    code = (INVALID_PARAMETER_VALUE if isinstance(exc, InvalidQuery) else
            TEMPORARILY_UNAVAILABLE if isinstance(exc, NotIngested) else INVALID_STATE)
    return MlflowException(str(exc).replace("\n  hint: ", "; "), error_code=code)


def _internal_error(exc: Exception):
    """An unexpected failure as one line for the client (MLflow's scoring server would otherwise
    answer 400 with the stack trace in the body); the traceback goes to the server's log."""
    traceback.print_exc(file=sys.stderr)
    first = (str(exc).strip().splitlines() or [""])[0]
    return MlflowException(redact_text(f"the retriever failed: {type(exc).__name__}: {first}"[:500]),
                           error_code=INTERNAL_ERROR)


def queries_of(model_input: Any) -> list:
    """The queries from a list, a Series or a DataFrame with a ``query`` column (the serving
    layer turns ``{"inputs": [...]}`` and ``{"dataframe_split": ...}`` into a DataFrame)."""
    if isinstance(model_input, pd.DataFrame):
        if "query" in model_input.columns:
            return model_input["query"].tolist()
        if model_input.shape[1] == 1:
            return model_input.iloc[:, 0].tolist()
        raise InvalidQuery(f"input: a DataFrame needs a 'query' column, got columns {list(model_input.columns)}")
    if isinstance(model_input, pd.Series):
        return model_input.tolist()

    if isinstance(model_input, np.ndarray):
        return model_input.tolist()
    if isinstance(model_input, str):
        return [model_input]
    if isinstance(model_input, (list, tuple)):
        return [q.get("query") if isinstance(q, dict) else q for q in model_input]
    raise InvalidQuery(f"input: give a list of queries or a DataFrame with a 'query' column, "
                       f"got {type(model_input).__name__}")


def _k(params: dict) -> Any:
    k = params.get("k", DEFAULT_K)
    # the schema layer hands over numpy integers; JSON may carry 10.0
    try:
        import numpy as np

        if isinstance(k, np.integer):
            return int(k)
    except ImportError:  # pragma: no cover
        pass
    if isinstance(k, float) and k.is_integer():
        return int(k)
    return k


class RetrieverModel(mlflow.pyfunc.PythonModel):
    """Opens the database lazily (at the first predict), so loading never needs a database."""

    # MLflow wraps a subclass's predict for type-hint validation and, with no type hints, warns
    # "Add type hints to the `predict` method" on every import (promote, serve, load). The
    # model's input is checked by its explicit signature (hits.signature) instead; this is the
    # switch MLflow's own ChatModel uses to skip that wrapping.
    _skip_type_hint_validation = True

    def load_context(self, context) -> None:
        with open(context.artifacts[ARTIFACT_CONFIG], encoding="utf-8") as fh:
            self.config = yaml.safe_load(fh)
        with open(context.artifacts[ARTIFACT_MANIFEST], encoding="utf-8") as fh:
            self.manifest = json.load(fh)
        self._retriever = None
        self._opening = threading.Lock()  # the scoring server may call the first predicts concurrently

    def retriever(self):
        with self._opening:
            if self._retriever is None:  # stays None after a refusal: the next call checks again
                self._retriever = Retriever.from_config(
                    self.config, ingest=False, expected_corpus_digest=self.manifest.get("corpus_digest") or None)
        return self._retriever

    def predict(self, context, model_input, params: dict | None = None):
        params = params or {}
        try:
            unknown = sorted(set(params) - {"k"})
            if unknown:
                raise InvalidQuery(f"params: {', '.join(unknown)} not accepted (the served model takes k only; "
                                   "ingesting is an operator's decision: rag-exp ingest)")
            queries = queries_of(model_input)
            k = _k(params)
            r = self.retriever()
            results = r.search_many(queries, k)
        except UserError as exc:
            raise _mlflow_error(exc) from None
        except Exception as exc:  # noqa: BLE001 - a bug or a failing database: one line out, the trace in the log
            raise _internal_error(exc) from None
        return hits_frame(list(zip(queries, results)))

