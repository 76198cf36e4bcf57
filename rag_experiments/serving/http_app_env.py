"""The environment variable naming the model :mod:`.http_app` serves (apart, so ``rag-exp serve``
can set it without importing the app, which loads the model)."""

MODEL_ENV = "RAG_EXP_SERVED_MODEL"
