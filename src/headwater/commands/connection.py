"""Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET and CLIENT."""

from __future__ import annotations

from headwater import REDIS_COMPAT_VERSION
from headwater.acl.users import DENIED_AUTH
from headwater.commands import tracking
from headwater.commands.args import parse_int, strict_int
from headwater.commands.context import Client, help_handler, reject_subcommand, spec
from headwater.commands.transactions import discard
from headwater.errors import (
    DB_INDEX_OUT_OF_RANGE,
    NOPROTO,
    NOT_INTEGER,
    SYNTAX,
    WRONGPASS,
    ReplyError,
    err,
    subcommand_syntax,
    wrong_arity,
)
from headwater.resp.parser import wire_size
from headwater.resp.types import OK, PONG, Raw, Reply, RSet, Status, Verbatim

NO_PASSWORD_CONFIGURED = err(
    "AUTH <password> called without any password configured for the default user. "
    "Are you sure your configuration is correct?"
)
HELLO_NOAUTH = ReplyError(
    "NOAUTH",
    "HELLO must be called with the client already authenticated, otherwise the HELLO <proto> "
    "AUTH <user> <pass> option can be used to authenticate the client and select the RESP "
    "protocol version at the same time",
)
BAD_CLIENT_NAME = err("Client names cannot contain spaces, newlines or special characters.")


def cmd_ping(c: Client, argv: list[bytes]) -> Reply:
    if len(argv) > 2:
        raise wrong_arity("ping")
    if c.hooked and c.resp == 2 and c.subscribed():  # subscribed mode's own answer
        return [b"pong", argv[1] if len(argv) == 2 else b""]
    return PONG if len(argv) == 1 else argv[1]


def cmd_echo(c: Client, argv: list[bytes]) -> Reply:
    return argv[1]


def _check_password(c: Client, argv: list[bytes], name: bytes, password: bytes) -> None:
    """Log in as the user or raise WRONGPASS (logged in ACL LOG, the object being the
    command's name as sent)."""
    acl = c.server.acl
    user = acl.authenticate(name, password)
    if user is None:
        info = client_info_line(c).rstrip("\n")
        context = "multi" if c.in_multi else "toplevel"
        now, limit = c.server.clock.now_ms(), c.server.config["acllog-max-len"]
        acl.log.add(DENIED_AUTH, context, argv[0], name, info, now, limit)
        raise WRONGPASS
    c.user = user
    c.authenticated = True


def cmd_auth(c: Client, argv: list[bytes]) -> Reply:
    """AUTH [username] password"""
    if len(argv) > 3:
        raise SYNTAX
    if len(argv) == 2:
        if c.server.acl.default.nopass:
            raise NO_PASSWORD_CONFIGURED
        _check_password(c, argv, b"default", argv[1])
    else:
        _check_password(c, argv, argv[1], argv[2])
    return OK


def valid_client_name(name: bytes) -> bool:
    return all(33 <= ch <= 126 for ch in name)


def cmd_hello(c: Client, argv: list[bytes]) -> Reply:
    """HELLO [protover [AUTH username password] [SETNAME clientname]]"""
    version = 0
    i = 1
    if len(argv) >= 2:
        parsed = strict_int(argv[1])
        if parsed is None:
            raise err("Protocol version is not an integer or out of range")
        if parsed < 2 or parsed > 3:
            raise NOPROTO
        version, i = parsed, 2
    auth: tuple[bytes, bytes] | None = None
    name: bytes | None = None
    while i < len(argv):
        more = len(argv) - 1 - i
        option = argv[i].upper()
        if option == b"AUTH" and more >= 2:
            auth = (argv[i + 1], argv[i + 2])
            i += 3
        elif option == b"SETNAME" and more >= 1:
            name = argv[i + 1]
            if not valid_client_name(name):
                raise BAD_CLIENT_NAME
            i += 2
        else:
            raise err(f"Syntax error in HELLO option '{argv[i].decode('utf-8', 'replace')}'")
    if auth is not None:
        _check_password(c, argv, *auth)
    if not c.authenticated:
        raise HELLO_NOAUTH
    if name is not None:
        c.name = name
    if version:
        c.resp = version
        c.update_hooked()  # a subscriber back in RESP2 is in subscribed mode
    return {
        b"server": b"redis",
        b"version": REDIS_COMPAT_VERSION.encode(),
        b"proto": c.resp,
        b"id": c.id,
        b"mode": b"standalone",
        b"role": b"master",
        b"modules": [],
    }


