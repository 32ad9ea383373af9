"""Durability: the append-only log, its manifest, snapshots (see ARCHITECTURE.md)."""
