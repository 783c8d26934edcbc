"""The events stream domain: micro-batches of an append-only landing folder, exactly once."""
