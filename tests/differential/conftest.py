from __future__ import annotations

import pytest

from tests.helpers import redis_available


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "differential" in str(item.fspath):
            item.add_marker(pytest.mark.redis)
            if not redis_available():
                item.add_marker(pytest.mark.skip(reason="redis-server not installed"))
