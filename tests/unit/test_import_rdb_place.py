"""``import-rdb`` puts the file it checked in place: a hard link on the same file system,
else a copy of the bytes it checked (also when the path names another file by then)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from headwater.persistence import import_rdb


def _identity(path: Path) -> tuple[int, ...]:
    return import_rdb._identity(os.stat(path))


def test_the_checked_file_is_linked(tmp_path: Path) -> None:
    source = tmp_path / "dump.rdb"
    source.write_bytes(b"checked")
    target = tmp_path / "data" / "dump.hwsnap"
    target.parent.mkdir()
    import_rdb._place(source, _identity(source), target, b"checked")
    assert os.stat(target).st_ino == os.stat(source).st_ino
    assert sorted(p.name for p in target.parent.iterdir()) == ["dump.hwsnap"]


def test_without_a_link_the_bytes_checked_are_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "dump.rdb"
    source.write_bytes(b"checked")
    target = tmp_path / "dump.hwsnap"

    def no_link(src: object, dst: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_link)
    import_rdb._place(source, _identity(source), target, b"checked")
    assert target.read_bytes() == b"checked"
    assert os.stat(target).st_ino != os.stat(source).st_ino


def test_a_file_replaced_since_it_was_read_is_not_linked(tmp_path: Path) -> None:
    source = tmp_path / "dump.rdb"
    source.write_bytes(b"checked")
    identity = _identity(source)
    replacement = tmp_path / "new.rdb"
    replacement.write_bytes(b"unchecked, and longer")
    os.replace(replacement, source)  # (as Redis's BGSAVE replaces its dump.rdb)
    target = tmp_path / "dump.hwsnap"
    import_rdb._place(source, identity, target, b"checked")
    assert target.read_bytes() == b"checked"
    assert not list(tmp_path.glob("temp-import-*"))
