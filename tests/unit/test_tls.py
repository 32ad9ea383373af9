"""server/tls.py's contexts from the tls-* settings: TLS 1.3 cipher suites really applied
(through Python's own libssl), protocol versions, and Redis's refusals."""

from __future__ import annotations

import shutil
import socket
import ssl
import threading

import pytest

from headwater.config import Config
from headwater.server.tls import TlsError, client_context, server_context
from tests.support.certs import Certs, make_certs

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _config(certs: Certs, **settings: str) -> Config:
    config = Config()
    base = {
        "tls-port": "1",
        "tls-cert-file": certs.path("server.crt"),
        "tls-key-file": certs.path("server.key"),
        "tls-ca-cert-file": certs.path("ca.crt"),
        "tls-auth-clients": "no",
    }
    for name, value in {**base, **{k.replace("_", "-"): v for k, v in settings.items()}}.items():
        config.load_value(name, [value])
    return config


def _negotiated(server: ssl.SSLContext, certs: Certs) -> tuple[str, str, int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        accepted, _ = listener.accept()
        with server.wrap_socket(accepted, server_side=True) as tls:
            tls.recv(1)

    thread = threading.Thread(target=serve)
    thread.start()
    client = ssl.create_default_context(cafile=certs.path("ca.crt"))
    client.check_hostname = False
    with client.wrap_socket(socket.create_connection(listener.getsockname())) as tls:
        cipher = tls.cipher()
        tls.send(b"x")
    thread.join(5)
    listener.close()
    assert cipher is not None
    return cipher


def test_tls13_ciphersuites_are_applied(certs: Certs) -> None:
    default = _negotiated(server_context(_config(certs)), certs)
    chosen = _negotiated(
        server_context(_config(certs, tls_ciphersuites="TLS_CHACHA20_POLY1305_SHA256")), certs
    )
    assert chosen[:2] == ("TLS_CHACHA20_POLY1305_SHA256", "TLSv1.3") != default[:2]


def test_protocols_limit_the_versions(certs: Certs) -> None:
    cipher = _negotiated(server_context(_config(certs, tls_protocols="TLSv1.2")), certs)
    assert cipher[1] == "TLSv1.2"
    ctx = server_context(_config(certs, tls_protocols="tlsv1.2 TLSv1.3"))
    assert (ctx.minimum_version, ctx.maximum_version) == (
        ssl.TLSVersion.TLSv1_2,
        ssl.TLSVersion.TLSv1_3,
    )


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({"tls_ciphersuites": "NOPE"}, "Failed to configure ciphersuites: NOPE"),
        ({"tls_ciphers": "NOPE"}, "Failed to configure ciphers: NOPE"),
        ({"tls_protocols": "TLSv9"}, "Invalid tls-protocols specified"),
        ({"tls_ca_cert_file": "/nonexistent"}, "Failed to configure CA certificate(s)"),
        ({"tls_dh_params_file": "/nonexistent"}, "Failed to load DH params file"),
        ({"tls_key_file_pass": "wrong", "tls_key_file": "ENC"}, "Failed to load server"),
    ],
)
def test_bad_settings_are_refused(certs: Certs, settings: dict[str, str], reason: str) -> None:
    encrypted = certs.path("server-encrypted.key")
    settings = {k: v.replace("ENC", encrypted) for k, v in settings.items()}
    with pytest.raises(TlsError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        server_context(_config(certs, **settings))


def test_the_client_context_verifies_the_peer(certs: Certs) -> None:
    ctx = client_context(_config(certs))
    assert ctx.verify_mode == ssl.CERT_REQUIRED and not ctx.check_hostname
