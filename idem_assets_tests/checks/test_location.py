"""Where ``idem-assets`` finds the code location: as dg and dagster do, in real projects."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pytest

from idem_assets.cli.location import CheckCommandError, load_definitions

COMMAND = Path(sys.executable).with_name("idem-assets")  # installed with the package

# What `create-dagster project team` writes (src/ layout; dg's older flat layout has no src/).
SCAFFOLD_PYPROJECT = """\
[project]
name = "team"
version = "0.1.0"

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "team"
registry_modules = ["team.components.*"]
"""
SCAFFOLD_DEFINITIONS = """\
from pathlib import Path

import dagster as dg


@dg.definitions
def defs():
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
"""
ORDERS = """\
import dagster as dg


@dg.asset(pool="lake/orders", metadata={"idem_backfill/writers": 3})
def orders():
    return 1


@dg.asset(deps=[orders])
def daily_sales():
    return 2
"""


def _asset(name: str) -> str:
    """A module holding one Definitions object with one asset called ``name``."""
    return f"import dagster as dg\n\n\n@dg.asset\ndef {name}():\n    return 1\n\n\n" + (
        f"defs = dg.Definitions(assets=[{name}])\n"
    )


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def _keys(definitions: dg.Definitions) -> set[str]:
    return {key.to_user_string() for key in definitions.resolve_all_asset_keys()}


def _package(layout: str) -> str:
    return "src/team" if layout == "src" else "team"


def _scaffolded(root: Path, layout: str) -> Path:
    package = _package(layout)
    return _write(
        root,
        {
            "pyproject.toml": SCAFFOLD_PYPROJECT,
            f"{package}/__init__.py": "",
            f"{package}/definitions.py": SCAFFOLD_DEFINITIONS,
            f"{package}/defs/__init__.py": "",
            f"{package}/defs/orders.py": ORDERS,
        },
    )


@pytest.fixture(autouse=True)
def _fresh_imports(tmp_path: Path):
    """Each test imports its own projects: their modules and sys.path entries go after it."""
    path = list(sys.path)
    yield
    sys.path[:] = path
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


@pytest.mark.parametrize("layout", ["src", "flat"])
@pytest.mark.parametrize("where", ["root", "subfolder"])
def test_a_dg_scaffolded_project_is_found_from_its_root_and_below(tmp_path, layout, where):
    root = _scaffolded(tmp_path / "team", layout)
    cwd = root if where == "root" else root / _package(layout) / "defs"
    definitions = load_definitions(None, None, None, cwd)
    assert _keys(definitions) == {"orders", "daily_sales"}  # <root_module>.definitions, lazy


@pytest.mark.parametrize(
    ("tables", "found"),
    [
        (
            '[tool.dg.project]\nroot_module = "ranked"\n'
            'code_location_target_module = "ranked.location"\n',
            "by_target_module",
        ),
        # dg reads only [tool.dg.project]; `dagster dev` would take [tool.dagster] here
        (
            '[tool.dg.project]\nroot_module = "ranked"\n\n'
            '[tool.dagster]\nmodule_name = "ranked.legacy"\n',
            "by_root_module",
        ),
    ],
    ids=["code_location_target_module", "over [tool.dagster]"],
)
def test_which_module_a_dg_project_names(tmp_path, tables, found):
    files = {
        "pyproject.toml": f'[project]\nname = "ranked"\n\n[tool.dg]\n{tables}',
        "ranked/__init__.py": "",
        "ranked/definitions.py": _asset("by_root_module"),
        "ranked/location.py": _asset("by_target_module"),
        "ranked/legacy.py": _asset("by_dagster_module_name"),
    }
    root = _write(tmp_path / "ranked", files)
    assert _keys(load_definitions(None, None, None, root)) == {found}


@pytest.mark.parametrize(
    "table",
    [
        'module_name = "legacy.defs_here"',
        'modules = [{type = "module", name = "legacy.defs_here"}]',
    ],
    ids=["module_name", "modules"],
)
def test_a_dagster_project_names_its_module_in_tool_dagster(tmp_path, table):
    root = _write(
        tmp_path / "legacy",
        {
            "pyproject.toml": f'[project]\nname = "legacy"\n\n[tool.dagster]\n{table}\n',
            "legacy/__init__.py": "",
            "legacy/defs_here.py": _asset("legacy_asset"),
        },
    )
    assert _keys(load_definitions(None, None, None, root / "legacy")) == {"legacy_asset"}


def test_a_dg_toml_hides_the_pyproject_beside_it_as_dg_does(tmp_path):
    root = _write(
        tmp_path / "tp",
        {
            "dg.toml": 'directory_type = "project"\n\n[project]\nroot_module = "tp"\n',
            "pyproject.toml": '[tool.dagster]\nmodule_name = "tp.other"\n',
            "tp/__init__.py": "",
            "tp/definitions.py": _asset("from_dg_toml"),
            "tp/other.py": _asset("from_tool_dagster"),
        },
    )
    assert _keys(load_definitions(None, None, None, root)) == {"from_dg_toml"}


def test_a_pyproject_without_dg_or_dagster_tables_is_passed_over(tmp_path):
    root = _scaffolded(tmp_path / "team", "src")
    tools = _write(root / "tools", {"pyproject.toml": "[tool.ruff]\nline-length = 100\n"})
    assert _keys(load_definitions(None, None, None, tools)) == {"orders", "daily_sales"}


def test_with_nothing_to_find_the_error_names_where_it_looked(tmp_path):
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    if any((p / "pyproject.toml").is_file() or (p / "dg.toml").is_file() for p in cwd.parents):
        pytest.skip(f"a config file above {tmp_path}")
    with pytest.raises(CheckCommandError) as nothing:
        load_definitions(None, None, None, cwd)
    assert str(cwd) in str(nothing.value) and "any folder above it" in str(nothing.value)
    assert "pass -m MODULE or -f FILE" in str(nothing.value)

    # dagster reads no python_file from [tool.dagster]; a dg workspace is no project
    for text in (
        '[tool.dagster]\npython_file = "x.py"\n',
        '[tool.dg]\ndirectory_type = "workspace"\n',
    ):
        _write(cwd, {"pyproject.toml": text})
        with pytest.raises(CheckCommandError) as names_none:
            load_definitions(None, None, None, cwd)
        assert f"{cwd / 'pyproject.toml'} names none" in str(names_none.value)
        assert "pass -m MODULE or -f FILE" in str(names_none.value)


def test_a_module_that_is_not_there_is_a_one_line_error(tmp_path):
    root = _write(
        tmp_path / "gone", {"pyproject.toml": '[tool.dg.project]\nroot_module = "gone"\n'}
    )
    with pytest.raises(CheckCommandError, match=r"cannot import gone\.definitions \(named by .*"):
        load_definitions(None, None, None, root)


TWO_DEFINITIONS = """\
import dagster as dg


