"""The console's routes: its pages, ``/api/<read>``, ``/api/<action>`` and the live views."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from headwater.server.console.api import ACTIONS, READS, ApiError, checked, entry, json_response
from headwater.server.local_link import LinkClosed, LocalClient, is_error

if TYPE_CHECKING:
    from headwater.server.hosts import ConnectionHost

#: a live view's wait, after which it sends a comment: a gone page is seen then
HEARTBEAT_S = 5.0
#: idle connections kept per user for the next requests
POOL_SIZE = 4
STATIC_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
NAME = "headwater-console"


class Gatekeeper(Protocol):
    """What the admin server decides of a request (server/admin.py)."""

    def allowed(self, request: web.Request) -> web.Response | None: ...
    def credentials(self, request: web.Request) -> tuple[bytes, bytes] | None: ...


class Console:
    def __init__(self, host: ConnectionHost, gate: Gatekeeper) -> None:
        self.host = host
        self.gate = gate
        #: idle connections by the credentials they logged in with
        self._idle: dict[tuple[bytes, bytes] | None, list[LocalClient]] = {}
        #: the live views' connections (closed when the admin port closes)
        self._live: set[LocalClient] = set()
        self._static = resources.files("headwater.server.console") / "static"

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/", self._home)
        router.add_get("/console/", self._page)
        router.add_get("/console/static/{name}", self._asset)
        router.add_get("/api/live/tail", self._tail)
        router.add_get("/api/live/events", self._events)
        router.add_get("/api/{name}", self._read)
        router.add_post("/api/{name}", self._act)

    def close(self) -> None:
        for client in list(self._live):
            client.close()
        for idle in self._idle.values():
            for client in idle:
                client.close()
        self._idle.clear()

    # -- pages -----------------------------------------------------------------------------

    async def _home(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/console/")

    async def _page(self, request: web.Request) -> web.StreamResponse:
        refusal = self.gate.allowed(request)
        if refusal is not None:
            return refusal
        return self._file("index.html")

    async def _asset(self, request: web.Request) -> web.StreamResponse:
        return self._file(request.match_info["name"])

    def _file(self, name: str) -> web.Response:
        suffix = name[name.rfind(".") :] if "." in name else ""
        if "/" in name or suffix not in STATIC_TYPES:
            raise web.HTTPNotFound()
        resource = self._static / name
        if not resource.is_file():
            raise web.HTTPNotFound()
        return web.Response(
            body=resource.read_bytes(), content_type=STATIC_TYPES[suffix], charset="utf-8",
            headers={"Cache-Control": "no-cache"},
        )  # fmt: skip

    # -- JSON ------------------------------------------------------------------------------

    async def _read(self, request: web.Request) -> web.StreamResponse:
        reader = READS.get(request.match_info["name"])
        if reader is None:
            raise web.HTTPNotFound()
        refusal = self.gate.allowed(request)
        if refusal is not None:
            return refusal
        try:
            async with self._client(request) as client:
                return json_response(await reader(client, request.query))
        except ApiError as exc:
            return json_response({"error": exc.message}, exc.status)

    async def _act(self, request: web.Request) -> web.StreamResponse:
        action = ACTIONS.get(request.match_info["name"])
        if action is None:
            raise web.HTTPNotFound()
        refusal = self.gate.allowed(request)
        if refusal is not None:
            return refusal
        if request.content_type != "application/json":
            return json_response({"error": "an action's body is JSON"}, 415)
        try:
            body = await request.json()
        except ValueError:
            return json_response({"error": "the body is not valid JSON"}, 400)
        if not isinstance(body, dict):
            return json_response({"error": "the body is a JSON object"}, 400)
        try:
            async with self._client(request) as client:
                return json_response(await action(client, body))
        except ApiError as exc:
            return json_response({"error": exc.message}, exc.status)

    # -- connections -----------------------------------------------------------------------

    @asynccontextmanager
    async def _client(self, request: web.Request) -> AsyncIterator[LocalClient]:
        credentials = self._login(request)
        idle = self._idle.setdefault(credentials, [])
        client = idle.pop() if idle else None
        if client is None or client.closed:
            client = await self._connect(request, credentials)
        try:
            yield client
        except LinkClosed:
            raise ApiError(503, "the server closed the console's connection") from None
        if not client.closed and len(idle) < POOL_SIZE:
            idle.append(client)
        else:
            client.close()

    def _login(self, request: web.Request) -> tuple[bytes, bytes] | None:
        if not self.host.engine.acl.auth_required():
            return None
        return self.gate.credentials(request)

    async def _connect(
        self, request: web.Request, credentials: tuple[bytes, bytes] | None
    ) -> LocalClient:
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        local = transport.get_extra_info("sockname") if transport is not None else None
        client = LocalClient(self.host, _address(peer), _address(local))
        try:
            if credentials is not None:
                checked(await client.call("AUTH", *credentials))
            await client.call("CLIENT", "SETNAME", NAME)  # (a user may lack CLIENT)
            # (looking at the keys leaves their LRU/LFU alone, as Redis 7.2's NO-TOUCH)
            await client.call("CLIENT", "NO-TOUCH", "ON")
        except (ApiError, LinkClosed):
            client.close()
            raise
        return client

    # -- live views (Server-Sent Events) ---------------------------------------------------

    async def _tail(self, request: web.Request) -> web.StreamResponse:
        key = request.query.get("key", "")
        if not key:
            return json_response({"error": "key is required"}, 400)
        return await self._live_view(request, lambda client: _tail_events(client, key))

    async def _events(self, request: web.Request) -> web.StreamResponse:
        return await self._live_view(request, _keyspace_events)

    async def _live_view(self, request: web.Request, events: Any) -> web.StreamResponse:
        refusal = self.gate.allowed(request)
        if refusal is not None:
            return refusal
        try:
            client = await self._connect(request, self._login(request))
        except ApiError as exc:
            return json_response({"error": exc.message}, exc.status)
        except LinkClosed:
            return json_response({"error": "the server closed the connection"}, 503)
        self._live.add(client)
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        try:
            await response.prepare(request)
            async for event in events(client):
                await response.write(_sse(event))
        except (ConnectionError, LinkClosed, asyncio.CancelledError):
            pass
        finally:
            self._live.discard(client)
            client.close()
        return response


def _sse(event: dict[str, Any] | None) -> bytes:
    if event is None:
        return b": still here\n\n"
    return b"data: " + json.dumps(event).encode() + b"\n\n"


async def _tail_events(client: LocalClient, key: str) -> AsyncIterator[dict[str, Any] | None]:
    """Each new entry of ``key`` (XREAD BLOCK from ``$``); None when a wait ends empty."""
    last = "$"
    block_ms = int(HEARTBEAT_S * 1000)
    yield {"type": "ready"}
    while True:
        reply = await client.call("XREAD", "COUNT", 100, "BLOCK", block_ms, "STREAMS", key, last)
        if is_error(reply):
            yield {"type": "error", "error": str(reply)}
            return
        if reply is None:
            yield None
            continue
        for raw in reply[0][1]:
            item = entry(raw)
            last = item["id"]
            yield {"type": "entry", **item}


async def _keyspace_events(client: LocalClient) -> AsyncIterator[dict[str, Any] | None]:
    """Every keyspace and keyevent notification (as ``notify-keyspace-events`` enables)."""
    reply = await client.call("PSUBSCRIBE", "__key*__:*")
    if is_error(reply):
        yield {"type": "error", "error": str(reply)}
        return
    yield {"type": "ready"}
    while True:
        try:
            message = await asyncio.wait_for(client.reply(), HEARTBEAT_S)
        except TimeoutError:
            yield None
            continue
        if isinstance(message, list) and len(message) == 4 and message[0] == b"pmessage":
            channel = message[2].decode("utf-8", "backslashreplace")
            data = message[3].decode("utf-8", "backslashreplace")
            yield {"type": "event", "channel": channel, "message": data}


def _address(name: Any) -> tuple[str, int]:
    if isinstance(name, tuple) and len(name) >= 2:
        return str(name[0]), int(name[1])
    return ("", 0)
