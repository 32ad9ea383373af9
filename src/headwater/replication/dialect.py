"""What a Redis 7.0 replica gets of Headwater's replication stream (issue 35).

Headwater's stream is Redis commands, most of them Redis 7.0's. The others are Headwater's
(Redis 8.x's) and a Redis 7.0 replica would refuse them, logging and diverging; each is
rewritten into what 7.0 understands, or left out when 7.0 has no place for its effect:

====================================  ==========================================================
Headwater's command                    sent to Redis 7.0 as (what is lost)
====================================  ==========================================================
XADD … IDMP pid iid / IDMPAUTO pid     the XADD without them, in an EVAL that ignores its error:
                                       a duplicate is propagated with the first entry's ID,
                                       which the replica already holds (lost: the IDMP
                                       history; a retry after a failover to Redis adds again)
XADD / XTRIM … KEEPREF|DELREF|ACKED    without the reference strategy (the stream's cut is
                                       propagated explicit, so the entries are the same)
XDELEX key [strategy] IDS n id…        XDEL key id…
XACKDEL key group [strategy] IDS n id… XACK key group id… then XDEL key id…
XCFGSET, XIDMPRECORD                   nothing (the stream's IDMP settings and history)
XNACK                                  nothing (the NACKed entries keep their last owner in
                                       the PEL on the Redis side)
HEXPIRE, HPEXPIRE, HEXPIREAT,          nothing (hash field TTLs: when a field expires on
HPEXPIREAT, HPERSIST                   Headwater, its HDEL reaches the replica)
RESTORE of a newer payload (a hash     the same RESTORE with Redis 7.0's payload of the value
with field TTLs, a stream with IDMP    (lost: the field TTLs, the IDMP history)
history)
====================================  ==========================================================
"""

from __future__ import annotations

from headwater.ops.dump import payload_for_redis_70

#: Headwater's commands Redis 7.0 has no place for, and what their loss means
DROPPED: dict[bytes, str] = {
    b"xcfgset": "a stream's IDMP settings",
    b"xidmprecord": "a stream's IDMP history",
    b"xnack": "a NACK (the entries keep their owner in the PEL)",
    b"hexpire": "a hash field TTL",
    b"hpexpire": "a hash field TTL",
    b"hexpireat": "a hash field TTL",
    b"hpexpireat": "a hash field TTL",
    b"hpersist": "a hash field TTL's removal",
}
_STRATEGIES = frozenset({b"KEEPREF", b"DELREF", b"ACKED"})


def for_redis_70(argv: list[bytes]) -> list[list[bytes]]:
    """The commands a Redis 7.0 replica gets for ``argv`` (none, one or two)."""
    name = argv[0].lower()
    if name in DROPPED:
        return []
    if name == b"xadd":
        kept, at, idempotent = _xadd_options(argv)
        plain = kept + argv[at:]
        if idempotent:
            return [[b"EVAL", _ADD_UNLESS_THERE, b"1", *plain[1:]]]
        return [plain]
    if name in (b"restore", b"restore-asking") and len(argv) >= 4:
        return [[*argv[:3], payload_for_redis_70(argv[3]), *argv[4:]]]
    if name == b"xtrim":
        return [[word for word in argv if word.upper() not in _STRATEGIES]]
    if name == b"xdelex" and len(argv) >= 3:
        return [[b"XDEL", argv[1], *_ids(argv, 2)]]
    if name == b"xackdel" and len(argv) >= 4:
        ids = _ids(argv, 3)
        return [[b"XACK", argv[1], argv[2], *ids], [b"XDEL", argv[1], *ids]]
    return [argv]


#: an XADD whose ID the stream may hold already (an idempotent duplicate): its error ignored
_ADD_UNLESS_THERE = b"redis.pcall('XADD', KEYS[1], unpack(ARGV)) return 1"


def _xadd_options(argv: list[bytes]) -> tuple[list[bytes], int, bool]:
    """XADD's key and the options Redis 7.0 has, where the entry's ID is, and whether the
    command was idempotent (IDMP or IDMPAUTO)."""
    out = argv[:2]
    idempotent = False
    i = 2
    while i < len(argv):
        word = argv[i].upper()
        if word in _STRATEGIES:
            i += 1
        elif word == b"IDMPAUTO":
            idempotent = True
            i += 2
        elif word == b"IDMP":
            idempotent = True
            i += 3
        elif word == b"NOMKSTREAM":
            out.append(argv[i])
            i += 1
        elif word in (b"MAXLEN", b"MINID"):
            out.append(argv[i])
            i += 1
            if i < len(argv) and argv[i] in (b"=", b"~"):
                out.append(argv[i])
                i += 1
            out += argv[i : i + 1]
            i += 1
        elif word == b"LIMIT":
            out += argv[i : i + 2]
            i += 2
        else:
            break  # (the entry's ID: the rest is the entry)
    return out, i, idempotent


def _ids(argv: list[bytes], start: int) -> list[bytes]:
    """The IDs after ``IDS n`` (a strategy may come before it)."""
    for i in range(start, len(argv) - 1):
        if argv[i].upper() == b"IDS":
            return argv[i + 2 :]
    return []
