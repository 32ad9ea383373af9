"""Client-side caching: CLIENT TRACKING and its invalidation messages (Redis's tracking.c).

Theory of operation
-------------------
A tracking client in the default mode is told when a key it read may have changed. The
``Tracking`` table maps each key name (of any database, as in Redis) to the ids of the
clients that read it with a read-only command since its last change; a change sends each of
them one ``invalidate`` message and forgets the key, so a client hears of a key once per read.
A client in BCAST mode instead subscribes to key prefixes (the empty one: every key): each
change of a matching key is remembered in its prefix's state, and once per event-loop turn
(``broadcast``, Redis's beforeSleep) every subscriber of the prefix gets the keys changed
since, in one message.

The keyspace tells the table of every change through ``Database.signal_modified`` (the place
WATCH hears of them; a key deleted by expiry counts as changed by nobody) and of a flush
through ``Keyspace.signal_flushed``; both test ``Keyspace.tracking_on`` first, which is set
only while a client tracks or the table holds keys, so a write costs one test otherwise. The
engine tells the table which top-level client runs a command (``begin``/``end``) and which
client executes each command (a script's, inside a script): a message about a key the
running client changed itself waits until its reply has been written (``pending``), so it
never splits a reply, a transaction's or a script's included.

Messages: a RESP3 client gets a push ``>2 invalidate [keys]``; with ``REDIRECT id`` the
messages go to that client, as a push if it speaks RESP3, else as a Pub/Sub ``message`` on
``__redis__:invalidate`` if it has a subscription (any one, as in Redis); a flush sends a
null instead of keys. A redirection whose client is gone marks the tracking client broken
(flag ``R``), and tells it so (``tracking-redir-broken``) if it speaks RESP3.

The table holds at most ``tracking-table-max-keys`` keys: past it, ``limit_used_slots`` (before
each command and in the cron) invalidates keys, 100 a call and 100 more each call that stays
over the limit, as Redis does; it takes the oldest keys where Redis walks to random ones.
"""

from __future__ import annotations

from headwater.commands.context import Client, CommandSpec, PendingReplies
from headwater.commands.getkeys import KeySpec, command_keys, fixed_single_key
from headwater.config import Config
from headwater.keyspace import Keyspace

#: ``Client.tracking_flags`` (Redis's CLIENT_TRACKING_* flags)
TRACKING = 1
BCAST = 2
OPTIN = 4
OPTOUT = 8
CACHING = 16
NOLOOP = 32
BROKEN_REDIR = 64
#: what CLIENT TRACKING ON sets afresh each time (CACHING survives, as in Redis)
_MODES = BROKEN_REDIR | BCAST | OPTIN | OPTOUT | NOLOOP

#: read-only commands whose own keys are not remembered: a script's reads are, one by one
_SCRIPT_RUNNERS = frozenset(("eval_ro", "evalsha_ro", "fcall_ro"))

_INVALIDATE_PUSH = b">2\r\n$10\r\ninvalidate\r\n"
_INVALIDATE_MESSAGE = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"
#: the null a flush sends, by the tracking client's protocol (Redis's shared.null[resp])
_NULL = {2: b"$-1\r\n", 3: b"_\r\n"}


def _plan(row: CommandSpec) -> tuple[list[KeySpec], int]:
    from headwater.commands.introspection import key_specs_of

    specs = key_specs_of(row)
    single = fixed_single_key(specs)
    return specs, single[0] if single is not None else -1


