"""An ACL user against a reference model: random SETUSER rules (commands, subcommands,
first arguments, categories, key patterns with read/write flags, channels, their resets),
each applied as ACL SETUSER applies it (all of a call or nothing). After every step the
user's permissions equal the model's, what the user would be refused (the engine's check)
equals what the model refuses, and ``check_invariants()`` holds: among others, the rules as
ACL LIST shows them give back the same permissions."""

from __future__ import annotations

import fnmatch
from functools import cache

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from headwater.acl.access import AccessControl, SetUserError
from headwater.acl.users import READ, READ_WRITE, WRITE, Catalog, CommandRef
from headwater.commands.acl import build_catalog, check
from headwater.engine import Engine

COMMANDS = ["get", "set", "hset", "xadd", "xrange", "select", "config", "client", "publish"]
SUBCOMMANDS = ["config|get", "config|set", "client|id", "client|kill", "client|setinfo"]
CATEGORIES = ["read", "write", "hash", "stream", "admin", "dangerous", "fast", "connection"]
PATTERNS = ["a*", "b?", "ab", "*"]
KEYS = [b"a", b"ab", b"b1", b"bb", b"c"]


@cache
def _engine() -> Engine:
    return Engine()


@cache
def _catalog() -> Catalog:
    return build_catalog(_engine().table)


_OPS = st.one_of(
    st.sampled_from(["+@all", "-@all", "allcommands", "nocommands", "allkeys", "resetkeys"]),
    st.sampled_from(["allchannels", "resetchannels", "reset"]),
    st.builds(lambda s, c: s + c, st.sampled_from("+-"), st.sampled_from(COMMANDS + SUBCOMMANDS)),
    st.builds(lambda s, c: f"{s}@{c}", st.sampled_from("+-"), st.sampled_from(CATEGORIES)),
    st.builds(lambda n: f"+select|{n}", st.sampled_from(["0", "1", "X"])),
    st.builds(
        lambda p, k: p + k, st.sampled_from(["~", "%R~", "%W~", "%RW~"]), st.sampled_from(PATTERNS)
    ),
    st.builds(lambda p: "&" + p, st.sampled_from(["news*", "chat", "*"])),
)


class Model:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.allowed = dict.fromkeys(catalog.refs, False)
        self.firstargs: dict[str, set[bytes]] = {}
        self.keys: dict[str, int] = {}
        self.all_keys = False
        self.channels: list[str] = []
        self.all_channels = False

    def copy(self) -> Model:
        twin = Model(self.catalog)
        twin.allowed = dict(self.allowed)
        twin.firstargs = {k: set(v) for k, v in self.firstargs.items()}
        twin.keys = dict(self.keys)
        twin.all_keys, twin.all_channels = self.all_keys, self.all_channels
        twin.channels = list(self.channels)
        return twin

    def _set(self, ref: CommandRef, value: bool) -> None:
        for name in (ref.name, *ref.subcommands):
            self.allowed[name] = value
        self.firstargs.pop(ref.name, None)

    def apply(self, op: str) -> None:
        """Raises ValueError where Redis refuses the rule."""
        if op in ("+@all", "allcommands", "-@all", "nocommands"):
            value = op in ("+@all", "allcommands")
            self.allowed = dict.fromkeys(self.allowed, value)
            self.firstargs.clear()
        elif op in ("allkeys", "~*"):
            self.all_keys, self.keys = True, {}
        elif op == "resetkeys":
            self.all_keys, self.keys = False, {}
        elif op in ("allchannels", "&*"):
            self.all_channels, self.channels = True, []
        elif op == "resetchannels":
            self.all_channels, self.channels = False, []
        elif op == "reset":
            self.__init__(self.catalog)  # type: ignore[misc]
        elif op[1] == "@":
            for ref in self.catalog.refs.values():
                if op[2:] in ref.categories:
                    self._set(ref, op[0] == "+")
        elif op.startswith("+select|"):
            self.allowed["select"] = self.allowed["select"]  # (the bit stays as it is)
            self.firstargs.setdefault("select", set()).add(op[8:].lower().encode())
        elif op[0] in "+-":
            self._set(self.catalog.refs[op[1:]], op[0] == "+")
        elif op[0] in "~%":
            self._add_key(op)
        else:
            if self.all_channels:
                raise ValueError("EISDIR")
            if op[1:] not in self.channels:
                self.channels.append(op[1:])

    def _add_key(self, op: str) -> None:
        if self.all_keys:
            raise ValueError("EEXIST")
        prefix, pattern = op.split("~", 1)
        flags = {"": READ_WRITE, "%R": READ, "%W": WRITE, "%RW": READ_WRITE}[prefix]
        self.keys[pattern] = self.keys.get(pattern, 0) | flags

    def may_run(self, name: str, argv: list[bytes]) -> bool:
        if self.allowed[name]:
            return True
        return len(argv) > 1 and argv[1].lower() in self.firstargs.get(name, set())

    def may_touch(self, key: bytes, needs: int) -> bool:
        if self.all_keys:
            return True
        text = key.decode()
        return any(
            f & needs == needs and fnmatch.fnmatchcase(text, p) for p, f in self.keys.items()
        )


class AclMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.acl = AccessControl(_catalog())
        self.acl.commit(*self.acl.staged(b"alice", []))
        self.model = Model(_catalog())

    @rule(ops=st.lists(_OPS, min_size=1, max_size=4))
    def setuser(self, ops: list[str]) -> None:
        staged = self.model.copy()
        try:
            for op in ops:
                staged.apply(op)
            expected_ok = True
        except ValueError:
            expected_ok = False
        try:
            self.acl.commit(*self.acl.staged(b"alice", [op.encode() for op in ops]))
            ok = True
        except SetUserError:
            ok = False
        assert ok == expected_ok, ops
        if ok:
            self.model = staged

    @rule(key=st.sampled_from(KEYS), command=st.sampled_from(["get", "set", "xrange", "copy"]))
    def refused_keys_match(self, key: bytes, command: str) -> None:
        engine = _engine()
        row = engine.table[command.upper().encode()]
        argv = [command.encode(), key] + (
            [b"v"] if command == "set" else [b"-", b"+"][: (command == "xrange" and 2) or 0]
        )
        if command == "copy":
            argv = [b"copy", key, b"ab"]
        user = self.acl.users[b"alice"]
        reason, _ = check(user, row, argv)
        model = self.model
        allowed = model.may_run(command, argv)
        if allowed and command == "copy":
            allowed = model.may_touch(key, READ) and model.may_touch(b"ab", WRITE)
        elif allowed:
            allowed = model.may_touch(key, READ if command in ("get", "xrange") else WRITE)
        assert (reason == 0) == allowed, (argv, user.describe())

    @rule(arg=st.sampled_from([b"0", b"1", b"x", b"X"]))
    def select_follows_first_args(self, arg: bytes) -> None:
        row = _engine().table[b"SELECT"]
        reason, _ = check(self.acl.users[b"alice"], row, [b"select", arg])
        assert (reason == 0) == self.model.may_run("select", [b"select", arg])

    @invariant()
    def permissions_match(self) -> None:
        user = self.acl.users[b"alice"]
        root = user.root
        assert root.allowed == {n for n, on in self.model.allowed.items() if on}
        folded = {k: {a.lower() for a in v} for k, v in root.firstargs.items()}
        assert folded == self.model.firstargs
        assert {k.pattern.decode(): k.flags for k in root.keys} == self.model.keys
        assert root.all_keys == self.model.all_keys
        assert [c.decode() for c in root.channels] == self.model.channels
        assert root.all_channels == self.model.all_channels
        user.check_invariants(_catalog())


TestAcl = AclMachine.TestCase
TestAcl.settings = settings(max_examples=150, stateful_step_count=20, deadline=None)
