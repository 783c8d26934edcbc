"""`make dagster-home` links the profile IDEM_INSTANCE names, and checks its settings."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PG_NAMES = ("DAGSTER_PG_HOST", "DAGSTER_PG_DB", "DAGSTER_PG_USERNAME", "DAGSTER_PG_PASSWORD")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _make(home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DAGSTER_PG_", "IDEM_", "PGPASSWORD", "MAKE"))
    }
    return subprocess.run(
        ["make", "-s", "dagster-home", f"DAGSTER_HOME={home}"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_default_profile_is_the_embedded_sqlite_instance(tmp_path):
    done = _make(tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "dagster.yaml").resolve() == ROOT / "deploy" / "sqlite" / "dagster.yaml"


def test_postgres_profile_is_linked_when_its_settings_are_present(tmp_path):
    values = {name: f"v-{secrets.token_hex(4)}" for name in PG_NAMES}
    done = _make(tmp_path, IDEM_INSTANCE="postgres", **values)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "dagster.yaml").resolve() == ROOT / "deploy" / "postgres" / "dagster.yaml"


def test_postgres_profile_names_missing_settings_without_printing_values(tmp_path):
    password = f"pw-{secrets.token_hex(8)}"
    done = _make(tmp_path, IDEM_INSTANCE="postgres", DAGSTER_PG_PASSWORD=password)
    assert done.returncode != 0
    assert (
        "DAGSTER_PG_HOST DAGSTER_PG_DB DAGSTER_PG_USERNAME (see docs/deployment.md)" in done.stderr
    )
    assert password not in done.stdout + done.stderr
    assert not (tmp_path / "dagster.yaml").exists()


def test_unknown_profile_is_refused(tmp_path):
    done = _make(tmp_path, IDEM_INSTANCE="mysql")
    assert done.returncode != 0
    assert "IDEM_INSTANCE must be sqlite or postgres, not 'mysql'" in done.stderr
