"""``Inbox.next_own`` against its definition: the own sequence moved on, the vector made from
``applied`` (sorted; ``RELATIVE`` when it follows, and ``last_own_vector`` then), and "follows"
when only the own sequence changed since the previous own effect, whatever remote effects
(from known and new regions) came in between. next_own skips the sort when nothing but the
own sequence moved; this checks it never says so wrongly."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.activeactive.envelope import RELATIVE, Effect, Vector, follows, make_vector
from headwater.activeactive.inbox import Inbox

ME = 2
#: an own effect (None), or one more remote effect of that origin (4 is not a peer at first)
_STEPS = st.lists(st.one_of(st.none(), st.sampled_from([1, 3, 4])), min_size=1, max_size=40)


@settings(max_examples=300)
@given(steps=_STEPS, peers=st.sampled_from([(), (1,), (1, 3)]))
def test_next_own_is_its_definition(steps: list[int | None], peers: tuple[int, ...]) -> None:
    inbox = Inbox(ME, [ME, *peers])
    prev: Vector | None = None
    for origin in steps:
        if origin is not None:
            seq = inbox.applied.get(origin, 0) + 1
            assert inbox.offer(Effect(origin, seq, ((origin, seq),), ())) != []
            continue
        expected_seq = inbox.applied[ME] + 1
        seq, vector, follow = inbox.next_own()
        expected = make_vector(inbox.applied)
        assert seq == expected_seq
        assert follow == (prev is not None and follows(expected, prev, ME))
        # (an effect that follows carries no vector: the compact line has none)
        assert vector == (RELATIVE if follow else expected)
        assert inbox.last_own_vector() == expected
        assert inbox.vectors[ME] == expected
        prev = expected
    inbox.check_invariants()
