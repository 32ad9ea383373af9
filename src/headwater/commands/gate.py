"""The line between a client's transport and the engine: its reply gate.

Theory of operation
-------------------
The engine runs a client's commands and encodes the replies into ``client.out``; the transport
sends them. Between the two, one ``ReplyGate`` per client (made with the ``Client``, never
attached later) holds everything that decides whether the client's commands may run and its
replies may leave:

* ``blocked``: the ``Waiter`` while the client waits on keys (XREAD BLOCK …); the engine sets
  and clears it, the transport runs none of the client's pipelined commands meanwhile.
* ``paused``: the transport's flow control paused writing (the client does not read its
  replies), so the transport runs none of its commands either.
* ``may_reply(c)``: whether its replies may leave now; the transport asks the policy it gave
  at construction (the durability policy: with the AOF on, a reply waits until what the
  client wrote, or may have read, is on disk).
* ``resume()``: the engine ended a wait (served, timed out, unblocked); the transport then
  runs what the client pipelined meanwhile, in a later loop callback.
* ``run_pipelined()``: the same, now (the end of a CLIENT PAUSE releases each held client's
  command and then its pipeline before the next client's, as Redis does).

A client without a transport (AOF replay, tests) gets the default gate: replies may always
leave and resuming does nothing. WAIT, WAITAOF and a replica's link are further conditions of
the same gate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from headwater.commands.context import Client

#: Decides whether a client's replies may leave now (``Durability.may_reply``).
ReplyPolicy = Callable[["Client"], bool]


def always_reply(c: Client) -> bool:
    """The policy of a client no durability rule holds back."""
    return True


def no_resume() -> None:
    """What resuming does for a client without a transport."""


def no_input() -> int:
    """The query buffer of a client without a transport: empty."""
    return 0


class ReplyGate:
    """Whether a client's commands may run and its replies may leave (see the module doc)."""

    def __init__(
        self,
        policy: ReplyPolicy = always_reply,
        on_resume: Callable[[], None] = no_resume,
        on_run: Callable[[], None] = no_resume,
        buffered: Callable[[], int] = no_input,
    ) -> None:
        #: the engine's ``Waiter`` while the client waits on keys, else None
        self.blocked: Any = None
        #: the transport's flow control stopped writing to the client
        self.paused = False
        self._policy = policy
        self._on_resume = on_resume
        self._on_run = on_run
        self._buffered = buffered

    def may_reply(self, c: Client) -> bool:
        """Whether ``c``'s replies may leave now (``c`` is the client holding this gate)."""
        return self._policy(c)

    def resume(self) -> None:
        """The engine ended the client's wait: the transport runs what it pipelined since."""
        self._on_resume()

    def query_buffered(self) -> int:
        """Bytes the transport received from the client and has not run yet (CLIENT LIST's
        ``qbuf``)."""
        return self._buffered()

    def run_pipelined(self) -> None:
        """The engine released the client from a pause: the transport runs what it pipelined
        since, now."""
        self._on_run()
