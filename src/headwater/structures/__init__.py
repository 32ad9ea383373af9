"""The pure data structures of the core types other than streams (sets first; lists and
sorted sets follow): no RESP, no I/O, invariants checked by ``check_invariants``."""
