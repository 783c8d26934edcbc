"""The customers domain."""
