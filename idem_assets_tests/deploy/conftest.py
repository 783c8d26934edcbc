"""Deployment tests use the S3 fixtures of ``idem_assets_tests.fixtures.s3`` (loaded for the
whole suite by the top-level conftest)."""
