"""Pure stream structures: IDs, packed nodes, the stream itself (and, later, groups and
idempotency). Nothing here knows about RESP, sockets or files; time comes in as arguments."""
