"""Replication commands: REPLICAOF/SLAVEOF, REPLCONF, PSYNC/SYNC, ROLE, WAIT, FAILOVER.

The work is the server layer's (``engine.replication``: server/replication.py); these
handlers parse and check arguments with Redis's texts (replication.c) and pass them on.
"""

from __future__ import annotations

from headwater.commands.args import parse_int, strict_int
from headwater.commands.context import Block, Client, Replication, spec
from headwater.commands.streams import parse_block_timeout
from headwater.errors import NOT_INTEGER, SYNTAX, ReplyError, err
from headwater.resp.types import Reply

WAIT_ON_REPLICA = err(
    "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a "
    "replica is configured to be writable (which is not the default) writes to replicas are "
    "just local and are not propagated."
)
NOT_FOR_REPLICA_CLIENT = err("Command is not valid when client is a replica.")
INVALID_PORT = err("Invalid master port")
NO_REPLICATION = err("replication is not available in this server")


def _replication(c: Client) -> Replication:
    repl = c.server.replication
    if repl is None:
        raise NO_REPLICATION
    return repl


def cmd_replicaof(c: Client, argv: list[bytes]) -> Reply:
    """REPLICAOF <host> <port> | REPLICAOF NO ONE (and SLAVEOF)."""
    repl = _replication(c)
    if argv[1].lower() == b"no" and argv[2].lower() == b"one":
        return repl.replicaof(c, None)
    if c.is_replica:
        raise NOT_FOR_REPLICA_CLIENT
    port = strict_int(argv[2])
    if port is None or not 0 <= port <= 65535:
        raise INVALID_PORT
    return repl.replicaof(c, (argv[1].decode("utf-8", "surrogateescape"), port))


def cmd_replconf(c: Client, argv: list[bytes]) -> Reply:
    """REPLCONF <option> <value> [<option> <value> ...]."""
    if len(argv) % 2 == 0:
        raise ReplyError("ERR", "syntax error")
    return _replication(c).replconf(c, argv[1:])


def cmd_psync(c: Client, argv: list[bytes]) -> Reply:
    """PSYNC <replid> <offset> [FAILOVER]: ``?`` and -1 (or any unknown history) ask for a
    full sync; FAILOVER: the primary hands its role to this replica."""
    offset = strict_int(argv[2])
    if offset is None:
        raise NOT_INTEGER
    failover = len(argv) > 3 and argv[3].lower() == b"failover"
    return _replication(c).psync(c, argv[1].decode("utf-8", "replace"), offset, failover)


def cmd_failover(c: Client, argv: list[bytes]) -> Reply:
    """FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms] (server/failover.py)."""
    if len(argv) == 2 and argv[1].lower() == b"abort":
        return _replication(c).failover_command(None, 0, False, abort=True)
    timeout_ms, force, target = 0, False, None
    i = 1
    while i < len(argv):
        word, more = argv[i].lower(), len(argv) - i - 1
        if word == b"timeout" and more >= 1 and timeout_ms == 0:
            timeout_ms = parse_int(argv[i + 1])
            if timeout_ms <= 0:
                raise err("FAILOVER timeout must be greater than 0")
            i += 2
        elif word == b"to" and more >= 2 and target is None:
            port = parse_int(argv[i + 2])
            target = (argv[i + 1].decode("utf-8", "replace"), port)
            i += 3
        elif word == b"force" and not force:
            force = True
            i += 1
        else:
            raise SYNTAX
    return _replication(c).failover_command(target, timeout_ms, force, abort=False)


def cmd_sync(c: Client, argv: list[bytes]) -> Reply:
    """SYNC: the old protocol, always a full sync."""
    return _replication(c).psync(c, "", None)


def cmd_role(c: Client, argv: list[bytes]) -> Reply:
    """ROLE."""
    return _replication(c).role()


def cmd_wait(c: Client, argv: list[bytes]) -> Reply | Block:
    """WAIT <numreplicas> <timeout ms>: how many replicas have the client's writes."""
    repl = _replication(c)
    if repl.is_replica():
        raise WAIT_ON_REPLICA
    replicas = strict_int(argv[1])
    if replicas is None:
        raise NOT_INTEGER
    timeout_ms = parse_block_timeout(c, argv[2])
    return repl.wait(c, replicas, timeout_ms)


WAITAOF_ON_REPLICA = err(
    "WAITAOF cannot be used with replica instances. Please also note that writes to replicas "
    "are just local and are not propagated."
)
WAITAOF_NO_AOF = err("WAITAOF cannot be used when numlocal is set but appendonly is disabled.")


def cmd_waitaof(c: Client, argv: list[bytes]) -> Reply | Block:
    """WAITAOF <numlocal> <numreplicas> <timeout ms> (Redis 7.2): how many AOFs (this
    server's, 0 or 1, and replicas') have fsynced the client's writes."""
    repl = _replication(c)
    local = strict_int(argv[1])
    if local is None:
        raise NOT_INTEGER
    if not 0 <= local <= 1:
        raise err("value is out of range, value must between 0 and 1")
    replicas = strict_int(argv[2])
    if replicas is None:
        raise NOT_INTEGER
    if replicas < 0:
        raise err("value is out of range, must be positive")
    timeout_ms = parse_block_timeout(c, argv[3])
    if repl.is_replica():
        raise WAITAOF_ON_REPLICA
    if local and not c.server.info.aof_enabled:
        raise WAITAOF_NO_AOF
    return repl.waitaof(c, local, replicas, timeout_ms)


SPECS = (
    spec("replicaof", 3, "admin noscript stale no_async_loading", (0, 0, 0), cmd_replicaof),
    spec("slaveof", 3, "admin noscript stale no_async_loading", (0, 0, 0), cmd_replicaof),
    spec("replconf", -1, "admin noscript loading stale allow_busy", (0, 0, 0), cmd_replconf),
    spec("psync", -3, "admin noscript no_async_loading no_multi", (0, 0, 0), cmd_psync),
    spec("sync", 1, "admin noscript no_async_loading no_multi", (0, 0, 0), cmd_sync),
    spec("role", 1, "noscript loading stale fast", (0, 0, 0), cmd_role),
    spec("wait", 3, "blocking", (0, 0, 0), cmd_wait),
    spec("failover", -1, "admin noscript stale", (0, 0, 0), cmd_failover),
    spec("waitaof", 4, "blocking", (0, 0, 0), cmd_waitaof),
)
