"""The compatibility suite: run by ``python -m idem_assets_tests.compat`` against the wheel."""
