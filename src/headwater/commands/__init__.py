"""Command families. Each module ends with a ``SPECS`` tuple; ``table`` merges them."""
