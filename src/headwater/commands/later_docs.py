"""COMMAND DOCS of the commands Redis 7.0 does not have (or whose 7.0 docs the captured
table lacks): their summary, since, group and complexity as Redis's own command files give
them (``src/commands/*.json``). Their arguments are not described (Redis lists them)."""

from __future__ import annotations

from typing import Final

#: name (``container|sub`` for a subcommand) -> (summary, since, group, complexity)
LATER_DOCS: Final[dict[str, tuple[str, str, str, str]]] = {
    "hexpire": (
        "Set expiry for hash field using relative time to expire (seconds)",
        "7.4.0",
        "hash",
        "O(N) where N is the number of specified fields",
    ),
    "hexpireat": (
        "Set expiry for hash field using an absolute Unix timestamp (seconds)",
        "7.4.0",
        "hash",
        "O(N) where N is the number of specified fields",
    ),
    "hexpiretime": (
        "Returns the expiration time of a hash field as a Unix timestamp, in seconds.",
        "7.4.0",
        "hash",
        "O(N) where N is the number of specified fields",
    ),
    "hpersist": (
        "Removes the expiration time for each specified field",
        "7.4.0",
        "hash",
        "O(N) where N is the number of specified fields",
    ),
    "hpexpire": (
        "Set expiry for hash field using relative time to expire (milliseconds)",
        "7.4.0",
        "hash",
        "O(N) where N is the number of specified fields",
    ),
    "hpexpireat": (
        "Set expiry for hash field using an absolute Unix timestamp (milliseconds)",
        "7.4.0",
        "hash",
        "O(N) where N is the number of specified fields",
    ),
    "hpexpiretime": (
        "Returns the expiration time of a hash field as a Unix timestamp, in msec.",
        "7.4.0",
        "hash",
        "O(N) where N is the number of specified fields",
    ),
    "hpttl": (
        "Returns the TTL in milliseconds of a hash field.",
        "7.4.0",
        "hash",
        "O(N) where N is the number of specified fields",
    ),
    "httl": (
        "Returns the TTL in seconds of a hash field.",
        "7.4.0",
        "hash",
        "O(N) where N is the number of specified fields",
    ),
    "waitaof": (
        "Blocks until all of the preceding write commands sent by the connection"
        " are written to the append-only file of the master and/or replicas.",
        "7.2.0",
        "generic",
        "O(1)",
    ),
    "cluster|myshardid": ("Returns the shard ID of a node.", "7.2.0", "cluster", "O(1)"),
    "client|no-touch": (
        "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
        "7.2.0",
        "connection",
        "O(1)",
    ),
    "client|setinfo": (
        "Sets information specific to the client or connection.",
        "7.2.0",
        "connection",
        "O(1)",
    ),
    "client|caching": (
        "Instruct the server about tracking or not keys in the next request",
        "6.0.0",
        "connection",
        "O(1)",
    ),
    "client|getredir": (
        "Get tracking notifications redirection client ID if any",
        "6.0.0",
        "connection",
        "O(1)",
    ),
    "client|tracking": (
        "Enable or disable server assisted client side caching support",
        "6.0.0",
        "connection",
        "O(1). Some options may introduce additional complexity.",
    ),
    "client|trackinginfo": (
        "Return information about server assisted client side caching for the current connection",
        "6.2.0",
        "connection",
        "O(1)",
    ),
    "xackdel": (
        "Acknowledges and deletes one or multiple messages for a stream consumer group.",
        "8.2.0",
        "stream",
        "O(1) for each message ID processed.",
    ),
    "xdelex": (
        "Deletes one or multiple entries from the stream.",
        "8.2.0",
        "stream",
        "O(1) for each single item to delete in the stream, regardless of the stream size.",
    ),
    "xcfgset": (
        "Sets the IDMP configuration parameters for a stream.",
        "8.6.0",
        "stream",
        "O(1)",
    ),
    "xidmprecord": (
        "An internal command for setting IDMP metadata on an existing stream message.",
        "8.6.2",
        "stream",
        "O(1)",
    ),
}
