"""Active-active regions as real processes on loopback (issue 18): one region (``Region``)
and a full mesh of them (``TcpMesh``) whose links tests cut and heal with ``AALINK``."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

from tests.helpers import HEADWATER, ROOT, RawClient, free_port, loaded


class Region:
    def __init__(self, workdir: Path, region_id: int, *args: str) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.args = ["--region-id", str(region_id), *args]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [*HEADWATER, "server", "--port", str(self.port), "--dir", str(self.workdir)]
        log = open(self.workdir / "server.log", "ab")  # noqa: SIM115 - the process keeps it
        self.proc = subprocess.Popen([*cmd, *self.args], stdout=log, stderr=log, cwd=ROOT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError((self.workdir / "server.log").read_text()[-3000:])
            if loaded(self.port):
                return
            time.sleep(0.02)
        raise AssertionError("the region did not listen")

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=10)


class TcpMesh:
    def __init__(
        self,
        n: int = 3,
        mode: str = "strict",
        extra: tuple[str, ...] = (),
        tls: tuple[str, ...] | None = None,
        own_options: dict[int, tuple[str, ...]] | None = None,
    ) -> None:
        """``tls``: the regions' TLS options; each gets a TLS port, and the links use it.
        ``own_options``: more options of some regions, by region."""
        self.root = Path(tempfile.mkdtemp(prefix="hw-mesh-"))
        ports = [free_port() for _ in range(n)]
        link_ports = [free_port() for _ in range(n)] if tls is not None else ports
        self.regions: dict[int, Region] = {}
        for r in range(1, n + 1):
            others = ",".join(f"127.0.0.1:{p}" for i, p in enumerate(link_ports, 1) if i != r)
            workdir = self.root / f"r{r}"
            workdir.mkdir()
            own: tuple[str, ...] = ()
            if tls is not None:
                own = ("--tls-port", str(link_ports[r - 1]), "--peers-tls", "yes", *tls)
            own += (own_options or {}).get(r, ())
            region = Region(
                workdir, r, "--peers", others, "--active-active-id-mode", mode, *own, *extra
            )
            region.port = ports[r - 1]
            self.regions[r] = region
        for region in self.regions.values():
            region.start()
        self.clients = {r: region.client() for r, region in self.regions.items()}

    def __getitem__(self, r: int) -> redis.Redis:
        return self.clients[r]

    def info(self, r: int) -> str:
        raw = RawClient(self.regions[r].port)
        try:
            return raw.call("INFO", "active-active").decode()
        finally:
            raw.close()

    def dumps(self, *regions: int) -> dict[int, bytes]:
        return {r: self.clients[r].execute_command("AADUMP") for r in regions or self.clients}

    def converge(self, *regions: int, timeout: float = 10.0) -> bytes:
        """Wait until the regions' dumps are equal; the dump."""
        deadline = time.monotonic() + timeout
        while True:
            dumps = self.dumps(*regions)
            if len(set(dumps.values())) == 1:
                return next(iter(dumps.values()))
            if time.monotonic() > deadline:
                text = "\n".join(f"--- region {r}\n{d.decode()}" for r, d in dumps.items())
                raise AssertionError(f"no convergence in {timeout}s\n{text}")
            time.sleep(0.05)

    def wait(self, check: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                states = "\n".join(f"--- region {r}\n{self.info(r)}" for r in self.regions)
                raise AssertionError(f"timed out\n{states}")
            time.sleep(0.05)

    def cut(self, a: int, b: int) -> None:
        """No effects between a and b, either way."""
        self.clients[a].execute_command("AALINK", "PAUSE", str(b))
        self.clients[b].execute_command("AALINK", "PAUSE", str(a))

    def heal(self) -> None:
        for c in self.clients.values():
            c.execute_command("AALINK", "RESUME", "*")

    def logs(self, lines: int = 40) -> str:
        """The last lines of each region's log."""
        parts = []
        for r, region in self.regions.items():
            path = region.workdir / "server.log"
            text = path.read_text(errors="replace") if path.exists() else ""
            parts.append(f"--- region {r}\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts)

    def close(self) -> None:
        for region in self.regions.values():
            region.kill9()
        print(self.logs())  # (pytest shows it when the test failed)
        shutil.rmtree(self.root, ignore_errors=True)

    def isolate(self) -> None:
        """Cut every link: what happens next is concurrent in every region."""
        for c in self.clients.values():
            c.execute_command("AALINK", "PAUSE", "*")

    def sync(self, *regions: int, timeout: float = 15.0) -> bytes:
        """The seed's "— Sync —": the links between these regions (all by default) work
        again, and they converge; the dump."""
        names = regions or tuple(self.clients)
        for a in names:
            for b in names:
                if a != b:
                    self.clients[a].execute_command("AALINK", "RESUME", str(b))
        return self.converge(*names, timeout=timeout)

    def linked(self) -> None:
        """Wait until every region has connected to every other one."""
        n = len(self.regions) - 1
        self.wait(lambda: all(self.info(r).count("state=connected") == n for r in self.regions))
