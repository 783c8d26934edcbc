"""The catalog domain."""
