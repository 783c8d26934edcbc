"""Benchmarks: run as modules, e.g. `python -m benchmarks.checkpoint_bench --quick`."""
