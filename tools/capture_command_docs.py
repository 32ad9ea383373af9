"""Capture COMMAND INFO and COMMAND DOCS for the commands Headwater serves from a running Redis.

Usage: python tools/capture_command_docs.py [--port 6379] > src/headwater/commands/command_docs.json

The replies are read as RESP3 and stored as a typed tree, so that Headwater can replay them
byte-for-byte in both RESP2 and RESP3:
  {"m": [[k, v], ...]} map   {"s": [...]} set   {"a": [...]} array
  {"b": "..."} bulk          {"+": "..."} simple string   int   null
Only the commands named in Headwater's command table are kept; subcommands Headwater does not
implement are dropped from the containers. Entries for commands newer than the Redis at hand
(streams 7.2+) are written by hand in ``command_docs_extra.json``.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from typing import Any

sys.path.insert(0, "src")

from headwater.engine.core import Engine


def read_reply(f: Any) -> Any:
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return {"b": data.decode()}
    if kind == b"+":
        return {"+": rest.decode()}
    if kind == b":":
        return int(rest)
    if kind == b"_":
        return None
    if kind in (b"*", b"~"):
        items = [read_reply(f) for _ in range(int(rest))]
        return {"a" if kind == b"*" else "s": items}
    if kind == b"%":
        n = int(rest)
        return {"m": [[read_reply(f), read_reply(f)] for _ in range(n)]}
    if kind == b"-":
        raise RuntimeError(rest.decode())
    raise RuntimeError(f"unexpected reply type {kind!r}")


def command(f: Any, sock: socket.socket, *args: str) -> Any:
    payload = b"*%d\r\n" % len(args) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args
    )
    sock.sendall(payload)
    return read_reply(f)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=6379)
    opts = parser.parse_args()
    sock = socket.create_connection(("127.0.0.1", opts.port))
    f = sock.makefile("rb")
    command(f, sock, "HELLO", "3")
    table = Engine().table  # the families' rows and the scripting ones the engine adds
    out: dict[str, Any] = {}
    for name, row in sorted(table.items()):
        lname = name.decode().lower()
        info = command(f, sock, "COMMAND", "INFO", lname)["a"][0]
        docs_map = command(f, sock, "COMMAND", "DOCS", lname)["m"]
        if info is None or not docs_map:
            continue
        docs = docs_map[0][1]
        keep = {f"{lname}|{sub.decode()}" for sub in row.subcommands}
        if keep:
            info = _filter_info_subcommands(info, keep)
            docs = _filter_docs_subcommands(docs, keep)
        out[lname] = {"info": info, "docs": docs}
    json.dump(out, sys.stdout, indent=None, sort_keys=True)
    sys.stdout.write("\n")


def _filter_info_subcommands(info: Any, keep: set[str]) -> Any:
    subs = info["a"][9]["a"]
    info["a"][9]["a"] = [s for s in subs if s["a"][0]["b"] in keep]
    return info


def _filter_docs_subcommands(docs: Any, keep: set[str]) -> Any:
    for pair in docs["m"]:
        if pair[0]["b"] == "subcommands":
            pair[1]["m"] = [p for p in pair[1]["m"] if p[0]["b"] in keep]
    return docs


if __name__ == "__main__":
    main()
