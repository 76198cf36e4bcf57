"""One module per rag-exp command group; each exposes register(subparsers)."""
