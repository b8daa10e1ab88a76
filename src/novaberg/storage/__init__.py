"""Storage: SQLite in ``NOVABERG_HOME`` with named, append-only migrations."""
