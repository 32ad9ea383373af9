"""Optional compiled build: the hot modules through mypyc, from the same Python source.

``pyproject.toml`` holds all the metadata; this file only adds extension modules, and only
when asked (``HEADWATER_COMPILE=1``, as ``make setup`` does for ``build_ext --inplace``), so a
plain ``pip install`` always gives the pure package, which works the same, only slower.
Which modules: ``HOT_MODULES`` in ``src/headwater/_build.py`` (read without importing the
package, whose ``__init__`` refuses stale compiled modules).
"""

from __future__ import annotations

import os
import runpy

from setuptools import setup


def hot_sources() -> list[str]:
    build = runpy.run_path(os.path.join("src", "headwater", "_build.py"))
    return [os.path.join("src", *name.split(".")) + ".py" for name in build["HOT_MODULES"]]


def ext_modules() -> list[object]:
    if os.environ.get("HEADWATER_COMPILE") != "1" or os.environ.get("HEADWATER_PURE") == "1":
        return []
    from mypyc.build import mypycify
    from setuptools import Extension

    # the C crossings between Python and Lua (``scripting/runtime.py`` runs without it)
    bridge = Extension("headwater._luabridge", [os.path.join("src", "headwater", "_luabridge.c")])
    # a sorted set's bisections over its chunks' doubles (``structures/zsets.py`` runs
    # without it)
    zsearch = Extension(
        "headwater.structures._zsearch",
        [os.path.join("src", "headwater", "structures", "_zsearch.c")],
    )
    # Redis's CRC-64 over whole RDB files (``rdb/crc64.py`` runs without it)
    crc = Extension("headwater.rdb._crc64", [os.path.join("src", "headwater", "rdb", "_crc64.c")])
    # effects encoded into the AOF's and the stream's buffers (``resp/encoder.py`` runs
    # without it)
    encode = Extension(
        "headwater.resp._encode", [os.path.join("src", "headwater", "resp", "_encode.c")]
    )
    # a snapshot's length-prefixed fields split in one call (``persistence/snapshot.py`` runs
    # without it)
    blobs = Extension(
        "headwater.persistence._blobs",
        [os.path.join("src", "headwater", "persistence", "_blobs.c")],
    )
    # a stream node's runs of entries packed in one call (``stream/node.py`` runs without it)
    pack = Extension(
        "headwater.stream._pack", [os.path.join("src", "headwater", "stream", "_pack.c")]
    )
    # listpacks, stream listpacks and LZF decoded in one call each (import-rdb, RESTORE;
    # ``rdb/listpack.py``, ``rdb/streams.py`` and ``rdb/lzf.py`` run without it)
    listpacks = Extension(
        "headwater.rdb._listpack", [os.path.join("src", "headwater", "rdb", "_listpack.c")]
    )
    # a replica's stream split into commands, sized as they go (``resp/split.py`` uses
    # hiredis without it)
    split = Extension(
        "headwater.resp._split", [os.path.join("src", "headwater", "resp", "_split.c")]
    )
    # a Spark executor's XRANGE pages split into Arrow buffers in one call (``spark/pages.py``
    # uses hiredis without it)
    pages = Extension(
        "headwater.spark._pages", [os.path.join("src", "headwater", "spark", "_pages.c")]
    )
    # one extension per module (``separate``): build_ext -j compiles them side by side, where
    # one group's single 60 MB C file took a core 8 minutes (calls between modules stay
    # native, through mypyc's exported tables)
    hot = mypycify(hot_sources(), separate=True)
    return [*hot, bridge, zsearch, crc, encode, blobs, pack, listpacks, split, pages]


setup(ext_modules=ext_modules())
