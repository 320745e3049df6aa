"""A real uvicorn server on a thread, for the tests: the HTTP client is tested against a real local server."""

from __future__ import annotations

import socket
import threading
from typing import Any

from infembed.search.server import server_settings


class BackgroundServer:
    """Run an app with a real uvicorn server on a thread (tests, benchmarks, notebooks).

        >>> with BackgroundServer(create_app(index)) as url:
        ...     httpx.post(f"{url}/search", json={"query": "..."})

    ``port=0`` picks a free port; the socket is bound before the thread starts, so there is no race.
    """

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log_level: str = "warning",
        limit_concurrency: int | None = 256,
        header_timeout_s: float = 10.0,
    ):
        import uvicorn

        settings = server_settings(limit_concurrency, header_timeout_s)

        self.host = host
        self.socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.port = self.socket.getsockname()[1]
        config = uvicorn.Config(app, log_level=log_level, **settings)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True, name="infembed-uvicorn"
        )

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 30.0) -> str:
        import time

        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the uvicorn server thread exited during startup")
            if time.monotonic() > deadline:
                raise TimeoutError("the uvicorn server did not start")
            time.sleep(0.01)
        return self.url

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        self.socket.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
