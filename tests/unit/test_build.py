"""The build: INFO names it, and a compiled module never silently shadows newer source."""

from __future__ import annotations

import os
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from headwater import _build
from tests.unit.conftest import Harness


def _info_fields(text: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def test_info_server_reports_the_build_that_runs() -> None:
    """``make test`` says which build it expects (HEADWATER_EXPECT_BUILD): the compiled run
    must really run the extension modules, and the pure run must not."""
    h = Harness()
    fields = _info_fields(h.call(h.client(), "INFO", "server").decode())
    expected = os.environ.get("HEADWATER_EXPECT_BUILD") or _build.build_kind()
    assert fields["headwater_build"] == expected
    assert expected in ("compiled", "pure")


def test_build_kind_follows_the_hot_modules() -> None:
    compiled = {name: _build.is_compiled(name) for name in _build.HOT_MODULES}
    kind = _build.build_kind()
    assert all(compiled.values()) if kind == "compiled" else not any(compiled.values())
    assert not _build.is_compiled("headwater.commands.server")  # never compiled


def _touch(path: Path, mtime: float) -> None:
    path.write_bytes(b"")
    os.utime(path, (mtime, mtime))


def test_a_compiled_module_older_than_its_source_stops_the_import(tmp_path: Path) -> None:
    package = tmp_path / "headwater"
    (package / "resp").mkdir(parents=True)
    suffix = EXTENSION_SUFFIXES[0]
    _touch(package / "resp" / "parser.py", 2_000_000)
    _touch(package / "resp" / f"parser{suffix}", 1_000_000)  # compiled before the edit
    _touch(package / "resp" / "encoder.py", 1_000_000)
    _touch(package / "resp" / f"encoder{suffix}", 2_000_000)  # up to date
    assert _build.stale_extensions(str(package)) == [f"headwater/resp/parser{suffix}"]
    with pytest.raises(ImportError, match="make setup"):
        _build.check_fresh(str(package))
    _touch(package / "resp" / f"parser{suffix}", 3_000_000)  # recompiled
    _build.check_fresh(str(package))
    _touch(package / "_luabridge.c", 4_000_000)  # a C extension's source edited
    _touch(package / f"_luabridge{suffix}", 3_500_000)
    assert _build.stale_extensions(str(package)) == [f"headwater/_luabridge{suffix}"]


def test_the_installed_tree_has_no_stale_compiled_module() -> None:
    assert _build.stale_extensions() == []
