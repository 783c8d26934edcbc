"""The reference notification service on real HTTP: embeddable in tests or run as a process."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from idem_assets.notify.api import NotificationHTTPServer
from idem_assets.notify.faults import Faults
from idem_assets.notify.protocol import NotificationService
from idem_assets.notify.store import IdempotencyStore

logger = logging.getLogger(__name__)

DEFAULT_IN_FLIGHT_TIMEOUT_SECONDS = 30.0


class NotificationServer:
    """The service on real HTTP, served from a background thread (port 0 picks a free port).

    ``clock`` (epoch seconds, ``time.time`` by default) is the store's: it judges when an
    in-flight key counts as abandoned.
    """

    def __init__(
        self,
        db_path: str | Path,
        token: str,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: Faults | None = None,
        in_flight_timeout_seconds: float = DEFAULT_IN_FLIGHT_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        store = IdempotencyStore(db_path, in_flight_timeout_seconds, clock)
        self.service = NotificationService(store, token, faults)
        self._address = (host, port)
        self._httpd: NotificationHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL such as ``http://127.0.0.1:54321`` (the real port when 0 was asked)."""
        if self._httpd is None:
            raise RuntimeError("the notification server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def faults(self) -> Faults:
        """The faults currently injected."""
        return self.service.injector.faults

    def set_faults(self, faults: Faults) -> None:
        """Change the injected faults while running."""
        self.service.injector.replace(faults)

    def stats(self) -> dict[str, int]:
        """The service's counters, read directly from its store."""
        return self.service.store.stats()

    def start(self) -> NotificationServer:
        """Bind and serve from a background daemon thread; returns self for chaining."""
        if self._httpd is not None:
            raise RuntimeError("the notification server is already started")
        self.service.stopping.clear()
        self._httpd = NotificationHTTPServer(self._address, self.service)
        # A short poll interval keeps stop() fast; idle polling is cheap.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="notification-server",
            daemon=True,
        )
        self._thread.start()
        logger.info("notification service listening on %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving; requests still in flight are abandoned as a crash would leave them."""
        self.service.stopping.set()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> NotificationServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
