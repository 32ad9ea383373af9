"""Cluster mode's one gate: whether this node runs a command, or which error sends its
client elsewhere (Redis's processCommand → getNodeByQuery → clusterRedirectClient).

The engine asks ``ClusterGate.refusal`` for every command of a client (not for the primary's
link nor the AOF, which are obeyed); scripts ask ``script_refusal`` for every command they
call. The keys of a command are those COMMAND GETKEYS gives, plus the channels of the shard
Pub/Sub commands, which route by their slot too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.cluster.routing import (
    DOWN,
    DOWN_READONLY,
    SERVE,
    Request,
    Verdict,
    redirection,
    route,
)
from headwater.cluster.slots import key_slot
from headwater.commands.getkeys import KeySpec, command_keys, fixed_single_key
from headwater.commands.introspection import key_specs_of
from headwater.errors import ReplyError, err

if TYPE_CHECKING:
    from headwater.cluster.state import Cluster
    from headwater.commands.context import Client, CommandSpec, ServerAPI

_SHARD_PUBSUB = frozenset(("spublish", "ssubscribe", "sunsubscribe"))


class ClusterGate:
    def __init__(self, server: ServerAPI, cluster: Cluster) -> None:
        self.server = server
        self.cluster = cluster
        self._specs: dict[str, list[KeySpec]] = {}
        #: per command: the index of its one key at a fixed place (-1: it has another shape)
        self._single: dict[str, int] = {}

    def keys_of(self, row: CommandSpec, argv: list[bytes]) -> list[bytes]:
        """The keys (or shard channels) a command names, in order."""
        name = row.name
        if name in _SHARD_PUBSUB:
            return argv[1:2] if name == "spublish" else argv[1:]
        return [argv[index] for index, _ in command_keys(row, self._specs_of(row), argv)]

    def _specs_of(self, row: CommandSpec) -> list[KeySpec]:
        specs = self._specs.get(row.name)
        if specs is None:
            specs = self._specs[row.name] = key_specs_of(row)
        return specs

    def _single_key_at(self, row: CommandSpec) -> int:
        """(SORT, MIGRATE and the shard channels' commands have no fixed single key spec)"""
        one = fixed_single_key(self._specs_of(row))
        return one[0] if one is not None else -1

    def verdict(
        self, c: Client, rows: list[tuple[CommandSpec, list[bytes]]], asking: bool
    ) -> Verdict:
        """Where the commands of ``rows`` (one, or a transaction's) belong."""
        keys: list[bytes] = []
        write = False
        for row, argv in rows:
            keys += self.keys_of(row, argv)
            write = write or row.is_write
        first = rows[0][0]
        request = Request(
            write,
            asking=asking or first.name == "restore-asking",
            readonly_client=c.readonly_cluster,
            migrate=first.name == "migrate",
            shard_pubsub=first.name in _SHARD_PUBSUB,
        )
        config = self.server.config
        return route(
            self.cluster,
            keys,
            request,
            self.server.keyspace.dbs[0].exists,
            config["cluster-allow-reads-when-down"],
            config["cluster-allow-pubsubshard-when-down"],
        )

    def refusal(
        self, c: Client, row: CommandSpec, argv: list[bytes], asking: bool
    ) -> ReplyError | None:
        """None if this node runs the command (``c.slot`` is then its keys' slot), else the
        redirection or error to answer."""
        at = self._single.get(row.name)
        if at is None:
            at = self._single[row.name] = self._single_key_at(row)
        cluster = self.cluster
        if at > 0 and at < len(argv) and cluster.ok and not c.in_multi:
            # (most commands: one key, a slot of mine, nothing open, the cluster up)
            slot = key_slot(argv[at])
            if cluster.owners[slot] is cluster.myself and not (
                cluster.migrating or cluster.importing
            ):
                c.slot = slot
                return None
        if row.name == "exec":
            if not c.in_multi:
                return None
            verdict = self.verdict(c, c.queued, asking)
        else:
            verdict = self.verdict(c, [(row, argv)], asking)
        if verdict.code == SERVE:
            c.slot = verdict.slot
            return None
        return self.error(verdict)

    def error(self, verdict: Verdict) -> ReplyError:
        config = self.server.config
        return redirection(verdict, config["cluster-preferred-endpoint-type"], False)

    def script_refusal(
        self, caller: Client, row: CommandSpec, argv: list[bytes], cross_slot: bool
    ) -> bytes | None:
        """A command a script calls (Redis's scriptVerifyClusterState): refused when this
        node would not serve it to the script's caller, or when it touches a slot other
        than the one the script's keys (or its first such command) chose."""
        verdict = self.verdict(caller, [(row, argv)], caller.asking)
        if verdict.code != SERVE:
            if verdict.code == DOWN_READONLY:
                text = (
                    "Script attempted to execute a write command while the cluster is down "
                    "and readonly"
                )
            elif verdict.code == DOWN:
                text = "Script attempted to execute a command while the cluster is down"
            else:
                text = "Script attempted to access a non local key in a cluster node"
            return err(text).line()
        slot = verdict.slot
        if slot >= 0 and not cross_slot:
            if caller.slot < 0:
                caller.slot = slot
            elif caller.slot != slot:
                return err(
                    "Script attempted to access keys that do not hash to the same slot"
                ).line()
        return None
