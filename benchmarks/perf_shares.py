"""Where a server's CPU goes, by part of the request path, from a ``perf script`` dump.

    perf record --call-graph=dwarf,16384 -F 1000 -p <headwater pid> -o out.data -- sleep 4
    perf script -i out.data > out.txt
    .venv/bin/python benchmarks/perf_shares.py out.txt cmd_xadd

Needs the compiled build (mypyc's C symbols name the functions: ``CPyDef_<module>___<name>``).
Each sample is counted once, in the first part of the list below whose function is on its
stack, so the handler is taken out of the dispatch around it, and so on.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

#: (part, the functions that put a sample in it), in order of precedence
PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("engine dispatch (execute, call, reply encoding)", ("CPyDef_core___Engine___execute",)),
    (
        "request parser",
        ("CPyDef_parser___RequestParser___next", "CPyDef_parser___RequestParser___feed"),
    ),
    ("transport Python (data_received, process)", ("Connection___data_received",)),
    ("reply writes (uvloop's write and the kernel's)", ("UVStream_write", "__GI___libc_write")),
    ("per-turn flush Python (Server.flush, persist)", ("Handle__run",)),
    ("kernel read", ("__GI___libc_read", "__libc_recv")),
    ("event loop (epoll, uvloop)", ("uv__io_poll", "uv_run")),
]


def stacks(path: str) -> Iterator[set[str]]:
    """The set of function names on each sample's stack."""
    frames: set[str] = set()
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                if frames:
                    yield frames
                frames = set()
            elif line[0] in " \t":
                parts = line.split(None, 2)
                if len(parts) >= 2:
                    frames.add(parts[1].split("+")[0])
    if frames:
        yield frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", help="output of `perf script`")
    parser.add_argument("handler", help="the command handler's name, e.g. cmd_xadd")
    args = parser.parse_args()
    parts = [("the handler " + args.handler, ("___" + args.handler,)), *PARTS]
    counts = dict.fromkeys([name for name, _ in parts] + ["other"], 0)
    total = 0
    for frames in stacks(args.dump):
        total += 1
        name = next(
            (n for n, marks in parts if any(m in f for f in frames for m in marks)), "other"
        )
        counts[name] += 1
    print("| share | where |\n|---:|---|")
    for name, count in counts.items():
        print(f"| {100 * count / max(total, 1):.1f}% | {name} |")


if __name__ == "__main__":
    main()
