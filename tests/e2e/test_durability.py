"""Durability over real processes (issue #6): ``kill -9`` at random moments under load, a damaged
append-only file at startup, a full disk, and ``DEBUG LOADAOF``.

The crash campaigns run one server on one directory, SIGKILL it again and again while eight
connections append to a stream (four of them through IDMP) and a consumer reads and acks it,
and after every restart check what a client may rely on: every acknowledged entry is there,
once, with the ID it was acknowledged with; nothing once recovered disappears later; the
consumer group's PEL holds exactly what it must; resending acknowledged IDMP iids adds nothing.

A campaign's random choices come from one seed, printed in every failure (``HW_CRASH_SEED``
replays it). ``HW_SLOW=1`` runs the ``slow`` variants (100 kills each).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.helpers import HEADWATER, ROOT, RawClient, free_port, loaded

pytestmark = pytest.mark.e2e

KEY = "s"
GROUP = "g"
CONSUMER = "c1"
WRITERS = 8
IDMP_WRITERS = 4  # writers 0..3 send XADD s IDMP p<w> <w>-<seq> * ...
AOF_DIR = "appendonlydir"
AOF_FILE = "appendonly.aof.1.incr.aof"
MANIFEST = "appendonly.aof.manifest"
MISCONF = "MISCONF Errors writing to the AOF file: No space left on device"
DISCONNECTED = (redis.ConnectionError, redis.TimeoutError, OSError)
FAULTY_SERVER = [sys.executable, "-m", "tests.support.faulty_server"]

needs_hw_slow = pytest.mark.skipif(
    os.environ.get("HW_SLOW") != "1", reason="100-kill campaign: set HW_SLOW=1 to run it"
)


# ---------------------------------------------------------------------------------------------
# A server on a directory of our own, restarted at will


class Node:
    """One data directory; ``start`` spawns a server on it, logging to ``server.log``."""

    def __init__(self, tmp_path: Path, *args: str, faulty: bool = False) -> None:
        self.dir = tmp_path / "data"
        self.dir.mkdir(exist_ok=True)
        self.log_path = tmp_path / "server.log"
        self.args = args
        #: what runs the server: the production CLI, or (``faulty``) the test launcher whose
        #: AOF writes fail and syncs wait on demand (FAULT AOF-WRITE-ERROR, AOF-FSYNC-HOLD)
        self.launcher = FAULTY_SERVER if faulty else HEADWATER
        self.proc: subprocess.Popen[bytes] | None = None
        self.spawned: list[subprocess.Popen[bytes]] = []
        self.port = 0

    @property
    def aof(self) -> Path:
        return self.dir / AOF_DIR / AOF_FILE

    @property
    def manifest(self) -> Path:
        return self.dir / AOF_DIR / MANIFEST

    def command(self) -> list[str]:
        return [*self.launcher, "server", "--port", str(self.port), "--dir", str(self.dir)]

    def spawn(self, *extra: str) -> subprocess.Popen[bytes]:
        alive = [p.pid for p in self.spawned if p.poll() is None]
        assert not alive, f"a server still runs on this directory: {alive}"
        self.port = free_port()
        with open(self.log_path, "ab") as log:
            log.write(f"---- start {' '.join(self.args + extra)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [*self.command(), *self.args, *extra],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
        self.spawned.append(self.proc)
        return self.proc

    def start(self, *extra: str, timeout: float = 30.0) -> None:
        proc = self.spawn(*extra)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"server exited with {proc.returncode}\n{self.log_tail()}")
            if loaded(self.port):  # (the port opens before the load: wait for its end)
                return
            time.sleep(0.02)
        self.kill()
        raise AssertionError(f"server did not listen within {timeout}s\n{self.log_tail()}")

    def run_expecting_exit(self, *extra: str, timeout: float = 30.0) -> int:
        """Start a server that should refuse to start; its exit code."""
        proc = self.spawn(*extra)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"server did not exit\n{self.log_tail()}") from None

    def kill(self) -> None:
        for proc in self.spawned:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.terminate()
        return self.proc.wait(15)

    def client(self, **kwargs: Any) -> redis.Redis:
        options: dict[str, Any] = {"socket_timeout": 10, "retry": Retry(NoBackoff(), 0)}
        return redis.Redis(port=self.port, **{**options, **kwargs})

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def last_log(self) -> str:
        """The log of the most recent start."""
        return self.log_text().rsplit("---- start", 1)[-1]

    def log_tail(self, lines: int = 40) -> str:
        return "server log tail:\n" + "\n".join(self.log_text().splitlines()[-lines:])


@pytest.fixture
def nodes() -> Any:
    """Kills every node a test made, whatever happens to the test."""
    made: list[Node] = []

    def make(tmp_path: Path, *args: str, faulty: bool = False) -> Node:
        node = Node(tmp_path, *args, faulty=faulty)
        made.append(node)
        return node

    yield make
    for node in made:
        node.kill()


# ---------------------------------------------------------------------------------------------
# The crash campaign: state kept by the clients


def sid_key(sid: bytes) -> tuple[int, int]:
    ms, seq = sid.split(b"-")
    return int(ms), int(seq)


@dataclass
class WriterState:
    w: int
    idmp: bool
    next_seq: int = 0
    sent: set[int] = field(default_factory=set)
    acked: dict[int, bytes] = field(default_factory=dict)  # seq -> ID its reply gave
    uncertain: set[int] = field(default_factory=set)  # sent, no reply (the server died)
    gone: set[int] = field(default_factory=set)  # uncertain, and absent after a restart
    iids: list[tuple[int, bytes]] = field(default_factory=list)  # IDMP acks, in ack order
    round_start: int = 0  # len(iids) when this round began

    def argv(self, seq: int) -> list[str | int]:
        prefix: list[str | int] = ["XADD", KEY]
        if self.idmp:
            prefix += ["IDMP", f"p{self.w}", f"{self.w}-{seq}"]
        return [*prefix, "*", "w", self.w, "n", seq]


@dataclass
class GroupState:
    delivered: set[bytes] = field(default_factory=set)  # XREADGROUP replies received
    ack_sent: set[bytes] = field(default_factory=set)
    acked: set[bytes] = field(default_factory=set)  # XACK replies received


class Campaign:
    def __init__(self, node: Node, rng: random.Random, seed: int) -> None:
        self.node = node
        self.rng = rng
        self.seed = seed
        self.writers = [WriterState(w, w < IDMP_WRITERS) for w in range(WRITERS)]
        self.group = GroupState()
        self.recovered: dict[tuple[int, int], bytes] = {}  # seen after a restart: must stay
        self.errors: list[str] = []  # found by the client threads
        self.round = 0
        self.ids: list[bytes] = []  # the stream's IDs at the last check
        self.stats = {"acked": 0, "uncertain": 0, "uncertain_present": 0, "resent": 0}

    def where(self) -> str:
        return f"seed={self.seed} round={self.round}\n{self.node.log_tail()}"

    # -- the workload ----------------------------------------------------------------------

    def writer(self, state: WriterState, stop: threading.Event) -> None:
        r = self.node.client()
        try:
            while not stop.is_set():
                seq = state.next_seq
                state.next_seq += 1
                state.sent.add(seq)
                try:
                    sid = r.execute_command(*state.argv(seq))
                except DISCONNECTED:
                    state.uncertain.add(seq)
                    return
                except redis.ResponseError as exc:
                    self.errors.append(f"writer {state.w} seq {seq}: {exc}")
                    return
                state.acked[seq] = sid
                if state.idmp:
                    state.iids.append((seq, sid))
        finally:
            r.close()

    def consumer(self, stop: threading.Event) -> None:
        g = self.group
        rng = random.Random(self.seed + self.round)
        r = self.node.client()
        try:
            while not stop.is_set():
                try:
                    reply = r.xreadgroup(GROUP, CONSUMER, {KEY: ">"}, count=10)
                except DISCONNECTED:
                    return
                ids = [sid for _, entries in reply for sid, _ in entries] if reply else []
                if not ids:
                    time.sleep(0.005)
                    continue
                again = g.delivered.intersection(ids)
                if again:
                    self.errors.append(f"delivered twice with '>': {sorted(again)[:5]}")
                g.delivered.update(ids)
                to_ack = ids[: rng.randint(0, len(ids))]
                if not to_ack:
                    continue
                g.ack_sent.update(to_ack)
                try:
                    count = r.xack(KEY, GROUP, *to_ack)
                except DISCONNECTED:
                    return
                if count != len(to_ack):
                    self.errors.append(f"XACK of {len(to_ack)} pending entries replied {count}")
                g.acked.update(to_ack)
        finally:
            r.close()

    def load_for(self, seconds: float, *, kill: bool) -> None:
        """Run the workload; SIGKILL the server after ``seconds`` (with ``kill=False``: stop
        the clients first, so that nothing is in flight, then kill it)."""
        stop = threading.Event()
        for state in self.writers:
            state.round_start = len(state.iids)
        threads = [
            threading.Thread(target=self.writer, args=(state, stop), daemon=True)
            for state in self.writers
        ]
        threads.append(threading.Thread(target=self.consumer, args=(stop,), daemon=True))
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        if kill:
            self.node.kill()
        else:
            stop.set()
        for thread in threads:
            thread.join(30)
            assert not thread.is_alive(), f"a client thread hangs\n{self.where()}"
        if not kill:
            self.node.kill()

    def setup(self) -> None:
        r = self.node.client()
        r.xgroup_create(KEY, GROUP, id="$", mkstream=True)
        assert r.execute_command("XCFGSET", KEY, "IDMP-DURATION", 86400, "IDMP-MAXSIZE", 10000)
        r.close()

    # -- checks after a restart ------------------------------------------------------------

    def verify(self) -> None:
        r = self.node.client()
        try:
            self._verify_entries(r)
            self._verify_group(r)
            self._resend_idmp(r)
        finally:
            r.close()
        assert not self.errors, f"{self.errors[:5]}\n{self.where()}"

    def _verify_entries(self, r: redis.Redis) -> None:
        where = self.where
        entries = r.xrange(KEY)
        ids = [sid for sid, _ in entries]
        keys = [sid_key(sid) for sid in ids]
        assert all(a < b for a, b in itertools.pairwise(keys)), (
            f"IDs not strictly increasing\n{where()}"
        )
        assert r.xlen(KEY) == len(entries), where()
        info = r.xinfo_stream(KEY)
        assert info["length"] == len(entries), where()
        assert info["entries-added"] == len(entries), f"{info}\n{where()}"
        if ids:
            assert sid_key(info["last-generated-id"]) >= keys[-1], f"{info}\n{where()}"
        present: dict[tuple[int, int], bytes] = {}
        for sid, fields in entries:
            wn = (int(fields[b"w"]), int(fields[b"n"]))
            assert wn not in present, f"duplicate entry {wn}: {present[wn]!r} {sid!r}\n{where()}"
            present[wn] = sid
        for state in self.writers:
            for seq, sid in state.acked.items():
                got = present.get((state.w, seq))
                assert got == sid, (
                    f"acknowledged entry w={state.w} n={seq} id={sid!r} "
                    f"{'lost' if got is None else f'has id {got!r}'}\n{where()}"
                )
            mine = sorted((seq, sid_key(sid)) for (w, seq), sid in present.items() if w == state.w)
            assert all(a[1] < b[1] for a, b in itertools.pairwise(mine)), (
                f"writer {state.w}'s entries are out of order\n{where()}"
            )
            phantom = [seq for seq, _ in mine if seq not in state.sent]
            assert not phantom, f"entries never sent: w={state.w} {phantom[:5]}\n{where()}"
            back = [seq for seq in state.gone if (state.w, seq) in present]
            assert not back, f"entries absent after an earlier restart are back: {back}\n{where()}"
            for seq in state.uncertain:
                self.stats["uncertain"] += 1
                self.stats["uncertain_present"] += (state.w, seq) in present
                if not state.idmp and (state.w, seq) not in present:
                    state.gone.add(seq)
            if not state.idmp:
                state.uncertain.clear()
        for wn, sid in self.recovered.items():
            assert present.get(wn) == sid, (
                f"entry {wn} id={sid!r}, there after an earlier restart, is now "
                f"{present.get(wn)!r}\n{where()}"
            )
        self.recovered = present
        self.ids = ids

    def _verify_group(self, r: redis.Redis) -> None:
        where, g = self.where, self.group
        summary = r.xpending(KEY, GROUP)
        per_consumer = sum(c["pending"] for c in summary["consumers"])
        assert summary["pending"] == per_consumer, f"{summary}\n{where()}"
        rows = r.xpending_range(KEY, GROUP, "-", "+", count=10**9)
        pending = {row["message_id"] for row in rows}
        assert len(rows) == len(pending) == summary["pending"], where()
        assert all(row["times_delivered"] == 1 for row in rows), (
            f"{[row for row in rows if row['times_delivered'] != 1][:3]}\n{where()}"
        )
        acked_but_pending = pending & g.acked
        assert not acked_but_pending, (
            f"acknowledged XACKs undone: {sorted(acked_but_pending)[:5]}\n{where()}"
        )
        lost = (g.delivered - g.ack_sent) - pending
        assert not lost, f"delivered entries missing from the PEL: {sorted(lost)[:5]}\n{where()}"
        stream_ids = set(self.ids)
        assert pending <= stream_ids, where()
        groups = r.xinfo_groups(KEY)
        assert len(groups) == 1, where()
        info = groups[0]
        assert info["pending"] == summary["pending"], f"{info}\n{where()}"
        assert info["consumers"] == len(summary["consumers"]), f"{info}\n{where()}"
        last = sid_key(info["last-delivered-id"])
        delivered_max = max((sid_key(sid) for sid in g.delivered), default=(0, 0))
        assert delivered_max <= last, f"{info} delivered up to {delivered_max}\n{where()}"
        assert all(sid_key(sid) <= last for sid in pending), f"{info}\n{where()}"
        read = sum(1 for sid in self.ids if sid_key(sid) <= last)
        assert info["entries-read"] == read, f"{info}, {read} entries up to it\n{where()}"
        assert info["lag"] == len(self.ids) - read, f"{info}\n{where()}"

    def _resend_idmp(self, r: redis.Redis) -> None:
        """Resend what an IDMP producer would: the last round's acknowledged iids (and some
        older ones, all well within IDMP-MAXSIZE) must return their IDs and add nothing; the
        write in flight at the kill is added if and only if it is not there yet."""
        where = self.where
        length = r.xlen(KEY)
        pipe = r.pipeline(transaction=False)
        expect: list[bytes] = []
        for state in self.writers:
            if not state.idmp:
                continue
            recent = state.iids[state.round_start :]
            older = state.iids[max(0, len(state.iids) - 5000) : state.round_start]
            for seq, sid in recent + self.rng.sample(older, min(50, len(older))):
                pipe.execute_command(*state.argv(seq))
                expect.append(sid)
        got = pipe.execute() if expect else []
        self.stats["resent"] += len(expect)
        bad = [(e, g) for e, g in zip(expect, got, strict=True) if e != g]
        assert not bad, f"IDMP resends answered other IDs: {bad[:5]}\n{where()}"
        assert r.xlen(KEY) == length, f"IDMP resends added entries\n{where()}"
        for state in self.writers:
            if not state.idmp:
                continue
            for seq in sorted(state.uncertain):
                before = self.recovered.get((state.w, seq))
                sid = r.execute_command(*state.argv(seq))
                if before is not None:
                    assert sid == before, f"IDMP retry of {state.w}-{seq}: {sid!r}\n{where()}"
                else:
                    length += 1
                    self.recovered[(state.w, seq)] = sid
                state.acked[seq] = sid
                state.iids.append((seq, sid))
            state.uncertain.clear()
        assert r.xlen(KEY) == length, where()

    # -- the whole run ---------------------------------------------------------------------

    def run(self, kills: int, window: float) -> None:
        """``kills`` rounds of load for up to ``window`` seconds, then kill -9."""
        node, rng = self.node, self.rng
        node.start()
        self.setup()
        for self.round in range(1, kills + 1):
            if self.round % 5 == 0:
                # Now and then die during startup: recovery (cutting a torn tail) may be cut
                # short too. (The running server goes first: two on one directory would
                # both write the AOF.)
                node.kill()
                node.spawn()
                time.sleep(rng.uniform(0.0, 0.5))
                node.kill()
                node.start()
            self.load_for(rng.uniform(0.03, window), kill=True)
            node.start()
            self.verify()
            self.stats["acked"] = sum(len(s.acked) for s in self.writers)
        # Last, a clean shutdown must keep everything as well.
        self.round += 1
        self.load_for(0.3, kill=False)
        node.start()
        self.verify()
        assert node.terminate() == 0, node.log_tail()
        node.start()
        self.verify()
        node.kill()
        assert self.stats["acked"] > 100 * kills, f"{self.stats} too few writes\n{self.where()}"
        assert len(self.group.acked) > 0, self.where()


def campaign(tmp_path: Path, nodes: Any, fsync: str, kills: int, scale: float = 1.0) -> None:
    # Recovery time grows with the file: everysec writes about three times as fast as
    # always, so its rounds are shorter (about as many entries per round).
    window = {"always": 0.4, "everysec": 0.15}[fsync] * scale
    seed = int(os.environ.get("HW_CRASH_SEED", random.randrange(2**32)))
    node = nodes(tmp_path, "--appendfsync", fsync)
    run = Campaign(node, random.Random(seed), seed)
    started = time.monotonic()
    run.run(kills, window)
    print(
        f"{fsync}: {kills} kills (+{kills // 5} during startup) in "
        f"{time.monotonic() - started:.1f}s, seed {seed}, {run.stats}, "
        f"{len(run.group.delivered)} delivered, {len(run.group.acked)} acked by the consumer"
    )


def test_kill9_under_load_appendfsync_always(tmp_path: Path, nodes: Any) -> None:
    campaign(tmp_path, nodes, "always", kills=20)


def test_kill9_under_load_appendfsync_everysec(tmp_path: Path, nodes: Any) -> None:
    """A process kill is not a power loss: what was written to the OS survives, so every
    acknowledged write must too (only an unsynced page cache may be lost, and it is not)."""
    campaign(tmp_path, nodes, "everysec", kills=20)


@pytest.mark.slow
@needs_hw_slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("fsync", ["always", "everysec"])
def test_kill9_under_load_100_kills(tmp_path: Path, nodes: Any, fsync: str) -> None:
    campaign(tmp_path, nodes, fsync, kills=100, scale=0.5)


def test_everysec_ack_survives_kill9_while_a_background_fsync_runs(
    tmp_path: Path, nodes: Any
) -> None:
    """everysec postpones writes while its background fdatasync runs; a write acknowledged
    then must not be lost to a process kill (the fsync thread is not a power loss). A 64 MiB
    entry makes the next fsync long; small XADDs follow until INFO shows unwritten effects
    (``aof_buffer_length`` > 0), then kill -9."""
    node = nodes(tmp_path, "--appendfsync", "everysec", "--auto-aof-rewrite-percentage", "0")
    node.start()
    r = node.client()
    r.xadd("big", {"v": b"x" * (64 << 20)})
    acked: list[bytes] = []
    buffered = False
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not buffered:
        acked.append(r.xadd(KEY, {"n": len(acked)}))
        buffered = r.info("persistence")["aof_buffer_length"] > 0
    node.kill()
    node.start()
    got = [sid for sid, _ in node.client().xrange(KEY)]
    lost = [sid for sid in acked if sid not in got]
    assert not lost, (
        f"{len(lost)} of {len(acked)} acknowledged XADDs lost to kill -9 "
        f"(effects still buffered when acked: {buffered}): {lost[:5]}\n{node.log_tail()}"
    )


# ---------------------------------------------------------------------------------------------
# A damaged append-only file at startup


@dataclass
class Command:
    start: int
    end: int
    argv: list[bytes]


def split_commands(data: bytes) -> list[Command]:
    """The commands of a well-formed AOF, with their byte ranges (parsed independently of
    the server's reader)."""
    commands, pos = [], 0
    while pos < len(data):
        start = pos
        assert data[pos : pos + 1] == b"*", f"not an array at {pos}"
        eol = data.index(b"\r\n", pos)
        count, pos = int(data[pos + 1 : eol]), eol + 2
        argv = []
        for _ in range(count):
            eol = data.index(b"\r\n", pos)
            assert data[pos : pos + 1] == b"$"
            size, pos = int(data[pos + 1 : eol]), eol + 2
            argv.append(data[pos : pos + size])
            pos += size + 2
        commands.append(Command(start, pos, argv))
    return commands


def incr_file(node: Node) -> Path:
    """The last incremental file the manifest names (where new effects go)."""
    names = [
        line.split()[1]
        for line in node.manifest.read_text().splitlines()
        if line.split()[-2:] == ["type", "i"]
    ]
    assert names, node.manifest.read_text()
    return node.dir / AOF_DIR / names[-1]


def populated(tmp_path: Path, nodes: Any, entries: int, *args: str) -> tuple[Node, list[bytes]]:
    """A directory whose AOF holds ``entries`` XADDs to ``s``; the server stopped cleanly."""
    node = nodes(tmp_path, *args)
    node.start()
    r = node.client()
    ids = [r.xadd(KEY, {"n": i, "pad": "p" * 20}) for i in range(entries)]
    r.close()
    assert node.terminate() == 0, node.log_tail()
    return node, ids


def xrange_ids(node: Node, key: str = KEY) -> list[bytes]:
    r = node.client()
    try:
        return [sid for sid, _ in r.xrange(key)]
    finally:
        r.close()


@pytest.mark.parametrize("cut", ["header", "middle", "last-byte"])
def test_torn_tail_is_cut_off_unless_aof_load_truncated_no(
    tmp_path: Path, nodes: Any, cut: str
) -> None:
    node, ids = populated(tmp_path, nodes, 10)
    aof = incr_file(node)
    data = aof.read_bytes()
    last = split_commands(data)[-1]
    assert last.argv[0] == b"XADD" and last.argv[2] == ids[-1], last
    at = {"header": 1, "middle": (last.end - last.start) // 2, "last-byte": -1}[cut]
    size = last.start + at if at > 0 else last.end + at
    torn = data[:size]
    aof.write_bytes(torn)

    assert node.run_expecting_exit("--aof-load-truncated", "no") == 1, node.log_tail()
    assert aof.read_bytes() == torn, "a server that refused to start changed the AOF"
    assert "Traceback" not in node.last_log(), node.log_tail()

    node.start()
    log = node.last_log()
    assert re.search(r"(?i)truncat", log) and str(last.start) in log, node.log_tail()
    assert xrange_ids(node) == ids[:-1]
    assert aof.stat().st_size == last.start
    # The file goes on cleanly after the cut: a new write survives a kill.
    new = node.client().xadd(KEY, {"n": "new"})
    node.kill()
    node.start()
    assert xrange_ids(node) == [*ids[:-1], new], node.log_tail()


@pytest.mark.parametrize("damage", ["percent-signs", "unknown-command", "not-an-array"])
def test_damage_in_the_middle_refuses_to_start(tmp_path: Path, nodes: Any, damage: str) -> None:
    node, _ = populated(tmp_path, nodes, 10)
    aof = incr_file(node)
    data = bytearray(aof.read_bytes())
    victim = split_commands(bytes(data))[3]
    assert victim.argv[0] == b"XADD"
    if damage == "percent-signs":
        data[victim.start : victim.start + 4] = b"%%%%"
    elif damage == "unknown-command":
        name = data.index(b"XADD", victim.start)
        data[name : name + 4] = b"XFOO"
    else:
        data[victim.start : victim.start] = b"+OK\r\n"
    aof.write_bytes(bytes(data))

    assert node.run_expecting_exit() == 1, node.log_tail()
    log = node.last_log()
    assert "Bad file format reading the append only file" in log, node.log_tail()
    assert f"offset {victim.start}" in log, node.log_tail()
    assert "check-aof" in log, node.log_tail()
    assert "Traceback" not in log, node.log_tail()
    assert aof.read_bytes() == data, "a server that refused to start changed the AOF"


@pytest.mark.parametrize("how", ["file-deleted", "manifest-names-another"])
def test_manifest_naming_a_missing_file_refuses_to_start(
    tmp_path: Path, nodes: Any, how: str
) -> None:
    node, _ = populated(tmp_path, nodes, 3)
    if how == "file-deleted":
        incr_file(node).unlink()
    else:
        with open(node.manifest, "a") as f:
            f.write("file appendonly.aof.99.incr.aof seq 99 type i\n")
    manifest = node.manifest.read_bytes()
    files = sorted(p.name for p in (node.dir / AOF_DIR).iterdir())

    assert node.run_expecting_exit() == 1, node.log_tail()
    assert "Bad AOF manifest" in node.last_log(), node.log_tail()
    assert node.manifest.read_bytes() == manifest
    assert sorted(p.name for p in (node.dir / AOF_DIR).iterdir()) == files


def test_unfinished_multi_at_the_end_is_discarded(tmp_path: Path, nodes: Any) -> None:
    node, ids = populated(tmp_path, nodes, 5)
    aof = incr_file(node)
    size = aof.stat().st_size
    far = "9999999999999-0"
    with open(aof, "ab") as f:
        f.write(b"*1\r\n$5\r\nMULTI\r\n" + encode(["XADD", KEY, far, "f", "v"]))

    node.start()
    assert xrange_ids(node) == ids, node.log_tail()
    assert aof.stat().st_size == size, "the unfinished transaction is still in the file"
    r = node.client()
    new = r.xadd(KEY, {"n": "after"})  # an auto ID: 9999999999999-0 was never the last ID
    assert sid_key(new) < sid_key(far.encode())
    assert node.terminate() == 0

    # Control: the same transaction with its EXEC is applied.
    with open(aof, "ab") as f:
        f.write(encode(["MULTI"]) + encode(["XADD", KEY, far, "f", "v"]) + encode(["EXEC"]))
    node.start()
    assert xrange_ids(node) == [*ids, new, far.encode()], node.log_tail()


def encode(argv: list[str]) -> bytes:
    return b"".join(
        [b"*%d\r\n" % len(argv), *(b"$%d\r\n%s\r\n" % (len(a), a.encode()) for a in argv)]
    )


# ---------------------------------------------------------------------------------------------
# A full disk (FAULT AOF-WRITE-ERROR ENOSPC, tests/support/faulty_server.py)


def aof_status(r: redis.Redis) -> str:
    return str(r.info("persistence")["aof_last_write_status"])


def wait_for_status(r: redis.Redis, status: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while aof_status(r) != status:
        assert time.monotonic() < deadline, f"aof_last_write_status never became {status}"
        time.sleep(0.05)


def test_full_disk_everysec_refuses_writes_holds_reads_and_recovers(
    tmp_path: Path, nodes: Any
) -> None:
    """An error shorter than aof-write-error-timeout: the write that met it and the reads
    that may show it wait, further writes get -MISCONF; once the disk works, all go on."""
    node = nodes(
        tmp_path, "--appendfsync", "everysec", "--aof-write-error-timeout", "60000", faulty=True
    )
    node.start()
    r = node.client()
    acked = [r.xadd(KEY, {"n": i}) for i in range(5)]
    r.xgroup_create(KEY, GROUP, id="0")
    assert r.execute_command("FAULT", "AOF-WRITE-ERROR", "ENOSPC") == b"OK"
    # The write that meets the error is applied but not acknowledged: even with everysec a
    # reply leaves only once its effects reached the kernel (a process kill keeps those).
    held = RawClient(node.port, timeout=1.0)
    held.send_raw(encode(["XADD", KEY, "*", "n", "held"]))
    with pytest.raises(TimeoutError):
        held.read_reply()
    refusals: list[str] = []
    for i in range(5, 15):
        try:
            acked.append(r.xadd(KEY, {"n": i}))
        except redis.ResponseError as exc:
            refusals.append(str(exc))
    assert refusals == [MISCONF] * 10, f"{refusals}\n{node.log_tail()}"
    for write in (
        lambda: r.xgroup_create(KEY, "g2", id="0"),
        lambda: r.xreadgroup(GROUP, CONSUMER, {KEY: ">"}),
        lambda: r.xadd("other", {"f": "v"}),
    ):
        with pytest.raises(redis.ResponseError, match=f"^{re.escape(MISCONF)}$"):
            write()
    assert aof_status(r) == "err"
    time.sleep(0.3)  # the cron retries the write, which fails again
    assert aof_status(r) == "err"
    assert r.ping()
    # A read may show the held write, which is not on disk: it waits with it.
    reader = RawClient(node.port, timeout=0.5)
    reader.send_raw(encode(["XRANGE", KEY, "-", "+"]))
    with pytest.raises(TimeoutError):
        reader.read_reply()

    assert r.execute_command("FAULT", "AOF-WRITE-ERROR", "OFF") == b"OK"
    wait_for_status(r, "ok")
    held.sock.settimeout(10.0)
    reply = held.read_reply()
    assert reply.startswith(b"$"), reply
    acked.append(reply.split(b"\r\n")[1])
    reader.sock.settimeout(10.0)
    assert acked[-1] in reader.read_reply()  # durable now: the read shows it
    assert [sid for sid, _ in r.xrange(KEY)] == acked
    assert r.xinfo_groups(KEY)[0]["pending"] == 0
    acked.append(r.xadd(KEY, {"n": "after"}))
    node.kill()
    node.start()
    assert xrange_ids(node) == acked, node.log_tail()


def test_full_disk_always_holds_the_reply_until_the_write_succeeds(
    tmp_path: Path, nodes: Any
) -> None:
    node = nodes(
        tmp_path, "--appendfsync", "always", "--aof-write-error-timeout", "60000", faulty=True
    )
    node.start()
    r = node.client()
    acked = [r.xadd(KEY, {"n": i}) for i in range(5)]
    assert r.execute_command("FAULT", "AOF-WRITE-ERROR", "ENOSPC") == b"OK"
    held = RawClient(node.port, timeout=1.0)
    held.send_raw(encode(["XADD", KEY, "*", "n", "held"]))
    with pytest.raises(TimeoutError):
        held.read_reply()  # not on disk: not acknowledged
    off = RawClient(node.port, timeout=10.0)
    assert off.call("FAULT", "AOF-WRITE-ERROR", "OFF") == b"+OK\r\n"
    held.sock.settimeout(10.0)
    reply = held.read_reply()
    assert reply.startswith(b"$"), reply
    sid = reply.split(b"\r\n")[1]
    acked.append(sid)
    assert aof_status(r) == "ok"
    node.kill()
    node.start()
    assert xrange_ids(node) == acked, node.log_tail()


def test_full_disk_always_other_clients_are_answered_but_reads_wait(
    tmp_path: Path, nodes: Any
) -> None:
    """While a write's reply is held, the rest of the server still answers PING and INFO
    (aof_last_write_status:err), further writes get -MISCONF, and a read that may show the
    held write waits for it to be durable (it would otherwise show what a roll-back or a
    crash may undo)."""
    node = nodes(
        tmp_path, "--appendfsync", "always", "--aof-write-error-timeout", "60000", faulty=True
    )
    node.start()
    r = node.client(socket_timeout=2)
    acked = [r.xadd(KEY, {"n": i}) for i in range(5)]
    assert r.execute_command("FAULT", "AOF-WRITE-ERROR", "ENOSPC") == b"OK"
    held = RawClient(node.port, timeout=1.0)
    held.send_raw(encode(["XADD", KEY, "*", "n", "held"]))
    with pytest.raises(TimeoutError):
        held.read_reply()
    asked = {
        "PING": ["PING"],
        "XRANGE": ["XRANGE", KEY, "-", "+", "COUNT", "5"],
        "INFO": ["INFO", "persistence"],
        "XADD": ["XADD", KEY, "*", "n", "refused"],
    }
    others = {name: RawClient(node.port, timeout=0.1) for name in asked}
    for name, argv in asked.items():
        others[name].send_raw(encode(argv))
    time.sleep(1.0)
    answers: dict[str, bytes | str] = {}
    for name, other in others.items():
        try:
            answers[name] = other.read_reply()
        except TimeoutError:
            answers[name] = "no reply within 1 s"
    off = RawClient(node.port, timeout=10.0)
    assert off.call("FAULT", "AOF-WRITE-ERROR", "OFF") == b"+OK\r\n"
    assert answers["PING"] == b"+PONG\r\n", answers
    assert answers["XRANGE"] == "no reply within 1 s", answers
    assert isinstance(answers["INFO"], bytes), answers
    assert b"aof_last_write_status:err" in answers["INFO"], answers
    assert answers["XADD"] == f"-{MISCONF}\r\n".encode(), answers
    held.sock.settimeout(10.0)
    assert held.read_reply().startswith(b"$")
    others["XRANGE"].sock.settimeout(10.0)
    assert acked[0] in others["XRANGE"].read_reply()


# ---------------------------------------------------------------------------------------------
# A full disk that lasts: the roll-back after aof-write-error-timeout

ERROR_TIMEOUT_MS = 300
#: the loop notices the timeout within a cron tick or a 50 ms retry, then reloads the data
ERROR_MARGIN_S = 1.5


def misconf_line() -> bytes:
    return f"-{MISCONF}\r\n".encode()


@pytest.mark.parametrize("fsync", ["everysec", "always"])
def test_full_disk_that_lasts_rolls_back_and_answers_misconf_in_time(
    tmp_path: Path, nodes: Any, fsync: str
) -> None:
    """The write that met the error gets -MISCONF within aof-write-error-timeout (+ margin),
    and so does every reply that may have shown it (one error per reply, pipelines stay in
    step); its entry is gone from memory and from the file; acknowledged writes stay; once the
    disk works again writes are durable; kill -9 and a restart agree with all of it."""
    node = nodes(
        tmp_path,
        "--appendfsync",
        fsync,
        "--aof-write-error-timeout",
        str(ERROR_TIMEOUT_MS),
        faulty=True,
    )
    node.start()
    r = node.client()
    acked = [r.xadd(KEY, {"n": i}) for i in range(5)]
    assert r.execute_command("FAULT", "AOF-WRITE-ERROR", "ENOSPC") == b"OK"
    writer = RawClient(node.port, timeout=10.0)
    started = time.monotonic()
    writer.send_raw(encode(["XADD", KEY, "*", "n", "lost"]))
    reader = RawClient(node.port, timeout=10.0)
    reader.send_raw(encode(["XRANGE", KEY, "-", "+"]))
    piped = RawClient(node.port, timeout=10.0)
    piped.send_raw(b"".join(encode(argv) for argv in (["XLEN", KEY], ["PING"], ["XLEN", KEY])))

    assert writer.read_reply() == misconf_line()
    waited = time.monotonic() - started
    assert waited < ERROR_TIMEOUT_MS / 1000 + ERROR_MARGIN_S, (waited, node.log_tail())
    shown = reader.read_reply()
    # answered from the rolled-back data, or refused: never the unacknowledged entry
    assert shown == misconf_line() or b"lost" not in shown, shown
    piped_replies = [piped.read_reply() for _ in range(3)]
    assert all(reply == misconf_line() or reply == b":5\r\n" for reply in piped_replies[::2])
    assert piped_replies[1] in (misconf_line(), b"+PONG\r\n"), piped_replies
    assert piped.call("PING") == b"+PONG\r\n"  # in step: the next reply is the next command's

    assert [sid for sid, _ in r.xrange(KEY)] == acked
    assert aof_status(r) == "err"
    with pytest.raises(redis.ResponseError, match=f"^{re.escape(MISCONF)}$"):
        r.xadd(KEY, {"n": "refused"})
    time.sleep(3 * ERROR_TIMEOUT_MS / 1000)  # still failing: the probe retries, no reload
    assert node.last_log().count("dropping the") == 1, node.log_tail()
    assert "dropping the 1 effects not on disk" in node.last_log(), node.log_tail()

    assert r.execute_command("FAULT", "AOF-WRITE-ERROR", "OFF") == b"OK"
    wait_for_status(r, "ok")
    acked.append(r.xadd(KEY, {"n": "after"}))
    node.kill()
    node.start()
    assert xrange_ids(node) == acked, node.log_tail()


def test_full_disk_that_lasts_answers_in_time_however_large_the_data(
    tmp_path: Path, nodes: Any
) -> None:
    """The reload after a roll-back takes time with the size of the data (seconds for a few
    hundred thousand entries): the waiting writer is answered before it, in the same turn as
    the cut, so its bound does not grow with the data; reads after it see the durable state."""
    node = nodes(tmp_path, "--aof-write-error-timeout", str(ERROR_TIMEOUT_MS), faulty=True)
    node.start()
    r = node.client(socket_timeout=60)
    pipe = r.pipeline(transaction=False)
    for i in range(200_000):
        pipe.xadd(KEY, {"n": i})
    acked = len(pipe.execute())
    assert r.execute_command("FAULT", "AOF-WRITE-ERROR", "ENOSPC") == b"OK"
    writer = RawClient(node.port, timeout=30.0)
    started = time.monotonic()
    writer.send_raw(encode(["XADD", KEY, "*", "n", "lost"]))
    assert writer.read_reply() == misconf_line()
    waited = time.monotonic() - started
    assert waited < ERROR_TIMEOUT_MS / 1000 + ERROR_MARGIN_S, (waited, node.log_tail())
    assert r.xlen(KEY) == acked
    assert r.xrevrange(KEY, count=1)[0][1] == {b"n": str(acked - 1).encode()}


def test_full_disk_that_lasts_kill9_after_the_roll_back_keeps_only_the_acknowledged(
    tmp_path: Path, nodes: Any
) -> None:
    """A crash while the disk is still full, after the roll-back: the restart loads exactly
    the acknowledged writes (the file was cut back, nothing torn is left in it)."""
    node = nodes(
        tmp_path, "--appendfsync", "everysec", "--aof-write-error-timeout", "0", faulty=True
    )
    node.start()
    r = node.client()
    pipe = r.pipeline(transaction=False)
    for i in range(200):
        pipe.xadd(KEY, {"n": i})
    acked = list(pipe.execute())
    assert r.execute_command("FAULT", "AOF-WRITE-ERROR", "ENOSPC") == b"OK"
    writers = [RawClient(node.port, timeout=5.0) for _ in range(4)]
    for n, writer in enumerate(writers):
        writer.send_raw(encode(["XADD", KEY, "*", "n", f"lost {n}"]))
    replies = [writer.read_reply() for writer in writers]
    refused = [reply for reply in replies if reply == misconf_line()]
    assert len(refused) == len(replies), replies
    node.kill()
    node.start()
    assert xrange_ids(node) == acked, node.log_tail()
    r = node.client()
    acked.append(r.xadd(KEY, {"n": "after restart"}))
    assert xrange_ids(node) == acked


def test_short_full_disk_ends_before_the_timeout_without_a_roll_back(
    tmp_path: Path, nodes: Any
) -> None:
    """The bound is only for an error that lasts: one that ends sooner answers the held write
    with its ID, and nothing is rolled back."""
    node = nodes(tmp_path, "--aof-write-error-timeout", "5000", faulty=True)
    node.start()
    r = node.client()
    assert r.execute_command("FAULT", "AOF-WRITE-ERROR", "ENOSPC") == b"OK"
    held = RawClient(node.port, timeout=0.5)
    held.send_raw(encode(["XADD", KEY, "*", "n", "kept"]))
    with pytest.raises(TimeoutError):
        held.read_reply()
    assert r.execute_command("FAULT", "AOF-WRITE-ERROR", "OFF") == b"OK"
    held.sock.settimeout(10.0)
    sid = held.read_reply().split(b"\r\n")[1]
    assert "dropping" not in node.last_log()
    node.kill()
    node.start()
    assert xrange_ids(node) == [sid]


def test_aof_write_error_timeout_config(tmp_path: Path, nodes: Any) -> None:
    node = nodes(tmp_path)
    node.start()
    r = node.client()
    assert r.config_get("aof-write-error-timeout") == {"aof-write-error-timeout": "2000"}
    assert r.config_set("aof-write-error-timeout", 0)
    assert r.config_get("aof-write-error-timeout") == {"aof-write-error-timeout": "0"}
    with pytest.raises(redis.ResponseError) as bad:
        r.config_set("aof-write-error-timeout", -1)
    assert str(bad.value).startswith(
        "CONFIG SET failed (possibly related to argument 'aof-write-error-timeout') - "
    )


def test_the_production_server_injects_no_faults(tmp_path: Path, nodes: Any) -> None:
    """FAULT and the old DEBUG AOF-WRITE-ERROR / AOF-FSYNC-HOLD exist only in the test
    launcher: ``headwater server`` answers them as unknown."""
    node = nodes(tmp_path)
    node.start()
    r = node.client()
    with pytest.raises(redis.ResponseError, match=r"^unknown command 'FAULT'"):
        r.execute_command("FAULT", "AOF-WRITE-ERROR", "ENOSPC")
    for sub in ("AOF-WRITE-ERROR", "AOF-FSYNC-HOLD"):
        with pytest.raises(redis.ResponseError, match=f"^unknown subcommand .*'{sub}'"):
            r.execute_command("DEBUG", sub, "ON")
    assert r.xadd(KEY, {"n": 1})


# ---------------------------------------------------------------------------------------------
# Group commit: the fdatasync runs beside the event loop (appendfsync always)


def test_always_reply_waits_for_its_fsync_while_the_loop_goes_on(
    tmp_path: Path, nodes: Any
) -> None:
    """Issue #6: with the background fdatasync held (FAULT AOF-FSYNC-HOLD ON), an XADD is
    applied but not acknowledged; meanwhile the server answers other clients (PING, INFO), a
    read that would show the unsynced entry waits for the sync, and another XADD gathers in
    the AOF buffer behind the sync in flight. Released, all three replies arrive, and both
    writes survive kill -9."""
    node = nodes(tmp_path, "--appendfsync", "always", faulty=True)
    node.start()
    control = RawClient(node.port, timeout=10.0)
    before = control.call("XADD", KEY, "*", "n", "before")
    assert before.startswith(b"$"), before
    assert control.call("FAULT", "AOF-FSYNC-HOLD", "ON") == b"+OK\r\n"
    writers = [RawClient(node.port, timeout=0.5) for _ in range(2)]
    writers[0].send_raw(encode(["XADD", KEY, "*", "n", "first"]))
    with pytest.raises(TimeoutError):
        writers[0].read_reply()  # applied, written, but not fdatasync'ed: no reply
    other = RawClient(node.port, timeout=2.0)
    assert other.call("PING") == b"+PONG\r\n"  # the loop goes on
    reader = RawClient(node.port, timeout=0.5)
    reader.send_raw(encode(["XLEN", KEY]))
    with pytest.raises(TimeoutError):
        reader.read_reply()  # it would show "first", which a crash now would undo
    writers[1].send_raw(encode(["XADD", KEY, "*", "n", "second"]))
    with pytest.raises(TimeoutError):
        writers[1].read_reply()
    info = other.call("INFO", "persistence")
    assert b"aof_buffer_length:0\r\n" not in info, info  # gathered behind the sync
    assert control.call("FAULT", "AOF-FSYNC-HOLD", "OFF") == b"+OK\r\n"
    reader.sock.settimeout(10.0)
    assert reader.read_reply() == b":2\r\n"
    acked = []
    for writer in writers:
        writer.sock.settimeout(10.0)
        reply = writer.read_reply()
        assert reply.startswith(b"$"), reply
        acked.append(reply.split(b"\r\n")[1])
    node.kill()
    node.start()
    assert xrange_ids(node) == [before.split(b"\r\n")[1], *acked], node.log_tail()


def test_always_many_writers_each_acknowledged_write_survives(tmp_path: Path, nodes: Any) -> None:
    """Many connections writing at once go through the background sync path (batches of
    several clients); every acknowledged XADD is there after kill -9, once."""
    node = nodes(tmp_path, "--appendfsync", "always")
    node.start()
    acked: list[list[bytes]] = [[] for _ in range(16)]
    stop = threading.Event()

    def write(n: int) -> None:
        r = node.client()
        with contextlib.suppress(*DISCONNECTED):
            while not stop.is_set():
                acked[n].append(r.xadd(KEY, {"w": n}))

    threads = [threading.Thread(target=write, args=(n,), daemon=True) for n in range(16)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    node.kill()
    stop.set()
    for thread in threads:
        thread.join(10)
    node.start()
    got = xrange_ids(node)
    assert len(got) == len(set(got))
    lost = {sid for ids in acked for sid in ids} - set(got)
    assert not lost, f"{len(lost)} acknowledged XADDs lost: {sorted(lost)[:5]}\n{node.log_tail()}"
    assert sum(map(len, acked)) > 100, node.log_tail()


# ---------------------------------------------------------------------------------------------
# DEBUG LOADAOF


# Consumers' seen/active times are when the commands ran: a reload (as in Redis) sets them to
# when they were replayed. Delivery times are kept (XCLAIM ... TIME in the AOF).
TIMES = {"seen-time", "active-time", "idle", "inactive", "time_since_delivered"}
TIMES |= {name.encode() for name in TIMES}


def without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list | tuple):
        return [without_times(v) for v in value]
    return value


def snapshot(r: redis.Redis) -> dict[str, Any]:
    state: dict[str, Any] = {"keys": sorted(r.keys("*"))}
    for key in ("s", "s2"):
        state[key] = {
            "xrange": r.xrange(key),
            "full": without_times(r.execute_command("XINFO", "STREAM", key, "FULL")),
            "groups": without_times(r.xinfo_groups(key)),
            "cfg": r.execute_command("XIDMP", "CFGGET", key),
        }
        for group in r.xinfo_groups(key):
            name = group["name"]
            state[key][f"pending:{name!r}"] = without_times(
                r.xpending_range(key, name, "-", "+", count=1000)
            )
            state[key][f"consumers:{name!r}"] = without_times(r.xinfo_consumers(key, name))
    return state


def test_debug_loadaof_keeps_the_data_identical(tmp_path: Path, nodes: Any) -> None:
    node = nodes(tmp_path)
    node.start()
    r = node.client()
    ids = [r.xadd("s", {"n": i, "body": f"entry {i}"}) for i in range(60)]
    r.execute_command("XCFGSET", "s", "IDMP-DURATION", 3600, "IDMP-MAXSIZE", 50)
    idmp = [r.xadd("s", {"n": i}, idmp=("prod", f"iid-{i}")) for i in range(10)]
    r.xdel("s", ids[3], ids[7])
    r.xgroup_create("s", "g1", id="0")
    r.xgroup_create("s", "g2", id=ids[20])
    r.xreadgroup("g1", "alice", {"s": ">"}, count=15)
    r.xreadgroup("g1", "bob", {"s": ">"}, count=10)
    r.xack("s", "g1", ids[0], ids[1], ids[10])
    r.xclaim("s", "g1", "carol", 0, [ids[2], ids[4]])
    r.xreadgroup("g2", "dave", {"s": ">"}, count=5)
    r.xgroup_createconsumer("s", "g2", "erin")
    r.xadd("s2", {"f": "v"}, maxlen=10)
    for i in range(30):
        r.xadd("s2", {"i": i}, maxlen=10, approximate=False)
    r.xtrim("s", minid=ids[5])
    before = snapshot(r)

    assert r.execute_command("DEBUG", "LOADAOF") == b"OK"
    after = snapshot(r)
    assert after == before, node.log_tail()
    # IDMP iids are back too, and the file goes on after the reload.
    assert [r.xadd("s", {"n": i}, idmp=("prod", f"iid-{i}")) for i in range(10)] == idmp
    new = r.xadd("s", {"n": "after"})
    node.kill()
    node.start()
    r = node.client()
    again = snapshot(r)
    assert again["s"]["xrange"] == [*before["s"]["xrange"], (new, {b"n": b"after"})]
    assert again["s2"] == before["s2"]
    assert [r.xadd("s", {"n": i}, idmp=("prod", f"iid-{i}")) for i in range(10)] == idmp


# ---------------------------------------------------------------------------------------------
# Kills during a background rewrite and a background save


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_kill9_during_bgrewriteaof_loses_nothing(tmp_path: Path, nodes: Any, preamble: str) -> None:
    """A rewrite switches files in steps (new incr in the manifest, child writes the base,
    manifest switched, old files removed); a kill at any moment must leave a loadable set
    holding every acknowledged write, including those made while the child ran."""
    node = nodes(tmp_path, "--appendfsync", "always", "--aof-use-rdb-preamble", preamble)
    node.start()
    r = node.client()
    pipe = r.pipeline(transaction=False)
    for i in range(20_000):
        pipe.xadd(KEY, {"n": i})
    acked = list(pipe.execute())
    rng = random.Random()
    for _ in range(6):
        r = node.client()
        r.bgrewriteaof()
        acked += [r.xadd(KEY, {"n": "during"}) for _ in range(rng.randint(0, 20))]
        time.sleep(rng.uniform(0.0, 0.3))
        node.kill()
        node.start()
        assert xrange_ids(node) == acked, node.log_tail()
    r = node.client()
    r.bgrewriteaof()
    deadline = time.monotonic() + 30
    while r.info("persistence")["aof_rewrite_in_progress"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert r.info("persistence")["aof_last_bgrewrite_status"] == "ok"
    node.kill()
    node.start()
    assert xrange_ids(node) == acked, node.log_tail()
    names = sorted(p.name for p in (node.dir / AOF_DIR).iterdir())
    assert len(names) == 3, names  # base, incr, manifest: the old files were removed


def test_kill9_during_bgsave_leaves_a_loadable_snapshot(tmp_path: Path, nodes: Any) -> None:
    """Snapshot-only mode: a kill during BGSAVE keeps the previous snapshot (the new one is
    renamed into place only when complete), so a restart loads a consistent state."""
    node = nodes(tmp_path, "--appendonly", "no", "--save", "")
    node.start()
    r = node.client()
    pipe = r.pipeline(transaction=False)
    for i in range(20_000):
        pipe.xadd(KEY, {"n": i})
    saved = list(pipe.execute())
    assert r.save()
    for round_ in range(5):
        r = node.client()
        r.xadd(KEY, {"n": f"unsaved {round_}"})
        r.bgsave()
        time.sleep(random.uniform(0.0, 0.2))
        node.kill()
        node.start()
        ids = xrange_ids(node)
        # either the last complete snapshot or the one being written, never a torn mix
        assert ids[: len(saved)] == saved, node.log_tail()
        saved = ids


def test_lazily_loaded_snapshot_serves_reads_writes_and_saves(tmp_path: Path, nodes: Any) -> None:
    """A snapshot's nodes are copied out of the file on first use and by the cron: right after
    a restart the server reads, appends, deletes and saves the same data as before it, and
    the cron ends with every node copied (INFO ``snapshot_lazy_nodes:0``)."""
    node = nodes(tmp_path, "--appendonly", "no", "--save", "")
    node.start()
    r = node.client()
    pipe = r.pipeline(transaction=False)
    for i in range(30_000):
        pipe.xadd(KEY, {"n": i, "pad": "x" * (i % 13)})
    pipe.execute()
    before = r.xrange(KEY)
    assert r.save()
    node.kill()
    node.start()
    r = node.client()
    assert r.xrange(KEY, "-", "+", count=5) == before[:5]
    assert r.xrevrange(KEY, "+", "-", count=5) == before[::-1][:5]
    assert r.xdel(KEY, before[100][0], before[20_000][0]) == 2
    added = r.xadd(KEY, {"n": "after"})
    assert r.save()  # writes every node, copied or not
    deadline = time.monotonic() + 20
    while r.info("persistence")["snapshot_lazy_nodes"] != 0:
        assert time.monotonic() < deadline, "the cron never copied every node"
        time.sleep(0.1)
    expected = [e for i, e in enumerate(before) if i not in (100, 20_000)]
    assert r.xrange(KEY)[:-1] == expected
    node.kill()
    node.start()
    assert xrange_ids(node) == [sid for sid, _ in expected] + [added]


# ---------------------------------------------------------------------------------------------
# Turning the AOF on at runtime, and BGREWRITEAOF with it off (as Redis 7)


def persistence(r: redis.Redis) -> dict[str, Any]:
    return dict(r.info("persistence"))


def wait_for_rewrite(r: redis.Redis, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        info = persistence(r)
        if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
            return info
        assert time.monotonic() < deadline, info
        time.sleep(0.05)


def manifest_kinds(node: Node) -> list[str]:
    return [line.split()[-1] for line in node.manifest.read_text().splitlines() if line]


@pytest.mark.parametrize("wait", [False, True])
def test_config_set_appendonly_yes_then_kill9_keeps_every_acknowledged_write(
    tmp_path: Path, nodes: Any, wait: bool
) -> None:
    """The rewrite starts inside CONFIG SET (INFO says so at once, BGREWRITEAOF is refused
    as in progress); writes made meanwhile are acknowledged only once the new base and incr
    are in the manifest, so kill -9 at any moment after their replies loses none of them."""
    node = nodes(tmp_path, "--appendonly", "no", "--save", "")
    node.start()
    r = node.client()
    pipe = r.pipeline(transaction=False)
    for i in range(20_000):
        pipe.xadd(KEY, {"n": i})
    acked = list(pipe.execute())
    pipe = r.pipeline(transaction=False)
    pipe.config_set("appendonly", "yes")
    pipe.info("persistence")
    pipe.bgrewriteaof()
    switched, info, refused = pipe.execute(raise_on_error=False)
    assert switched is True
    assert info["aof_enabled"] == 1 and info["aof_rewrite_in_progress"] == 1, info
    assert str(refused) == "Background append only file rewriting already in progress"
    acked += [r.xadd(KEY, {"n": "after"}) for _ in range(5)]
    if wait:
        assert wait_for_rewrite(r)["aof_last_bgrewrite_status"] == "ok"
        assert manifest_kinds(node) == ["b", "i"]
        acked.append(r.xadd(KEY, {"n": "later"}))
    node.kill()
    node.start("--appendonly", "yes")
    assert xrange_ids(node) == acked, node.log_tail()


def test_bgrewriteaof_with_the_aof_off_writes_a_loadable_base(tmp_path: Path, nodes: Any) -> None:
    """BGREWRITEAOF with appendonly no writes a base and a manifest naming it alone; a server
    started on it with appendonly yes loads it and logs from there."""
    node = nodes(tmp_path, "--appendonly", "no", "--save", "")
    node.start()
    r = node.client()
    acked = [r.xadd(KEY, {"n": i}) for i in range(100)]
    r.xgroup_create(KEY, GROUP, id="0")
    r.xreadgroup(GROUP, CONSUMER, {KEY: ">"}, count=10)
    assert r.bgrewriteaof() is True
    info = wait_for_rewrite(r)
    assert info["aof_enabled"] == 0 and info["aof_last_bgrewrite_status"] == "ok", info
    assert manifest_kinds(node) == ["b"]
    node.kill()
    node.start("--appendonly", "yes")
    r = node.client()
    assert [sid for sid, _ in r.xrange(KEY)] == acked
    assert r.xinfo_groups(KEY)[0]["pending"] == 10
    acked.append(r.xadd(KEY, {"n": "after"}))
    assert manifest_kinds(node) == ["b", "i"]
    node.kill()
    node.start("--appendonly", "yes")
    assert xrange_ids(node) == acked, node.log_tail()


def test_appendonly_no_during_the_enabling_rewrite_kills_it_and_cleans_up(
    tmp_path: Path, nodes: Any
) -> None:
    node = nodes(tmp_path, "--appendonly", "no", "--save", "")
    node.start()
    r = node.client()
    pipe = r.pipeline(transaction=False)
    for i in range(20_000):
        pipe.xadd(KEY, {"n": i})
    pipe.execute()
    pipe = r.pipeline(transaction=False)
    pipe.config_set("appendonly", "yes")
    pipe.config_set("appendonly", "no")
    pipe.info("persistence")
    *_, info = pipe.execute()
    assert info["aof_enabled"] == 0 and info["aof_rewrite_in_progress"] == 0, info
    assert r.xadd(KEY, {"n": "after"})  # answered at once: no AOF to wait for
    leftovers = sorted(p.name for p in (node.dir / AOF_DIR).iterdir())
    assert leftovers == [], leftovers
    assert "Killed the AOF rewrite child" in node.last_log()


@pytest.mark.parametrize("save", ["", "3600 1"])
def test_flushall_stops_a_background_save(tmp_path: Path, nodes: Any, save: str) -> None:
    """FLUSHALL stops a BGSAVE in progress, save rules or not (Redis's killRDBChild): the
    snapshot it was writing holds the flushed keys. ``rdb-key-save-delay`` (Redis's hidden
    test hook, microseconds a key) keeps the save running meanwhile."""
    node = nodes(tmp_path, "--appendonly", "no", "--save", save)
    node.start()
    r = node.client()
    r.set("k", "v")
    r.config_set("rdb-key-save-delay", "10000000")
    r.bgsave()
    time.sleep(0.5)
    assert r.info("persistence")["rdb_bgsave_in_progress"] == 1
    r.config_set("rdb-key-save-delay", "0")
    r.flushall()
    assert r.info("persistence")["rdb_bgsave_in_progress"] == 0
    assert r.dbsize() == 0
    r.set("after", "1")
    assert r.save()
    node.kill()
    node.start()
    assert node.client().keys() == [b"after"]
