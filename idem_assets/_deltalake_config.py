"""dagster-deltalake's storage config classes, without importing its type handlers.

The IO manager and ``LakeResource`` take dagster-deltalake's own ``LocalConfig``,
``S3Config``, ``AzureConfig``, ``GcsConfig`` and ``ClientConfig`` (the drop-in promise: a
project passes the objects it already builds). Those live in ``dagster_deltalake.config``,
which needs only Dagster; but importing any submodule runs the package's ``__init__``, which
imports its Arrow type handler and with it ``pyarrow.dataset`` and pandas (~0.4 s in every
process that loads the code location, before it does anything). So the config module is
loaded from the installed package under its own name: a later ``import dagster_deltalake``
finds it in ``sys.modules`` and uses the very same classes.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

_NAME = "dagster_deltalake.config"


def _config_module() -> ModuleType:
    loaded = sys.modules.get(_NAME)
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("dagster_deltalake")
    if package is None or not package.submodule_search_locations:
        raise ImportError("dagster-deltalake is not installed")
    location = f"{list(package.submodule_search_locations)[0]}/config.py"
    spec = importlib.util.spec_from_file_location(_NAME, location)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_NAME]
        raise
    return module


_config = _config_module()
AzureConfig = _config.AzureConfig
ClientConfig = _config.ClientConfig
GcsConfig = _config.GcsConfig
LocalConfig = _config.LocalConfig
S3Config = _config.S3Config
