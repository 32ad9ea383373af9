"""The C loops of the RDB codec (``_listpack.c``, the compiled build): each module of the
codec takes its functions from here and runs its own Python loop without them (the pure
build). The C code executes what the Python decides; tests check that both give the same
bytes, and that C gives no answer where Python refuses with a reason."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


def _module() -> ModuleType | None:
    try:
        return importlib.import_module("headwater.rdb._listpack")
    except ImportError:
        return None


_LOOPS = _module()


def loop(name: str) -> Any:
    """The C function ``name`` of ``_listpack.c``, or None when it is not built (the caller
    casts it to its signature)."""
    return None if _LOOPS is None else getattr(_LOOPS, name)