def cmd_select(c: Client, argv: list[bytes]) -> Reply:
    index = strict_int(argv[1])
    if index is None or not -(2**31) <= index < 2**31:
        raise NOT_INTEGER
    if index and c.server.cluster is not None:
        raise err("SELECT is not allowed in cluster mode")
    if not 0 <= index < len(c.server.keyspace.dbs):
        raise DB_INDEX_OUT_OF_RANGE
    c.select(index)
    return OK


def cmd_quit(c: Client, argv: list[bytes]) -> Reply:
    c.close_after_reply = True
    return OK


def cmd_reset(c: Client, argv: list[bytes]) -> Reply:
    """Back to a fresh connection's state: no transaction, no watches, db 0, RESP2."""
    discard(c)
    c.server.pubsub.forget(c)  # subscriptions and MONITOR end, silently
    c.select(0)
    c.resp = 2
    c.update_hooked()
    c.name = b""
    c.reply_on = True
    c.skip_next_reply = False
    c.no_evict = c.no_touch = False
    c.server.tracking.disable(c)
    c.user = c.server.acl.default
    c.authenticated = not c.server.acl.auth_required()
    return Status(b"RESET")


# ---------------------------------------------------------------------------------------------
# CLIENT


def client_info_line(c: Client, running: list[bytes] | None = None) -> str:
    """Redis's catClientInfoString. ``running``: the command ``c`` runs now (CLIENT LIST or
    INFO itself), which Redis still holds: in the query buffer (``qbuf``, with what was
    pipelined after it) and as arguments (``argv-mem``)."""
    now = c.server.clock.monotonic_ms()
    cmd = c.last_cmd.decode("utf-8", "replace").lower()
    query = c.gate.query_buffered() + (wire_size(running) if running else 0)
    argv_mem = sum(map(len, running)) if running else 0
    multi_mem = sum(_argv_mem(argv) for _, argv in c.queued) if c.in_multi else 0
    total = max(query, c.qbuf_alloc) + argv_mem + multi_mem + REPLY_BUFFER_SIZE + c.out_bytes
    return (
        f"id={c.id} addr={c.addr} laddr={c.laddr} fd={c.fd} name={_text(c.name)} "
        f"age={int((now - c.created_ms) // 1000)} "
        f"idle={int((now - c.last_interaction_ms) // 1000)} "
        f"flags={c.flags_string()} db={c.db.index} sub={len(c.channels)} "
        f"psub={len(c.patterns)} ssub={len(c.shard_channels)} "
        f"multi={len(c.queued) if c.in_multi else -1} watch={len(c.watched)} "
        f"qbuf={query} qbuf-free={max(c.qbuf_alloc - query, 0)} "
        f"argv-mem={argv_mem} multi-mem={multi_mem} "
        f"rbs={REPLY_BUFFER_SIZE} rbp=0 obl=0 oll={len(c.out)} "
        f"omem={c.out_bytes} tot-mem={total} events=r cmd={cmd} user={_user_name(c)} "
        f"redir={_redirect_shown(c)} resp={c.resp} lib-name={_text(c.lib_name)} "
        f"lib-ver={_text(c.lib_ver)}\n"
    )


def _user_name(c: Client) -> str:
    """CLIENT LIST's ``user``: the primary's link and the AOF have none (Redis's
    "(superuser)")."""
    return _text(c.user.name) if c.user is not None else "(superuser)"


#: the reply buffer Redis gives every client (PROTO_REPLY_CHUNK_BYTES), shown as ``rbs``
REPLY_BUFFER_SIZE = 16384


