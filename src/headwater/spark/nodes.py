"""Which server holds a key: the ``url``'s server, or in a Redis Cluster the primary that owns
the key's hash slot.

A ``Nodes`` starts out sending everything to its first address (the url's server, or the node
the driver saw owning a partition's stream). It learns it talks to a cluster either when asked
(``discover``: INFO says ``cluster_enabled:1``; the driver does this, to SCAN every primary)
or from the first ``MOVED`` reply. The map is slot -> ``host:port``, loaded with CLUSTER SLOTS
and corrected by every ``MOVED`` (the fresher word during a reshard); a user whom ACL denies
CLUSTER SLOTS is still routed, one ``MOVED`` at a time. ``ASK`` sends ``ASKING`` and the
command to the importing node, once, without changing the map, as Redis Cluster clients do.

A node's client is opened from the url with only host and port replaced, so the password,
TLS and database of the url apply to every node.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import redis

from headwater.cluster.slots import SLOTS, key_slot
from headwater.spark import client as hw
from headwater.spark.client import Redirect

log = logging.getLogger("headwater.spark")

#: Redirections followed for one command before giving up (redis-py's RedisCluster: 16).
MAX_REDIRECTS = 16
#: Pause after CLUSTERDOWN or TRYAGAIN (a failover or a multi-key move under way).
BUSY_PAUSE = 0.2
#: Pause before following a redirection again, times the rounds so far (capped): while a slot
#: changes hands its two nodes may each say MOVED to the other for a moment, and 16 rounds
#: without a pause end within that moment.
REDIRECT_PAUSE, REDIRECT_PAUSE_CAP = 0.05, 0.5


def redirect_pause(rounds: int) -> None:
    """Sleep before redirection round ``rounds`` (none before the first two)."""
    if rounds > 1:
        time.sleep(min(REDIRECT_PAUSE * (rounds - 1), REDIRECT_PAUSE_CAP))


Row = TypeVar("Row", bound=Sequence[Any])


def address_of(url: str) -> str:
    """``host:port`` of a redis:// or rediss:// url ('' for a unix socket)."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return ""
    return join_address(parts.hostname or "localhost", parts.port or 6379)


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def url_at(url: str, address: str) -> str:
    """``url`` pointed at ``address`` (credentials, scheme, database and query kept)."""
    parts = urlsplit(url)
    if not address or parts.scheme == "unix":
        return url
    credentials, at, _ = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{credentials}{at}{address}"))


class Nodes:
    """Clients by address and the slot map; see the module docstring."""

    def __init__(
        self, url: str, connect_timeout: float, *, first: str = "", retry: bool = True
    ) -> None:
        self.url = url
        self.connect_timeout = connect_timeout
        self.retry = retry
        self.home = first or address_of(url)
        self.owners: list[str] | None = None  # slot -> address, once known to be a cluster
        self.clients: dict[str, redis.Redis] = {}

    @property
    def clustered(self) -> bool:
        return self.owners is not None

    def client_at(self, address: str) -> redis.Redis:
        client = self.clients.get(address)
        if client is None:
            target = url_at(self.url, address)
            client = hw.open_client(target, self.connect_timeout, retry=self.retry)
            self.clients[address] = client
        return client

    def address_for(self, key: str | bytes) -> str:
        if self.owners is None:
            return self.home
        raw = key.encode() if isinstance(key, str) else key
        return self.owners[key_slot(raw)]

    def client_for(self, key: str | bytes) -> redis.Redis:
        return self.client_at(self.address_for(key))

    def primaries(self) -> list[str]:
        """Every primary that owns slots (just the url's server outside a cluster)."""
        if self.owners is None:
            return [self.home]
        return list(dict.fromkeys(self.owners))

    def split(self, rows: Iterable[Row], key_at: int = 1) -> dict[str, list[Row]]:
        """Rows (commands) grouped by the address of their key (``row[key_at]``), in order."""
        if self.owners is None:
            return {self.home: list(rows)}
        groups: dict[str, list[Row]] = {}
        for row in rows:
            groups.setdefault(self.address_for(row[key_at]), []).append(row)
        return groups

    # -- learning the map ----------------------------------------------------------------------

    def discover(self) -> None:
        """Load the slot map if the server is a cluster node (a refused INFO: it is not)."""
        if not self.home:
            return
        try:
            info = bytes(hw.call(self.client_at(self.home), "INFO", "cluster"))
        except redis.ResponseError:
            return
        if b"cluster_enabled:1" in info:
            self.refresh()

    def refresh(self) -> None:
        """Load the whole map from the first node that answers CLUSTER SLOTS."""
        known = [self.home, *(a for a in self.primaries() if a != self.home)]
        for address in known:
            try:
                reply = hw.call(self.client_at(address), "CLUSTER", "SLOTS")
            except (redis.ResponseError, *hw.RETRYABLE) as exc:
                log.info("CLUSTER SLOTS at %s failed: %s", address, exc)
                continue
            self.owners = slot_owners(reply, address, self.owners or [self.home] * SLOTS)
            return

    def learn(self, redirect: Redirect, *, refresh: bool = True) -> None:
        """A ``MOVED``: the slot lives at its address now (others probably moved too, so the
        map is loaded again, unless the caller just did; the MOVED, fresher, wins)."""
        if self.owners is None:
            self.owners = [self.home] * SLOTS
        if refresh:
            self.refresh()
        self.owners[redirect.slot] = redirect.address

    # -- one command -------------------------------------------------------------------------

    def call(self, key: str | bytes, *args: Any) -> Any:
        """``args`` run on the node that owns ``key``, following MOVED and ASK."""
        asking: str | None = None
        for rounds in range(MAX_REDIRECTS):
            redirect_pause(rounds)
            try:
                if asking is None:
                    return hw.call(self.client_for(key), *args)
                return self._asking(asking, args)
            except (redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError) as exc:
                log.info("%s: %s; trying again", args[0], exc)
                time.sleep(BUSY_PAUSE)
            except redis.exceptions.AskError as exc:  # MOVED included (a subclass)
                redirect = self._redirect(exc)
                if redirect.ask:
                    asking = redirect.address
                else:
                    self.learn(redirect)
                    asking = None
        raise redis.ResponseError(f"{args[0]} {key!r}: more than {MAX_REDIRECTS} redirections")

    def _redirect(self, exc: redis.exceptions.AskError) -> Redirect:
        host = exc.host or self.home.rsplit(":", 1)[0].strip("[]")
        moved = isinstance(exc, redis.exceptions.MovedError)
        return Redirect(not moved, exc.slot_id, join_address(host, exc.port))

    def _asking(self, address: str, args: Sequence[Any]) -> Any:
        pipe = self.client_at(address).pipeline(transaction=False)
        hw.call(pipe, "ASKING")
        hw.call(pipe, *args)
        return pipe.execute()[1]

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
        self.clients.clear()


def slot_owners(reply: Any, asked: str, owners: list[str]) -> list[str]:
    """The map from a CLUSTER SLOTS reply (RESP2); a node with no host announced is reached
    at the host that answered, as Redis documents. Slots the reply leaves out keep ``owners``."""
    owners = list(owners)
    asked_host = asked.rsplit(":", 1)[0].strip("[]")
    for start, end, primary, *_replicas in reply:
        host = bytes(primary[0]).decode() or asked_host
        if host == "?":
            host = asked_host
        address = join_address(host, int(primary[1]))
        owners[int(start) : int(end) + 1] = [address] * (int(end) - int(start) + 1)
    return owners
