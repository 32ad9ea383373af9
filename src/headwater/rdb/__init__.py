"""Redis's serialization format (RDB) as a pure codec: bytes in, bytes out, no I/O.

``crc64`` (checksums), ``lzf`` (string compression), ``encoding`` (lengths, strings, times),
``listpack``/``intset`` (read and write) and ``ziplist`` (read: older payloads), ``objects``
(every value type), ``streams`` (Headwater streams in Redis's stream format) and ``payload``
(DUMP/RESTORE framing). Used by DUMP/RESTORE and by ``headwater import-rdb``.
"""
