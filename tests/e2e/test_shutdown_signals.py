"""A second SIGINT during the shutdown's save exits at once with status 1 and leaves no
temporary snapshot behind (Redis: "You insist... exiting now.", rdbRemoveTempFile).
(The signals during a busy script: tests/differential/test_busy_scripts.py.)"""

from __future__ import annotations

import glob
import os
import signal
import time

import pytest

from tests.helpers import RawClient, start_headwater

pytestmark = pytest.mark.e2e


def test_a_second_sigint_during_the_save_exits_and_removes_the_temporary_file() -> None:
    server = start_headwater("--appendonly", "no", "--save", "3600 1")
    client = RawClient(server.port, timeout=60)
    for batch in range(40):
        pairs = [part for i in range(10000) for part in (f"k{batch}:{i}", "v" * 50)]
        assert client.call("MSET", *pairs) == b"+OK\r\n"
    temp = os.path.join(server.workdir, f"temp-{server.proc.pid}-*")
    try:
        server.proc.send_signal(signal.SIGINT)  # the shutdown saves
        deadline = time.monotonic() + 20
        while not glob.glob(temp) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert glob.glob(temp), "the shutdown's save did not start"
        server.proc.send_signal(signal.SIGINT)
        assert server.proc.wait(10) == 1
        assert not glob.glob(temp)
        assert not os.path.exists(os.path.join(server.workdir, "dump.hwsnap"))
    finally:
        server.stop()
