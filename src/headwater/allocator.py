"""Giving freed memory back to the system (MEMORY PURGE).

Headwater runs on glibc's malloc (and CPython's pymalloc for small objects). Memory a peak
used and the program freed stays with the process while a live block sits above it in the
heap; glibc's ``malloc_trim(0)`` walks the heap and returns every free page to the kernel
(``madvise``), wherever it is. Redis's MEMORY PURGE asks jemalloc to purge its dirty pages;
this is the same request to the allocator Headwater has. The collector runs first, so that
cycles freed since its last pass are returned too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable

_trim: Callable[[int], int] | None = None
_name = ctypes.util.find_library("c")
if _name is not None:
    try:
        _trim = ctypes.CDLL(_name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim with
        _trim = None


def release_free_memory() -> bool:
    """Collect garbage, then return the allocator's free pages; False when the C library
    has no way to (the collection still ran)."""
    gc.collect()
    if _trim is None:
        return False
    _trim(0)
    return True
