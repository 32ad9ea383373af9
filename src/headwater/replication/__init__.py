"""Primary/replica replication: the pure parts (the backlog, replication IDs and offsets, the
PSYNC decision). The sockets, the snapshot transfer and the replica's link live in the server
layer (server/replication.py, server/replica_link.py), as persistence/ has its files and
server/ its loop."""
