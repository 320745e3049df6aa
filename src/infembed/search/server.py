"""Running the service: uvicorn with a deadline for request headers, bound to loopback unless told otherwise."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from infembed.data.errors import SettingsError
from infembed.search.index import Index
from infembed.search.service import create_app

logger = logging.getLogger("infembed.search.service")

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _h11_protocol(header_timeout_s: float) -> type:
    """uvicorn's h11 protocol plus a deadline for a request's headers.

    uvicorn times out only idle keep-alive connections, and only once a response has been sent: a client that
    connects and sends half a request line keeps its connection, and ``limit_concurrency`` such clients lock
    everyone else out with 503. Here a connection that has no request in progress (just opened, or between
    requests) is closed when ``header_timeout_s`` pass without a complete set of headers; a slow body is
    bounded by the app (``body_timeout_s``)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class _H11ProtocolWithHeaderTimeout(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def _arm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            self._header_timer = self.loop.call_later(header_timeout_s, self._header_timeout)

        def _header_timeout(self) -> None:
            self._header_timer = None
            in_progress = self.cycle is not None and not self.cycle.response_complete
            if not in_progress and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_header_timer()

        def on_response_complete(self) -> None:
            self._arm_header_timer()  # before a pipelined request is started by super()
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None
            super().connection_lost(exc)

    return _H11ProtocolWithHeaderTimeout


def server_settings(limit_concurrency: int | None, header_timeout_s: float) -> dict[str, Any]:
    """uvicorn settings shared by :func:`serve` and the tests' background server."""
    if not header_timeout_s > 0:
        raise SettingsError(f"header_timeout_s must be positive, got {header_timeout_s}")
    return {
        "limit_concurrency": limit_concurrency,
        "timeout_keep_alive": 5,  # an idle keep-alive connection is closed after 5 s
        "http": _h11_protocol(header_timeout_s),
    }


def serve(
    index_dir: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_key: str | None = None,
    *,
    model: Any = None,
    device: str | None = None,
    ef_search: int | None = None,
    nprobe: int | None = None,
    limit_concurrency: int = 256,
    header_timeout_s: float = 10.0,
    log_level: str = "info",
    **app_settings: Any,
) -> None:
    """Load ``index_dir`` and serve it with uvicorn (blocks). Binds to loopback unless ``host`` says otherwise;
    a client has ``header_timeout_s`` to send a request's headers (see :func:`_h11_protocol`);
    ``app_settings`` go to :func:`create_app` (max_batch, max_text_chars, max_k, batching, max_wait_ms,
    body_timeout_s)."""
    import uvicorn

    settings = server_settings(limit_concurrency, header_timeout_s)

    if host not in LOOPBACK and api_key is None:
        logger.warning(
            "serving on %s without an API key: anyone who can reach this port can query the index", host
        )
    index = Index.load(index_dir, model, device=device, ef_search=ef_search, nprobe=nprobe)
    app = create_app(index, api_key=api_key, **app_settings)
    uvicorn.run(app, host=host, port=port, log_level=log_level, **settings)
