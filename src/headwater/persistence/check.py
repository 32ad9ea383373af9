"""``headwater check-aof [--fix] FILE``: is an AOF loadable, and if not, where it breaks.

FILE is one AOF file, or the manifest of a multi-part AOF (``appendonly.aof.manifest``), as
Redis 7's redis-check-aof takes: then every file it names is checked in order (a snapshot
base as check-snapshot would), up to the first bad one, and ``--fix`` may only cut the last
incremental file (an earlier one cut would leave a hole in the history).


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
from headwater.persistence.manifest import ManifestError, load_manifest
from headwater.persistence.meter import Meter
from headwater.persistence.snapshot import check_snapshot

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


def check_manifest(
    path: Path, fix: bool, progress: Callable[[int], None] | None = None
) -> tuple[bool, str]:
    """Every file of a multi-part AOF, in order, up to the first bad one."""
    try:
        manifest = load_manifest(path)
    except (ManifestError, OSError) as exc:
        return False, f"Bad AOF manifest {path}: {exc}"
    files = ([manifest.base] if manifest.base else []) + manifest.incrs
    reports = [f"Checking the multi-part AOF of {path}: {len(files)} files"]
    done = 0
    for n, entry in enumerate(files):
        file = path.parent / entry.name
        at = done
        part = (lambda offset, at=at: progress(at + offset)) if progress is not None else None
        if entry.kind == "b" and not entry.name.endswith(".aof"):
            ok, report = check_snapshot(file, part)
        else:
            ok, report = check_aof(file, fix and n == len(files) - 1, part)
        reports.append(report)
        done += file.stat().st_size
        if not ok:
            if fix and n < len(files) - 1:
                reports.append(f"{file} is not the last file: only the last one can be fixed")
            return False, "\n".join(reports)
    reports.append("All AOF files and the manifest are valid")
    return True, "\n".join(reports)


def _size_of(path: Path) -> int:
    """The bytes to check: the manifest's files, or the file itself."""
    if not _is_manifest(path):
        return path.stat().st_size
    try:
        manifest = load_manifest(path)
    except (ManifestError, OSError):
        return 0
    files = ([manifest.base] if manifest.base else []) + manifest.incrs
    return sum((path.parent / entry.name).stat().st_size for entry in files)


def _is_manifest(path: Path) -> bool:
    with open(path, "rb") as f:
        return path.name.endswith(".manifest") or f.read(5) == b"file "


def main(args: list[str]) -> int:
    if args in (["-h"], ["--help"]):
        print("usage: headwater check-aof [--fix] <file.aof or appendonly.aof.manifest>")
        return 0
    fix = "--fix" in args
    files = [a for a in args if a != "--fix"]
    if len(files) != 1 or any(a.startswith("--") for a in files):
        print("usage: headwater check-aof [--fix] <file.aof or appendonly.aof.manifest>")
        return 1
    path = Path(files[0])
    if not path.is_file():
        print(f"Cannot open file {path}")
        return 1
    meter = Meter(path.name, _size_of(path))
    check = check_manifest if _is_manifest(path) else check_aof
    ok, report = check(path, fix, meter.update)
    if ok:
        meter.update(meter.progress.total)
    meter.finish()
    print(report)
    return 0 if ok else 1
