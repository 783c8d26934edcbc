"""The events domain."""
