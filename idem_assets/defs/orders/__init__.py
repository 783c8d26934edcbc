"""The orders domain."""
