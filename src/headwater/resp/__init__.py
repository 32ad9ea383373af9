"""Sans-IO RESP: a request parser (hiredis fast path, exact Redis semantics on the slow path)
and a reply encoder for RESP2 and RESP3. Nothing here touches sockets or the event loop."""
