"""Headwater: a unified-log server that speaks the Redis protocol."""

from headwater._build import check_fresh

__version__ = "0.1.0"
#: The Redis release whose semantics Headwater follows; reported as ``redis_version``.
REDIS_COMPAT_VERSION = "8.10.0"

check_fresh()  # before any compiled module can be imported (headwater/_build.py)
