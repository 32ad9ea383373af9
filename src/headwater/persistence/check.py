"""``headwater check-aof [--fix] FILE``: is an AOF file loadable, and if not, where it breaks.

Like ``redis-check-aof``: it reads every command, tracks MULTI/EXEC, and reports the offset up
to which the file is good. ``--fix`` truncates the file there (a torn tail, an unfinished
transaction, or garbage: everything from the first bad byte on is lost, so keep a copy).
Its progress goes to standard error: a bar on a terminal, a line every few seconds otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from headwater.persistence.aof import CorruptAof, TornTail, read_commands
from headwater.persistence.meter import Meter

#: bytes between two progress reports
REPORT_STEP = 1 << 20


def analyze(path: Path, progress: Callable[[int], None] | None = None) -> tuple[int, str | None]:
    """(offset up to which the file is good, what is wrong after it or None); ``progress``
    is told the offset reached, every megabyte or so."""
    good = 0
    multi_at: int | None = None
    next_report = 0 if progress is not None else 1 << 62
    try:
        for argv, end in read_commands(path):
            if end >= next_report and progress is not None:
                progress(end)
                next_report = end + REPORT_STEP
            name = argv[0].upper()
            if name == b"MULTI":
                if multi_at is not None:
                    return multi_at, "nested MULTI"
                multi_at = good
            elif name in (b"EXEC", b"DISCARD"):
                if multi_at is None:
                    return good, f"{name.decode()} without MULTI"
                multi_at = None
            good = end
    except TornTail as torn:
        return (multi_at if multi_at is not None else torn.offset), "truncated command"
    except CorruptAof as bad:
        return (multi_at if multi_at is not None else bad.offset), str(bad)
    if multi_at is not None:
        return multi_at, "MULTI without EXEC at the end"
    return good, None


def check_aof(
    path: Path, fix: bool, progress: Callable[[int], None] | None = None
) -> tuple[bool, str]:
    size = path.stat().st_size
    good, problem = analyze(path, progress)
    report = f"AOF analyzed: filename={path}, size={size}, ok_up_to={good}, diff={size - good}"
    if problem is None:
        return True, f"{report}\nAOF {path} is valid"
    report += f"\nProblem at offset {good}: {problem}"
    if not fix:
        return False, f"{report}\nAOF {path} is not valid. Use the --fix option to try fixing it."
    os.truncate(path, good)
    return True, f"{report}\nSuccessfully truncated AOF {path} to {good} bytes"


def main(args: list[str]) -> int:
    if args in (["-h"], ["--help"]):
        print("usage: headwater check-aof [--fix] <file.aof>")
        return 0
    fix = "--fix" in args
    files = [a for a in args if a != "--fix"]
    if len(files) != 1 or any(a.startswith("--") for a in files):
        print("usage: headwater check-aof [--fix] <file.aof>")
        return 1
    path = Path(files[0])
    if not path.is_file():
        print(f"Cannot open file {path}")
        return 1
    meter = Meter(path.name, path.stat().st_size)
    ok, report = check_aof(path, fix, meter.update)
    if ok:
        meter.update(meter.progress.total)
    meter.finish()
    print(report)
    return 0 if ok else 1
