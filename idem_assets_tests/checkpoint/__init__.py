"""Tests of the checkpoint store on SQLite and PostgreSQL."""
