"""The AOF manifest: which files make up the append-only log, as Redis 7+ lays them out.

``<dir>/<appenddirname>/<appendfilename>.manifest`` has one line per file::

    file appendonly.aof.1.base.rdb seq 1 type b
    file appendonly.aof.1.incr.aof seq 1 type i
    file appendonly.aof.2.incr.aof seq 2 type i

``b`` is the base (a snapshot or an AOF), at most one; ``i`` are incremental AOF files applied
in order after it; ``h`` (history) files are left over from a rewrite and ignored. The manifest
is replaced atomically (write a temporary file, fsync, rename, fsync the directory), so a crash
leaves either the old or the new one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


class ManifestError(ValueError):
    """The manifest cannot be read, or names a file that is missing."""


@dataclass
class ManifestEntry:
    name: str
    seq: int
    kind: str  # "b", "i" or "h"

    def line(self) -> str:
        return f"file {self.name} seq {self.seq} type {self.kind}\n"


@dataclass
class Manifest:
    entries: list[ManifestEntry] = field(default_factory=list)

    @property
    def base(self) -> ManifestEntry | None:
        return next((e for e in self.entries if e.kind == "b"), None)

    @property
    def incrs(self) -> list[ManifestEntry]:
        return [e for e in self.entries if e.kind == "i"]

    def next_incr_seq(self) -> int:
        return max((e.seq for e in self.incrs), default=0) + 1

    def render(self) -> str:
        return "".join(e.line() for e in self.entries if e.kind != "h")


def parse_manifest(text: str, origin: str = "manifest") -> Manifest:
    manifest = Manifest()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if len(words) % 2 or "file" not in words[0::2]:
            raise ManifestError(f"{origin}:{number}: invalid line {raw!r}")
        fields = dict(zip(words[0::2], words[1::2], strict=True))
        try:
            entry = ManifestEntry(fields["file"], int(fields["seq"]), fields["type"])
        except (KeyError, ValueError):
            raise ManifestError(f"{origin}:{number}: invalid line {raw!r}") from None
        if entry.kind not in ("b", "i", "h") or "/" in entry.name or entry.name in ("", ".", ".."):
            raise ManifestError(f"{origin}:{number}: invalid line {raw!r}")
        manifest.entries.append(entry)
    if sum(1 for e in manifest.entries if e.kind == "b") > 1:
        raise ManifestError(f"{origin}: more than one base file")
    return manifest


def load_manifest(path: Path) -> Manifest:
    try:
        text = path.read_text("utf-8")
    except UnicodeDecodeError:
        raise ManifestError(f"{path}: not a text file") from None
    manifest = parse_manifest(text, str(path))
    for entry in manifest.entries:
        if entry.kind != "h" and not (path.parent / entry.name).exists():
            raise ManifestError(f"{path}: names {entry.name}, which does not exist")
    return manifest


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Replace the manifest atomically and durably."""
    tmp = path.with_name(f"temp-{path.name}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(manifest.render())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
