"""Notifications as a real side effect: a reference HTTP service and its idempotent client.

No Dagster here: the service is plain ``http.server`` + SQLite, the client plain ``http.client``.
See docs/notifications.md.
"""

from idem_assets.notify.client import DeliveryError, DeliveryResult, NotificationClient
from idem_assets.notify.faults import Faults
from idem_assets.notify.keys import idempotency_key
from idem_assets.notify.service import NotificationServer

# The environment variable holding the bearer token: the server's command line reads it, and
# idem_assets.resources passes it to the client as a dg.EnvVar, so both sides agree.
NOTIFY_TOKEN_ENV = "IDEM_NOTIFY_TOKEN"

__all__ = [
    "NOTIFY_TOKEN_ENV",
    "DeliveryError",
    "DeliveryResult",
    "Faults",
    "NotificationClient",
    "NotificationServer",
    "idempotency_key",
]
