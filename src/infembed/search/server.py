"""Running the service: uvicorn with a deadline for request headers, bound to loopback unless told otherwise."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import logging
import socket
from typing import Any

from infembed.data.errors import SettingsError
from infembed.search.index import Index
from infembed.search.service import create_app
from infembed.search.settings import ServeSettings
from infembed.settings import check_number

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
    """uvicorn settings shared by :func:`serve` and the tests' background server (``limit_concurrency`` None:
    no limit); the values are checked by :class:`~infembed.search.settings.ServeSettings`."""
    ServeSettings.of(limit_concurrency=limit_concurrency, header_timeout=header_timeout_s)
    return {
        "limit_concurrency": limit_concurrency,
        "timeout_keep_alive": 5,  # an idle keep-alive connection is closed after 5 s
        "http": _h11_protocol(header_timeout_s),
    }


def check_port(host: str, port: int) -> None:
    """Refuse, in one line, an address this process cannot listen on (a port another server holds, a host that
    does not resolve), before anything is loaded: uvicorn finds out only after the model has loaded, and exits
    with its own text. Each address ``host`` resolves to is bound for a moment, as uvicorn will bind it."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise SettingsError(f"cannot listen on host {host!r}: {error.strerror}") from None
    for family, kind, proto, _, address in dict.fromkeys(addresses):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's create_server does
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    raise SettingsError(
                        f"port {port} on {host} is already in use (another server?): choose another --port, "
                        "or stop the program that holds it"
                    ) from None
                raise SettingsError(f"cannot listen on {host} port {port}: {error.strerror}") from None


def serve(
    index_dir: str,
    host: str | None = None,
    port: int | None = None,
    api_key: str | None = None,
    *,
    settings: ServeSettings | None = None,
    model: Any = None,
    device: str | None = None,
    ef_search: int | None = None,
    nprobe: int | None = None,
    limit_concurrency: int | None = None,
    header_timeout_s: float | None = None,
    log_level: str = "info",
    **app_settings: Any,
) -> None:
    """Load ``index_dir`` and serve it with uvicorn (blocks). ``settings``
    (:class:`~infembed.search.settings.ServeSettings`: address, limits, batching, timeouts), with the keyword
    arguments that are not None on top, is checked, and the port tried, before the index and its model load.
    Binds to loopback unless ``host`` says otherwise; a client has ``header_timeout`` seconds to send a
    request's headers (see :func:`_h11_protocol`); ``app_settings`` go to :func:`create_app` (max_batch,
    max_text_chars, max_k, batching, max_wait_ms, body_timeout_s, exclusions, exclusion_splitter, ...)."""
    import uvicorn

    fields = {f.name for f in dataclasses.fields(ServeSettings)} | {"body_timeout_s"}
    folded = {
        ("body_timeout" if name == "body_timeout_s" else name): app_settings.pop(name)
        for name in list(app_settings)
        if name in fields
    }
    settings = ServeSettings.of(
        settings,
        host=host,
        port=port,
        limit_concurrency=limit_concurrency,
        header_timeout=header_timeout_s,
        **folded,
    )
    uvicorn_settings = server_settings(settings.limit_concurrency, settings.header_timeout)
    check_number("ef_search", ef_search, minimum=1, integer=True, optional=True)
    check_number("nprobe", nprobe, minimum=1, integer=True, optional=True)
    check_port(settings.host, settings.port)

    if settings.host not in LOOPBACK and api_key is None:
        logger.warning(
            "serving on %s without an API key: anyone who can reach this port can query the index",
            settings.host,
        )
    index = Index.load(
        index_dir, model, device=device, ef_search=ef_search, nprobe=nprobe, backend=settings.backend
    )
    app = create_app(index, api_key=api_key, settings=settings, **app_settings)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=log_level, **uvicorn_settings)
