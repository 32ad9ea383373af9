"""Test certificates made with the openssl command, as Redis's utils/gen-test-certs.sh makes
them: a CA, a server certificate (also usable as a client's), a client certificate, a
second server certificate (for reloads), an encrypted server key, and a client certificate
of another CA that the server must refuse."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

KEY_PASSWORD = "s3cret-key"


@dataclass(frozen=True)
class Certs:
    dir: Path

    def path(self, name: str) -> str:
        return str(self.dir / name)

    def server_args(self, *, auth_clients: str = "yes") -> list[str]:
        """Headwater's (or redis-server's) options for these certificates."""
        return [
            "--tls-cert-file", self.path("server.crt"),
            "--tls-key-file", self.path("server.key"),
            "--tls-ca-cert-file", self.path("ca.crt"),
            "--tls-auth-clients", auth_clients,
        ]  # fmt: skip


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _signed(cwd: Path, name: str, ca: str, subject: str, usage: str) -> None:
    _run("genrsa", "-out", f"{name}.key", "2048", cwd=cwd)
    _run("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=cwd)
    (cwd / f"{name}.ext").write_text(
        f"keyUsage = digitalSignature, keyEncipherment\nextendedKeyUsage = {usage}\n"
        "subjectAltName = IP:127.0.0.1, DNS:localhost\n"
    )
    _run(
        "x509", "-req", "-sha256", "-days", "30", "-in", f"{name}.csr",
        "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
        "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=cwd,
    )  # fmt: skip


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    for ca in ("ca", "other-ca"):
        _run("genrsa", "-out", f"{ca}.key", "2048", cwd=directory)
        _run(
            "req", "-x509", "-new", "-nodes", "-sha256", "-key", f"{ca}.key", "-days", "30",
            "-subj", f"/O=Headwater test/CN={ca}", "-out", f"{ca}.crt", cwd=directory,
        )  # fmt: skip
    _signed(directory, "server", "ca", "/O=Headwater test/CN=Server", "serverAuth, clientAuth")
    _signed(directory, "server2", "ca", "/O=Headwater test/CN=Server2", "serverAuth, clientAuth")
    _signed(directory, "client", "ca", "/O=Headwater test/CN=Client", "clientAuth")
    _signed(directory, "stranger", "other-ca", "/O=Elsewhere/CN=Stranger", "clientAuth")
    _run(
        "rsa", "-aes256", "-in", "server.key", "-out", "server-encrypted.key",
        "-passout", f"pass:{KEY_PASSWORD}", cwd=directory,
    )  # fmt: skip
    return Certs(directory)
