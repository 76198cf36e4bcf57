"""Database access: the embedded server, connections and versioned migrations."""
