"""The engine: routes argv to handlers, runs transactions, parks and wakes blocked clients,
and hands every state change, as a deterministic effect, to ``propagate``."""

from headwater.engine.core import Engine, Scheduler

__all__ = ["Engine", "Scheduler"]
