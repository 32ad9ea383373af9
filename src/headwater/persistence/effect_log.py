"""The AOF's buffer of effects not yet written, and the engine's effect sink that fills it.

Compiled by mypyc (``_build.HOT_MODULES``): with the AOF on, ``EffectLog.append`` runs once
per effect, on every write command's path.
"""

from __future__ import annotations

from headwater.ops.change import NO_DB, ForReplicas, Line
from headwater.resp.encoder import encode_command, encode_command_into


class EffectLog:
    """Effects as RESP commands, with a ``SELECT`` before each change of database (none
    before an effect of ``NO_DB``: a MULTI or an EXEC)."""

    def __init__(self, for_replicas: bool = False) -> None:
        self.buf = bytearray()
        #: the database the file's next command applies to (None: unknown)
        self.db: int | None = None
        #: the replication stream's log takes the effects for the replicas only; the AOF's
        #: does not
        self.for_replicas = for_replicas

    def append(self, db: int, argv: Line) -> None:
        words: list[bytes] | bytes
        if isinstance(argv, ForReplicas):
            if not self.for_replicas:
                return
            words = argv.argv
        else:
            words = argv
        buf = self.buf
        if db != self.db and db != NO_DB:
            buf += encode_command([b"SELECT", b"%d" % db])
            self.db = db
        if isinstance(words, bytes):  # (encoded already: a region's own effect)
            buf += words
        else:
            encode_command_into(buf, words)
