"""The admin HTTP port (issue 34): ``admin-port`` (0: off) on ``admin-bind``.

Theory of operation
-------------------
aiohttp serves it on the server's own event loop: made for asyncio, keep-alive, and the
streaming responses and WebSockets the console's live views need. A handler runs between
two turns of the loop, so what it reads of the engine is one moment, as a command sees it.

Who may look: the server's own users. When a connection would have to AUTH (the default user
has a password or is off), a request carries HTTP Basic credentials of an enabled user; none
or wrong ones get 401 with a challenge. A user must be allowed INFO (what a metrics scraper
runs against Redis) or gets 403. With TLS configured (``tls-port``), the admin port speaks
TLS with the same certificates and client-certificate rule.

Routes: ``/metrics`` (server/metrics.py, Prometheus's text format 0.0.4); the web console
(``/``, ``/console/…``, ``/api/…``: server/console/).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import ssl
from typing import TYPE_CHECKING

from aiohttp import web

from headwater.commands.acl import check
from headwater.server.console.routes import Console
from headwater.server.metrics import Scrape, observer

if TYPE_CHECKING:
    from headwater.acl.users import User
    from headwater.server.hosts import ConnectionHost

log = logging.getLogger(__name__)

_CHALLENGE = {"WWW-Authenticate": 'Basic realm="headwater", charset="UTF-8"'}
_TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"


class AdminServer:
    def __init__(self, host: ConnectionHost) -> None:
        self.engine = engine = host.engine
        self.observer = observer(engine)
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self.console = Console(host, self)
        self.console.add_routes(app.router)
        # (a live view ends when its connection closes: ``close`` closes them first)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=1.0
        )

    async def start(self, host: str, port: int, tls: ssl.SSLContext | None) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, ssl_context=tls, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:  # (the start's message names the port at fault)
            await self._runner.cleanup()
            reason = exc.strerror or str(exc)
            raise OSError(exc.errno, f"admin port {host}:{port}: {reason}") from None
        scheme = "https" if tls is not None else "http"
        log.info("admin port: %s://%s:%d/ (console) and /metrics", scheme, host, port)

    async def close(self) -> None:
        self.console.close()
        await self._runner.cleanup()

    def allowed(self, request: web.Request) -> web.Response | None:
        """None when the request may look; else the refusal to send."""
        acl = self.engine.acl
        if not acl.auth_required():
            return None
        user = self._user(request)
        if user is None:
            return web.Response(status=401, text="authentication required\n", headers=_CHALLENGE)
        if check(user, self.engine.table[b"INFO"], [b"INFO"])[0]:
            return web.Response(status=403, text="this user may not run INFO\n")
        return None

    def credentials(self, request: web.Request) -> tuple[bytes, bytes] | None:
        """The request's Basic credentials (name, password), if well formed."""
        header = request.headers.get("Authorization", "")
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            name, sep, password = base64.b64decode(encoded, validate=True).partition(b":")
        except (binascii.Error, ValueError):
            return None
        return (name, password) if sep else None

    def _user(self, request: web.Request) -> User | None:
        credentials = self.credentials(request)
        if credentials is None:
            return None
        user = self.engine.acl.authenticate(*credentials)
        return user if user is not None and user.enabled else None

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        refusal = self.allowed(request)
        if refusal is not None:
            return refusal
        scrape = Scrape(self.engine, self.observer)
        for _ in scrape.steps():
            await asyncio.sleep(0)  # (the clients are served between two steps)
        body = scrape.text().encode()
        return web.Response(body=body, headers={"Content-Type": _TEXT_FORMAT})
