"""Redis Cluster (Redis 7.0 semantics): hash slots, the node table, and routing.

The package is pure: it holds the cluster's state as one node sees it and decides where a
command belongs; the engine asks it before running a command with keys (its one gate), the
CLUSTER commands read and change it, and the server's bus (later) feeds it what peers say.
Time comes from the caller (``now_ms`` arguments), randomness from an injected source.
"""