def keys_array(keys: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(keys) + b"".join(b"$%d\r\n%s\r\n" % (len(k), k) for k in keys)


def prefixes_overlap(first: bytes, second: bytes) -> bool:
    """Redis's stringCheckPrefix: one is a prefix of the other."""
    shortest = min(len(first), len(second))
    return first[:shortest] == second[:shortest]


class BroadcastState:
    """One BCAST prefix: its subscribers, and the keys changed since the last broadcast with
    the client that changed each last (None: expiry, eviction) for NOLOOP."""

    __slots__ = ("clients", "keys")

    def __init__(self) -> None:
        self.clients: dict[Client, None] = {}
        self.keys: dict[bytes, Client | None] = {}


class Tracking:
    """The engine's invalidation table, BCAST prefixes and pending messages."""

    def __init__(
        self,
        keyspace: Keyspace,
        clients: dict[int, Client],
        replies: PendingReplies,
        config: Config,
    ) -> None:
        self.keyspace = keyspace
        self.clients = clients
        self.replies = replies
        self.config = config
        #: key -> ids of the clients that read it since its last change (insertion order)
        self.table: dict[bytes, dict[int, None]] = {}
        self.total_items = 0
        self.prefixes: dict[bytes, BroadcastState] = {}
        #: keys changed under some prefix since the last broadcast
        self.to_broadcast = False
        self.tracking_clients = 0
        #: the top-level client whose command runs now (Redis's server.current_client),
        #: and whether its command has started (messages to it then wait: ``pending``)
        self.current: Client | None = None
        self.executing = False
        #: the client executing the command now: the script's inside a script (the change's
        #: author for BCAST's NOLOOP, Redis's signalModifiedKey argument)
        self.modifier: Client | None = None
        #: messages to ``current`` about its own changes, sent after its reply (None: flush)
        self.pending: list[bytes | None] = []
        self._over_limit_runs = 0
        #: each read command's key specs, and its one key's index (-1: walk the specs)
        self._plans: dict[CommandSpec, tuple[list[KeySpec], int]] = {}
        keyspace.on_key_modified = self.key_modified
        keyspace.on_flushed = self.flushed

    def _update_active(self) -> None:
        self.keyspace.tracking_on = bool(self.tracking_clients or self.table)

    # -- CLIENT TRACKING ON|OFF --------------------------------------------------------------

    def enable(self, c: Client, redirect: int, options: int, prefixes: list[bytes]) -> None:
        """Redis's enableTracking (options already checked)."""
        if not c.tracking_flags & TRACKING:
            self.tracking_clients += 1
        c.tracking_flags = (c.tracking_flags & ~_MODES) | TRACKING
        c.tracking_redirect = redirect
        if options & BCAST:
            c.tracking_flags |= BCAST
            for prefix in prefixes or [b""]:
                self._subscribe_prefix(c, prefix)
        c.tracking_flags |= options & (OPTIN | OPTOUT | NOLOOP)
        self._update_active()

    def _subscribe_prefix(self, c: Client, prefix: bytes) -> None:
        state = self.prefixes.get(prefix)
        if state is None:
            state = self.prefixes[prefix] = BroadcastState()
        if c not in state.clients:
            state.clients[c] = None
            c.tracking_prefixes[prefix] = None

    def disable(self, c: Client) -> None:
        """Redis's disableTracking: its prefixes are left, its flags cleared. The keys it
        read stay in the table (Redis does not clean ids up either)."""
        if c.tracking_flags & BCAST:
            for prefix in c.tracking_prefixes:
                state = self.prefixes.get(prefix)
                if state is None:
                    continue
                state.clients.pop(c, None)
                if not state.clients:
                    del self.prefixes[prefix]
            c.tracking_prefixes = {}
        if c.tracking_flags & TRACKING:
            self.tracking_clients -= 1
            c.tracking_flags = 0
            self._update_active()

    def prefix_collision(self, c: Client, prefixes: list[bytes]) -> str | None:
        """Redis's checkPrefixCollisionsOrReply: the error text, if a prefix overlaps one the
        client has or another one given. (Redis replies OK too after the error when the
        overlap is not with the first prefix given; here the error is the only reply.)"""
        for i, prefix in enumerate(prefixes):
            for existing in c.tracking_prefixes:
                if prefixes_overlap(existing, prefix):
                    return (
                        f"Prefix '{_text(prefix)}' overlaps with an existing prefix "
                        f"'{_text(existing)}'. Prefixes for a single client must not overlap."
                    )
            for other in prefixes[i + 1 :]:
                if prefixes_overlap(prefix, other):
                    return (
                        f"Prefix '{_text(prefix)}' overlaps with another provided prefix "
                        f"'{_text(other)}'. Prefixes for a single client must not overlap."
                    )
        return None

    # -- the engine's calls ------------------------------------------------------------------

    def begin(self, c: Client) -> None:
        """A top-level command of ``c`` is about to run (Redis's processCommand)."""
        self.current = c
        self.executing = False
        if self.tracking_clients:
            self.limit_used_slots()
        self.executing = True

    def end(self, c: Client) -> None:
        """After its reply: its own invalidations, then (Redis's resetClient) CLIENT CACHING
        lapses unless the command was a CLIENT subcommand or is queued in MULTI."""
        self.executing = False
        self.send_pending()
        if c.tracking_flags & CACHING and not c.in_multi and not c.last_cmd.startswith(b"client|"):
            c.tracking_flags &= ~CACHING
        self.current = None
        self.modifier = None

    def send_pending(self) -> None:
        pending, self.pending = self.pending, []
        c = self.current
        if c is None or c.closed:
            return
        for key in pending:
            self._send(c, keys_array([key]) if key is not None else _NULL[c.resp])

    def remember(self, row: CommandSpec, argv: list[bytes], executing: Client) -> None:
        """After a read-only command: the keys it read, for the client that runs it (the
        caller of a script), unless OPTIN/OPTOUT and CLIENT CACHING say otherwise (Redis's
        trackingRememberKeys). Without a current client (tracking went on inside the
        transaction that runs it) the executing one is that client."""
        c = self.current if self.current is not None else executing
        flags = c.tracking_flags
        if not flags & TRACKING or flags & BCAST or row.name in _SCRIPT_RUNNERS:
            return
        caching = flags & CACHING
        if (flags & OPTIN and not caching) or (flags & OPTOUT and caching):
            return
        if "pubsub" in row.flags:  # shard channels are keys to COMMAND, not to a cache
            return
        plan = self._plans.get(row)
        if plan is None:
            plan = self._plans[row] = _plan(row)
        specs, single = plan
        if single >= 0:  # (one key at a fixed place: most reads)
            if single < len(argv):
                self._remember_key(argv[single], c.id)
        else:
            for index, _ in command_keys(row, specs, argv):
                self._remember_key(argv[index], c.id)
        self.keyspace.tracking_on = True

    def _remember_key(self, key: bytes, client_id: int) -> None:
        ids = self.table.get(key)
        if ids is None:
            ids = self.table[key] = {}
        if client_id not in ids:
            ids[client_id] = None
            self.total_items += 1

    # -- invalidation ------------------------------------------------------------------------

    def key_modified(self, key: bytes, expired: bool) -> None:
        """A key changed (``expired``: deleted by expiry, by nobody)."""
        self.invalidate(key, None if expired else self.modifier, broadcast=True)

    def invalidate(self, key: bytes, author: Client | None, broadcast: bool) -> None:
        """Redis's trackingInvalidateKey."""
        if broadcast and self.prefixes:
            self._remember_to_broadcast(key, author)
        ids = self.table.pop(key, None)
        if ids is None:
            return
        self.total_items -= len(ids)
        current = self.current
        for client_id in ids:
            target = self.clients.get(client_id)
            if target is None or target.tracking_flags & (TRACKING | BCAST) != TRACKING:
                continue  # (a client now in BCAST mode: its older reads no longer count)
            if target is current:
                if target.tracking_flags & NOLOOP:
                    continue
                if self.executing:
                    self.pending.append(key)
                    continue
            self._send(target, keys_array([key]))
        if not self.table and not self.tracking_clients:
            self.keyspace.tracking_on = False

    def _remember_to_broadcast(self, key: bytes, author: Client | None) -> None:
        for prefix, state in self.prefixes.items():
            if key.startswith(prefix):
                state.keys[key] = author
                self.to_broadcast = True

    def flushed(self) -> None:
        """FLUSHALL or FLUSHDB (any database): every tracking client is told with a null
        (its own message after its reply), and the whole table is forgotten."""
        for c in list(self.clients.values()):
            if not c.tracking_flags & TRACKING:
                continue
            if c is self.current:
                self.pending.append(None)
            else:
                self._send(c, _NULL[c.resp])
        self.table.clear()
        self.total_items = 0
        self._update_active()

    def broadcast(self) -> None:
        """Once per loop turn: each prefix's changed keys to its subscribers, in one message
        (Redis's trackingBroadcastInvalidationMessages); a NOLOOP client's leaves out the
        keys it changed itself."""
        if not self.to_broadcast:
            return
        self.to_broadcast = False
        for prefix in sorted(self.prefixes):
            state = self.prefixes[prefix]
            if not state.keys:
                continue
            changed, state.keys = state.keys, {}
            keys = sorted(changed)
            common = b""
            for c in list(state.clients):
                if c.tracking_flags & NOLOOP:
                    others = [key for key in keys if changed[key] is not c]
                    if others:
                        self._send(c, keys_array(others))
                else:
                    common = common or keys_array(keys)
                    self._send(c, common)

    def limit_used_slots(self) -> None:
        """Redis's trackingLimitUsedSlots: invalidate keys until the table is within
        ``tracking-table-max-keys``, with an effort that grows while it stays over."""
        limit = self.config["tracking-table-max-keys"]
        table = self.table
        if not limit or len(table) <= limit:
            self._over_limit_runs = 0
            return
        for _ in range(100 * (self._over_limit_runs + 1)):
            if not table:
                break
            self.invalidate(next(iter(table)), None, broadcast=False)
            if len(table) <= limit:
                self._over_limit_runs = 0
                return
        self._over_limit_runs += 1

    # -- messages ----------------------------------------------------------------------------

    def _send(self, c: Client, payload: bytes) -> None:
        """Redis's sendTrackingMessage: ``payload`` is the encoded keys (or null)."""
        redirected = False
        if c.tracking_redirect:
            target = self.clients.get(c.tracking_redirect)
            if target is None or _gone(target):
                c.tracking_flags |= BROKEN_REDIR
                if c.resp > 2:
                    broken = b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % c.tracking_redirect
                    self._push(c, broken)
                return
            c, redirected = target, True
        if c.resp > 2:
            self._push(c, _INVALIDATE_PUSH + payload)
        elif redirected and c.subscribed():
            self._push(c, _INVALIDATE_MESSAGE + payload)
        # else a RESP2 client without redirection: RESP2 has nowhere to put the message

    def _push(self, c: Client, frame: bytes) -> None:
        """Written even under CLIENT REPLY OFF (Redis's CLIENT_PUSHING)."""
        if c.closed:
            return
        c.out.append(frame)
        self.replies.add(c)

    # -- introspection -----------------------------------------------------------------------

    def info_lines(self) -> list[str]:
        return [
            f"tracking_total_keys:{len(self.table)}",
            f"tracking_total_items:{self.total_items}",
            f"tracking_total_prefixes:{len(self.prefixes)}",
        ]


def _gone(c: Client) -> bool:
    """Closed, or closing with its last reply sent (QUIT: Redis has freed it by then)."""
    return c.closed or (c.close_after_reply and not c.out)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def flags_reply(c: Client) -> list[bytes]:
    """CLIENT TRACKINGINFO's flags."""
    flags = c.tracking_flags
    names = [b"on" if flags & TRACKING else b"off"]
    if flags & BCAST:
        names.append(b"bcast")
    if flags & OPTIN:
        names.append(b"optin")
        if flags & CACHING:
            names.append(b"caching-yes")
    if flags & OPTOUT:
        names.append(b"optout")
        if flags & CACHING:
            names.append(b"caching-no")
    if flags & NOLOOP:
        names.append(b"noloop")
    if flags & BROKEN_REDIR:
        names.append(b"broken_redirect")
    return names
