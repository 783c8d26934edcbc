"""The sales domain."""
