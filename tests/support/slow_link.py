"""A TCP proxy whose downstream (server to client) direction runs at a set pace, so that a
test can act in the middle of a transfer (a full sync's snapshot) instead of racing it."""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class SlowLink:
    """Listens on ``port``; each connection goes on to ``target_port``. What the target sends
    goes ``chunk`` bytes at a time, one chunk every ``pause`` seconds; the other way is not
    held back."""

    def __init__(self, target_port: int, chunk: int = 64 * 1024, pause: float = 0.02) -> None:
        self.target_port = target_port
        self.chunk = chunk
        self.pause = pause
        self.downstream_bytes = 0
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(4)
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, paced: bool) -> None:
        try:
            while data := source.recv(self.chunk if paced else 65536):
                sink.sendall(data)
                if paced:
                    self.downstream_bytes += len(data)
                    time.sleep(self.pause)
        except OSError:
            pass
        finally:  # (closed, not only shut down: a peer still writing gets a reset)
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            source.close()

    def close(self) -> None:
        self._closed = True
        for sock in (self._listener, *self._sockets):
            with contextlib.suppress(OSError):
                sock.close()
