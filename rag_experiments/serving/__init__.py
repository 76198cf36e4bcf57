"""The promoted retriever as something that runs: a Python API (:class:`Retriever`), an MLflow
pyfunc model (:mod:`.pyfunc_model`, logged and registered by :mod:`.model_logging`), and the
``rag-exp search`` command. Sits at the right end of the pipeline: it may import everything.
"""

from .hits import SearchHit
from .retriever import Retriever

__all__ = ["Retriever", "SearchHit"]
