"""The package's version, the one place it is written: ``sparkcast.__version__`` re-exports it,
pyproject.toml reads it at build time, and each checkpoint's layout record keeps the version
that wrote it (docs/operations.md, "Upgrades")."""

__version__ = "0.3.0"
