"""The notifications domain: exactly-once side effects through the checkpoint."""