def _argv_mem(argv: list[bytes]) -> int:
    """A queued command's arguments as Redis counts them in ``multi-mem``: their bytes and
    a pointer each."""
    return sum(map(len, argv)) + 8 * len(argv)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def cmd_client_id(c: Client, argv: list[bytes]) -> Reply:
    return c.id


def cmd_client_setname(c: Client, argv: list[bytes]) -> Reply:
    if not valid_client_name(argv[2]):
        raise BAD_CLIENT_NAME
    c.name = argv[2]
    return OK


def cmd_client_getname(c: Client, argv: list[bytes]) -> Reply:
    return c.name or None


def cmd_client_info(c: Client, argv: list[bytes]) -> Reply:
    return Verbatim(client_info_line(c, argv).encode())


_CLIENT_TYPES = (b"normal", b"master", b"replica", b"slave", b"pubsub")


def _client_type(c: Client) -> bytes:
    """Its type for CLIENT LIST/KILL TYPE (a monitor is a normal client there, as in Redis)."""
    if c.is_master:
        return b"master"
    if c.is_replica:
        return b"slave"
    return b"pubsub" if c.subscribed() else b"normal"


def cmd_client_list(c: Client, argv: list[bytes]) -> Reply:
    """CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id [id ...]]"""
    clients = list(c.server.clients.values())
    if len(argv) > 2:
        option = argv[2].upper()
        if option == b"TYPE" and len(argv) == 4:
            kind = argv[3].lower()
            if kind not in _CLIENT_TYPES:
                raise err(f"Unknown client type '{_text(argv[3])}'")
            kind = b"slave" if kind == b"replica" else kind
            clients = [x for x in clients if _client_type(x) == kind]
        elif option == b"ID" and len(argv) >= 4:
            wanted = []
            for raw in argv[3:]:
                value = strict_int(raw)
                if value is None or value <= 0:
                    raise err("Invalid client ID")
                wanted.append(value)
            clients = [c.server.clients[i] for i in wanted if i in c.server.clients]
        else:
            raise SYNTAX
    lines = [client_info_line(other, argv if other is c else None) for other in clients]
    return Verbatim("".join(lines).encode())


