"""Operations: each write rule once, on the structures of ``stream/`` and ``keyspace``, with
its arguments already parsed. Command handlers, AOF replay and (next) the replica link call
the same operations; each returns what it changed as a ``Change`` (see ``ops.change``)."""
