"""Idempotent daily assets on Dagster and Delta Lake."""

__version__ = "0.1.0"