def _kill_filters(c: Client, argv: list[bytes]) -> list[Client]:
    """CLIENT KILL <ID id | ADDR ip:port | LADDR ip:port | TYPE t | USER u | SKIPME y/n |
    MAXAGE s> ..."""
    candidates = list(c.server.clients.values())
    skip_me = True
    i = 2
    while i < len(argv):
        if i + 1 >= len(argv):
            raise SYNTAX
        option, value = argv[i].upper(), argv[i + 1]
        if option == b"ID":
            wanted = strict_int(value)
            if wanted is None or wanted <= 0:
                raise err("client-id should be greater than 0")
            candidates = [x for x in candidates if x.id == wanted]
        elif option == b"ADDR":
            candidates = [x for x in candidates if x.addr.encode() == value]
        elif option == b"LADDR":
            candidates = [x for x in candidates if x.laddr.encode() == value]
        elif option == b"TYPE":
            if value.lower() not in _CLIENT_TYPES:
                raise err(f"Unknown client type '{_text(value)}'")
            kind = b"slave" if value.lower() == b"replica" else value.lower()
            candidates = [x for x in candidates if _client_type(x) == kind]
        elif option == b"USER":
            user = c.server.acl.get(value)
            if user is None:
                raise err(f"No such user '{_text(value)}'")
            candidates = [x for x in candidates if x.user is user]
        elif option == b"SKIPME":
            if value.lower() not in (b"yes", b"no"):
                raise SYNTAX
            skip_me = value.lower() == b"yes"
        elif option == b"MAXAGE":
            max_age = parse_int(value, err("maxage is not an integer or out of range"))
            if max_age <= 0:
                raise err("maxage should be greater than 0")
            now = c.server.clock.monotonic_ms()
            candidates = [x for x in candidates if (now - x.created_ms) // 1000 >= max_age]
        else:
            raise SYNTAX
        i += 2
    return [x for x in candidates if not (skip_me and x is c)]


def cmd_client_kill(c: Client, argv: list[bytes]) -> Reply:
    if len(argv) == 3:  # old form: CLIENT KILL addr:port
        victims = [x for x in c.server.clients.values() if x.addr.encode() == argv[2]]
        if not victims:
            raise err("No such client")
        for victim in victims:
            _kill(c, victim)
        return OK
    victims = _kill_filters(c, argv)
    for victim in victims:
        _kill(c, victim)
    return len(victims)


def _kill(c: Client, victim: Client) -> None:
    if victim is c:
        c.close_after_reply = True
    else:
        c.server.kill_client(victim)


def cmd_client_unblock(c: Client, argv: list[bytes]) -> Reply:
    """CLIENT UNBLOCK client-id [TIMEOUT | ERROR]"""
    target = parse_int(argv[2])
    error = False
    if len(argv) == 4:
        reason = argv[3].upper()
        if reason not in (b"TIMEOUT", b"ERROR"):
            raise err("CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
        error = reason == b"ERROR"
    elif len(argv) > 4:
        raise SYNTAX
    victim = c.server.clients.get(target)
    if victim is None:
        return 0
    return int(c.server.unblock_client(victim, error))


_PAUSE_MODES = {b"WRITE": 1, b"ALL": 2}  # (engine/pause.py's PAUSE_WRITE, PAUSE_ALL)


def cmd_client_pause(c: Client, argv: list[bytes]) -> Reply:
    """CLIENT PAUSE timeout [WRITE | ALL]: hold every command (ALL, the default) or those
    that may write or replicate (WRITE) for timeout ms; see engine/pause.py."""
    if len(argv) > 4:
        raise subcommand_syntax(argv[1], "CLIENT")
    mode = 2
    if len(argv) == 4:
        found = _PAUSE_MODES.get(argv[3].upper())
        if found is None:
            raise err("CLIENT PAUSE mode must be WRITE or ALL")
        mode = found
    timeout = strict_int(argv[2])
    if timeout is None:
        raise err("timeout is not an integer or out of range")
    if timeout < 0:
        raise err("timeout is negative")
    c.server.pause_clients(timeout, mode)
    return OK


def cmd_client_unpause(c: Client, argv: list[bytes]) -> Reply:
    """CLIENT UNPAUSE: end the pause; the held commands run in the order they came."""
    c.server.unpause_clients()
    return OK


def cmd_client_setinfo(c: Client, argv: list[bytes]) -> Reply:
    attr = argv[2].upper()
    if attr not in (b"LIB-NAME", b"LIB-VER"):
        raise err(f"Unrecognized option '{_text(argv[2])}'")
    if not valid_client_name(argv[3]):
        raise err(
            f"{_text(argv[2]).lower()} cannot contain spaces, newlines or special characters."
        )
    if attr == b"LIB-NAME":
        c.lib_name = argv[3]
    else:
        c.lib_ver = argv[3]
    return OK


def _on_off(raw: bytes) -> bool:
    token = raw.upper()
    if token not in (b"ON", b"OFF"):
        raise SYNTAX
    return token == b"ON"


def cmd_client_no_evict(c: Client, argv: list[bytes]) -> Reply:
    c.no_evict = _on_off(argv[2])
    return OK


def cmd_client_no_touch(c: Client, argv: list[bytes]) -> Reply:
    c.no_touch = _on_off(argv[2])
    return OK


_SILENT = Raw(b"")


def cmd_client_reply(c: Client, argv: list[bytes]) -> Reply:
    mode = argv[2].upper()
    if mode == b"ON":
        c.reply_on = True
        c.skip_next_reply = False
        return OK
    if mode == b"OFF":
        c.reply_on = False
        return _SILENT
    if mode == b"SKIP":
        c.skip_next_reply = True
        return _SILENT
    raise SYNTAX


_TRACKING_OPTIONS = {
    b"BCAST": tracking.BCAST,
    b"OPTIN": tracking.OPTIN,
    b"OPTOUT": tracking.OPTOUT,
    b"NOLOOP": tracking.NOLOOP,
}


def _tracking_args(c: Client, argv: list[bytes]) -> tuple[int, int, list[bytes]]:
    """CLIENT TRACKING's options: (redirect id, option flags, prefixes)."""
    redirect, options, prefixes = 0, 0, []
    i = 3
    while i < len(argv):
        option = argv[i].upper()
        more = i + 1 < len(argv)
        if option == b"REDIRECT" and more:
            i += 1
            if redirect:
                raise err("A client can only redirect to a single other client")
            redirect = parse_int(argv[i])
            # (it must exist now, though it may go later: a sanity check, as Redis's)
            if redirect not in c.server.clients:
                raise err("The client ID you want redirect to does not exist")
        elif option in _TRACKING_OPTIONS:
            options |= _TRACKING_OPTIONS[option]
        elif option == b"PREFIX" and more:
            i += 1
            prefixes.append(argv[i])
        else:
            raise SYNTAX
        i += 1
    return redirect, options, prefixes


def _tracking_mode_error(c: Client, options: int, prefixes: list[bytes]) -> str | None:
    """Why CLIENT TRACKING ON may not take these options now (Redis's texts, in its order)."""
    flags = c.tracking_flags
    if not options & tracking.BCAST and prefixes:
        return "PREFIX option requires BCAST mode to be enabled"
    if flags & tracking.TRACKING and bool(flags & tracking.BCAST) != bool(options & tracking.BCAST):
        return (
            "You can't switch BCAST mode on/off before disabling tracking for this client, "
            "and then re-enabling it with a different mode."
        )
    if options & tracking.BCAST and options & (tracking.OPTIN | tracking.OPTOUT):
        return "OPTIN and OPTOUT are not compatible with BCAST"
    if options & tracking.OPTIN and options & tracking.OPTOUT:
        return "You can't specify both OPTIN mode and OPTOUT mode"
    if (options & tracking.OPTIN and flags & tracking.OPTOUT) or (
        options & tracking.OPTOUT and flags & tracking.OPTIN
    ):
        return (
            "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, "
            "and then re-enabling it with a different mode."
        )
    if options & tracking.BCAST:
        return c.server.tracking.prefix_collision(c, prefixes)
    return None


def cmd_client_tracking(c: Client, argv: list[bytes]) -> Reply:
    """CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]"""
    redirect, options, prefixes = _tracking_args(c, argv)
    switch = argv[2].upper()
    if switch == b"ON":
        problem = _tracking_mode_error(c, options, prefixes)
        if problem is not None:
            raise err(problem)
        c.server.tracking.enable(c, redirect, options, prefixes)
    elif switch == b"OFF":
        c.server.tracking.disable(c)
    else:
        raise SYNTAX
    return OK


def cmd_client_caching(c: Client, argv: list[bytes]) -> Reply:
    """CLIENT CACHING YES|NO: whether the next command's keys are tracked (OPTIN/OPTOUT)."""
    flags = c.tracking_flags
    if not flags & tracking.TRACKING:
        raise err(
            "CLIENT CACHING can be called only when the client is in tracking mode with "
            "OPTIN or OPTOUT mode enabled"
        )
    answer = argv[2].upper()
    if answer == b"YES":
        if not flags & tracking.OPTIN:
            raise err("CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
    elif answer == b"NO":
        if not flags & tracking.OPTOUT:
            raise err("CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
    else:
        raise SYNTAX
    c.tracking_flags |= tracking.CACHING
    return OK


def _redirect_shown(c: Client) -> int:
    return c.tracking_redirect if c.tracking_flags & tracking.TRACKING else -1


def cmd_client_getredir(c: Client, argv: list[bytes]) -> Reply:
    return _redirect_shown(c)


def cmd_client_trackinginfo(c: Client, argv: list[bytes]) -> Reply:
    return {
        b"flags": RSet(tracking.flags_reply(c)),
        b"redirect": _redirect_shown(c),
        b"prefixes": sorted(c.tracking_prefixes),
    }


CLIENT_HELP = [
    b"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"ID -- Return the ID of the current connection.",
    b"GETNAME -- Return the name of the current connection.",
    b"SETNAME <name> -- Assign a name to the current connection.",
    b"INFO -- Information about the current connection.",
    b"LIST [TYPE <type>] [ID <id> ...] -- Information about all connections.",
    b"KILL <addr> | KILL <filter> <value> ... -- Close matching connections.",
    b"UNBLOCK <id> [TIMEOUT|ERROR] -- Unblock a client blocked in a blocking command.",
    b"PAUSE <timeout> [WRITE|ALL] -- Suspend all, or just write, clients for <timeout> ms.",
    b"UNPAUSE -- Stop the current client pause, resuming traffic.",
    b"REPLY ON|OFF|SKIP -- Control the replies sent to the current connection.",
    b"SETINFO <LIB-NAME|LIB-VER> <value> -- Describe the client library.",
    b"NO-EVICT ON|OFF, NO-TOUCH ON|OFF -- Accepted for compatibility.",
    b"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> ...] [OPTIN] [OPTOUT] "
    b"[NOLOOP] -- Client-side caching: invalidation messages for the keys it reads.",
    b"CACHING (YES|NO) -- Track (OPTIN) or not (OPTOUT) the keys of the next command.",
    b"GETREDIR -- The client ID tracking messages are redirected to.",
    b"TRACKINGINFO -- This connection's tracking state.",
    b"HELP -- Print this help.",
]


cmd_client_help = help_handler(CLIENT_HELP)


_CONN = "noscript loading stale"

SPECS = (
    spec("ping", -1, "fast", handler=cmd_ping),
    spec("echo", 2, "loading stale fast", handler=cmd_echo),
    spec("auth", -2, "noscript loading stale fast no_auth allow_busy", handler=cmd_auth),
    spec("hello", -1, "noscript loading stale fast no_auth allow_busy", handler=cmd_hello),
    spec("select", 2, "loading stale fast", handler=cmd_select),
    spec(
        "quit", -1, "noscript loading stale fast no_auth allow_busy x_immediate", handler=cmd_quit
    ),
    spec(
        "reset", 1, "noscript loading stale fast no_auth allow_busy x_immediate", handler=cmd_reset
    ),
    spec(
        "client",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("client|id", 2, _CONN, handler=cmd_client_id),
            spec("client|setname", 3, _CONN, handler=cmd_client_setname),
            spec("client|getname", 2, _CONN, handler=cmd_client_getname),
            spec("client|info", 2, _CONN, handler=cmd_client_info),
            spec("client|list", -2, "admin " + _CONN, handler=cmd_client_list),
            spec("client|kill", -3, "admin " + _CONN, handler=cmd_client_kill),
            spec("client|unblock", -3, "admin " + _CONN, handler=cmd_client_unblock),
            spec("client|pause", -3, "admin " + _CONN, handler=cmd_client_pause),
            spec("client|unpause", 2, "admin " + _CONN, handler=cmd_client_unpause),
            spec("client|setinfo", 4, _CONN, handler=cmd_client_setinfo),
            spec("client|no-evict", 3, "admin " + _CONN, handler=cmd_client_no_evict),
            spec("client|no-touch", 3, _CONN, handler=cmd_client_no_touch),
            spec("client|reply", 3, _CONN, handler=cmd_client_reply),
            spec("client|tracking", -3, _CONN, handler=cmd_client_tracking),
            spec("client|caching", 3, _CONN, handler=cmd_client_caching),
            spec("client|getredir", 2, _CONN, handler=cmd_client_getredir),
            spec("client|trackinginfo", 2, _CONN, handler=cmd_client_trackinginfo),
            spec("client|help", 2, "loading stale", handler=cmd_client_help),
        ),
    ),
)
