"""The network side: asyncio transport, connection handling, startup and options."""
