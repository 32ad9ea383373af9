"""Headwater: a unified-log server that speaks the Redis protocol."""

__version__ = "0.1.0"
#: The Redis release whose semantics Headwater follows; reported as ``redis_version``.
REDIS_COMPAT_VERSION = "8.10.0"
