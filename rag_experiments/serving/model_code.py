"""The pyfunc model "from code": MLflow copies this file into the logged model and runs it on load
(instead of unpickling an object with CloudPickle, which MLflow warns against)."""

import mlflow.models

from rag_experiments.serving.pyfunc_model import RetrieverModel

mlflow.models.set_model(RetrieverModel())
