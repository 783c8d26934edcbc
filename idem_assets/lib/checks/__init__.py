"""Asset checks that prove idempotence and account for every landing row, per partition."""

from idem_assets.lib.checks.conservation import CONSERVATION
from idem_assets.lib.checks.factory import RERUN_EQUALITY, UNIQUE_NATURAL_KEY, standard_checks
from idem_assets.lib.checks.landing import QUARANTINE_SHARE, landing_checks
from idem_assets.lib.checks.per_partition import CheckName, LakeCheck, spans
from idem_assets.lib.checks.proofs import Reads

__all__ = [
    "CONSERVATION",
    "QUARANTINE_SHARE",
    "RERUN_EQUALITY",
    "UNIQUE_NATURAL_KEY",
    "CheckName",
    "LakeCheck",
    "Reads",
    "landing_checks",
    "spans",
    "standard_checks",
]
