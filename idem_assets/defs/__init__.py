"""Dagster definitions, one package per domain."""
