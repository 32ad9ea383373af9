"""The command table: every family's ``SPECS`` merged into one mapping by upper-case name."""

from __future__ import annotations

from collections.abc import Iterable

from headwater.commands import (
    acl,
    bitops,
    cluster,
    connection,
    dump,
    geo,
    groups,
    hashes,
    hll,
    idmp,
    introspection,
    keys,
    latency,
    lists,
    lolwut,
    memory,
    migrate,
    monitor,
    pubsub,
    replication,
    server,
    sets,
    slowlog,
    sort,
    streams,
    strings,
    transactions,
    xinfo,
    zsets,
)
from headwater.commands.context import CommandSpec

FAMILIES = (
    connection,
    keys,
    strings,
    bitops,
    hashes,
    sets,
    streams,
    groups,
    idmp,
    xinfo,
    server,
    transactions,
    introspection,
    pubsub,
    monitor,
    replication,
    zsets,
    geo,
    lists,
    dump,
    sort,
    memory,
    hll,
    slowlog,
    latency,
    acl,
    lolwut,
    cluster,
    migrate,
)


def build_table(extra: Iterable[CommandSpec] = ()) -> dict[bytes, CommandSpec]:
    table: dict[bytes, CommandSpec] = {}
    rows = [row for family in FAMILIES for row in family.SPECS]
    for row in [*rows, *extra]:
        key = row.name.upper().encode()
        if key in table:
            raise ValueError(f"command {row.name!r} defined twice")
        table[key] = row.fresh()
    return table