@dg.asset
def first_asset():
    return 1


@dg.asset
def second_asset():
    return 2


first = dg.Definitions(assets=[first_asset])
second = dg.Definitions(assets=[second_asset])
"""


def test_two_definitions_need_a_name_and_a_lazy_one_comes_first(tmp_path):
    _write(tmp_path, {"two_defs.py": TWO_DEFINITIONS})
    with pytest.raises(CheckCommandError, match=r"has 2 Definitions objects \(first, second\)"):
        load_definitions(None, "two_defs.py", None, tmp_path)
    assert _keys(load_definitions(None, "two_defs.py", "second", tmp_path)) == {"second_asset"}
    with pytest.raises(CheckCommandError, match="not both"):  # dagster's -m and -f exclude
        load_definitions("two_defs", "two_defs.py", None, tmp_path)

    lazy = TWO_DEFINITIONS + "\n\n@dg.definitions\ndef lazy():\n    return first\n"
    _write(tmp_path, {"lazy_first.py": lazy})  # dagster takes @dg.definitions before objects
    assert _keys(load_definitions(None, "lazy_first.py", None, tmp_path)) == {"first_asset"}
    _write(
        tmp_path, {"two_lazy.py": lazy + "\n\n@dg.definitions\ndef other():\n    return second\n"}
    )
    with pytest.raises(CheckCommandError, match=r"2 @dg.definitions functions .*name one with -a"):
        load_definitions("two_lazy", None, None, tmp_path)


def test_the_command_finds_a_scaffolded_project_and_says_where_it_looked(tmp_path):
    root = _scaffolded(tmp_path / "team", "src")
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "PYTHONPATH")}

    def pools(cwd: Path) -> subprocess.CompletedProcess[str]:
        argv = [str(COMMAND), "pools"]
        return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)

    found = pools(root / "src" / "team" / "defs")
    assert found.returncode == 0, found.stderr[-2000:]
    assert found.stdout.split() == ["lake/orders", "3", "writer(s)"]  # the project's asset
    (tmp_path / "elsewhere").mkdir()
    if not any((p / "pyproject.toml").is_file() for p in tmp_path.parents):
        missing = pools(tmp_path / "elsewhere")
        assert missing.returncode == 2
        assert f"in {tmp_path / 'elsewhere'} or any folder above it" in missing.stderr
