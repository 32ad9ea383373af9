"""Which build runs: the hot modules compiled by mypyc, or the pure Python source.

The Python source is the only source. ``make setup`` compiles ``HOT_MODULES`` in place (an
extension module next to each ``.py``, see ``setup.py``); Python's import system then prefers
the extension. So that an edited ``.py`` is never shadowed by an older compiled copy without
anyone noticing, ``headwater/__init__.py`` calls ``check_fresh()`` before any other module is
imported: a compiled module older than its source stops the import with what to do.
"""

from __future__ import annotations

import importlib.util
import os
from importlib.machinery import EXTENSION_SUFFIXES

#: The per-command path (RESP codec, protocol, dispatch, argument parsing, the stream, group,
#: IDMP and string commands, entry encoders, the write operations and their changes) and the
#: stream structures, measured with the in-process rows of ``benchmarks/bench.py --rows
#: inproc``, and the keyspace and clock every command reads; an active-active region's XADD
#: path (``activeactive`` without persist/journal, ``region_keyspace``, ``region_store``:
#: ``benchmarks/activeactive_inproc.py``). Not compiled: ``values.py`` and ``resp/types.py``
#: (subclasses of bytes, str and dict, which mypyc's native classes cannot be).
HOT_MODULES = (
    "headwater.clock",
    "headwater.keyspace",
    "headwater.resp.parser",
    "headwater.resp.encoder",
    "headwater.server.protocol",
    "headwater.server.querybuf",
    "headwater.engine.core",
    "headwater.engine.replay",
    "headwater.stream.ids",
    "headwater.stream.sortedkeys",
    "headwater.stream.node",
    "headwater.stream.stream",
    "headwater.stream.groups",
    "headwater.stream.idmp",
    "headwater.commands.entries",
    "headwater.commands.idmp",
    "headwater.commands.streams",
    "headwater.commands.groups",
    "headwater.commands.tracking",
    "headwater.engine.eviction",
    "headwater.ops.memory",
    "headwater.commands.args",
    # cluster mode's gate runs for every command with keys (one key: its slot, one owner)
    "headwater.cluster.slots",
    "headwater.commands.cluster_gate",
    "headwater.commands.context",
    "headwater.commands.gate",
    "headwater.commands.strings",
    "headwater.commands.hashes",
    "headwater.structures.fieldttl",
    "headwater.commands.notify",
    "headwater.commands.pops",
    "headwater.commands.sets",
    "headwater.structures.sets",
    "headwater.commands.zsets",
    "headwater.structures.zsets",
    "headwater.commands.lists",
    "headwater.structures.lists",
    # geo searches decode and measure each candidate: 20 km radius searches among 100k points
    # (commands.geo.search), 269 -> 724 a second compiled (2 loaded cores)
    "headwater.structures.geohash",
    "headwater.commands.geo",
    # HyperLogLog's sparse opcode walks and register loops: PFADD of one element to a 1.5 KB
    # sparse value 450 -> 51 us, to a dense one 18 -> 9 us (this module alone compiled)
    "headwater.structures.hll",
    "headwater.ops.change",
    "headwater.ops.streams",
    "headwater.ops.groups",
    "headwater.persistence.effect_log",
    "headwater.scripting.convert",
    "headwater.scripting.runtime",
    "headwater.scripting.commands",
    "headwater.scripting.function_commands",
    # (FCALL reads a Function's attributes on every call: native, not a dict each)
    "headwater.scripting.functions",
    # the RDB codec's byte loops (DUMP/RESTORE of big values, import-rdb): LZF compression of
    # 2 MB 0.32 -> 0.04 s compiled; DUMP of a 1M-entry stream 28 -> 11 s (loaded machine)
    "headwater.rdb.crc64",
    "headwater.rdb.lzf",
    "headwater.rdb.listpack",
    "headwater.rdb.encoding",
    # the decoders of RDB objects (import-rdb, RESTORE): import-rdb of a 5M-element RDB,
    # its records' decoding 44 -> 22 s with these two and the C CRC-64 (a loaded machine)
    "headwater.rdb.objects",
    "headwater.rdb.streams",
    "headwater.rdb.intset",
    "headwater.rdb.ziplist",
    # a Redis RDB file's per-key path (250,000 small keys in the import-rdb row, converted at
    # the server's start): the file's record loop, the conversion to keyspace values, the
    # insertion into the keyspace
    "headwater.rdb.rdbfile",
    "headwater.ops.dump",
    "headwater.persistence.rdb_load",
    "headwater.persistence.import_rdb",
    # a snapshot's record readers: the load of the import-rdb row's snapshot (250,000 small
    # keys beside big ones) was mostly these per-record calls in the interpreter
    "headwater.persistence.snapshot_records",
    # and its writer (the same keys' records: import-rdb's snapshot, BGSAVE, a full sync)
    "headwater.persistence.snapshot_write",
    # Redis's RDB for a Redis replica's full sync and export-rdb (the same keys, key by key)
    "headwater.persistence.rdb_write",
    "headwater.activeactive.envelope",
    "headwater.activeactive.apply",
    "headwater.activeactive.inbox",
    "headwater.activeactive.idmode",
    "headwater.activeactive.rstream",
    "headwater.activeactive.region",
    "headwater.commands.region_keyspace",
    "headwater.commands.region_store",
    "headwater.commands.store",
    "headwater.commands.plain_store",
    # every call records its duration in its command's histogram (LATENCY HISTOGRAM)
    "headwater.commands.latency",
    # the links of a region: per chunk read (parse, from_line, the inbox) and per loop turn
    # (the feeds); it imports ``server.protocol`` for real (see its import of ``Connection``)
    "headwater.server.aa_links",
)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def is_compiled(module: str) -> bool:
    """The module imports from an extension module (mypyc's output), not from its ``.py``."""
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    return origin is not None and origin.endswith(tuple(EXTENSION_SUFFIXES))


def build_kind() -> str:
    """``compiled`` when every hot module is an extension module, ``pure`` when none is
    (``mixed`` would mean a broken build: ``make setup`` compiles all of them or none)."""
    compiled = [is_compiled(name) for name in HOT_MODULES]
    return "compiled" if all(compiled) else "pure" if not any(compiled) else "mixed"


def stale_extensions(package_dir: str = _PACKAGE_DIR) -> list[str]:
    """Extension modules in the package older than the ``.py`` (or ``.c``) they were
    compiled from."""
    stale: list[str] = []
    for folder, _, names in os.walk(package_dir):
        for name in names:
            suffix = next((s for s in EXTENSION_SUFFIXES if name.endswith(s)), None)
            if suffix is None:
                continue
            compiled = os.path.join(folder, name)
            built = os.stat(compiled).st_mtime
            sources = (compiled[: -len(suffix)] + ext for ext in (".py", ".c"))
            if any(os.path.exists(s) and os.stat(s).st_mtime > built for s in sources):
                stale.append(os.path.relpath(compiled, os.path.dirname(package_dir)))
    return sorted(stale)


def check_fresh(package_dir: str = _PACKAGE_DIR) -> None:
    """Refuse to run compiled code older than its source (module doc)."""
    stale = stale_extensions(package_dir)
    if stale:
        raise ImportError(
            "headwater: compiled modules older than their source: "
            + ", ".join(stale)
            + ". Run `make setup` to recompile them, or delete them to run the pure source."
        )
