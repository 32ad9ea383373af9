"""TLS for clients, replicas and regions: Python's ``ssl`` on the event loop already there.

Theory of operation
-------------------
``TlsContexts`` builds an ``ssl.SSLContext`` for the TLS port (server side) and one for the
links this server opens (client side: a replica to its primary with ``tls-replication``, a
region to its peers with ``peers-tls``) from the ``tls-*`` settings, with Redis's rules and
words for what is missing (``tlsConfigure``).

A CONFIG SET of a ``tls-*`` setting builds new contexts first (an error leaves the old ones
and answers Redis's "Unable to update TLS configuration"), then puts them in force for new
connections. The listening sockets keep the context they were created with (the *outer*
one): its settings that OpenSSL copies into each connection (client certificates asked or
required, protocol versions, ciphers) are changed in place, and its SNI callback, which
OpenSSL calls for every ClientHello (a name sent or not), moves the connection to the newest
context, which brings the new certificate and the new trusted CAs. Connections already made
keep what they negotiated.

TLS 1.3 cipher suites (``tls-ciphersuites``) have no setter in Python's ``ssl``; they are
given to the same OpenSSL library Python's ``ssl`` uses (``SSL_CTX_set_ciphersuites``),
after checking it is that very library, or refused.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import ssl
from typing import Any

from headwater.config import Config

log = logging.getLogger("headwater.tls")

_PROTOCOLS = {
    "tlsv1": ssl.TLSVersion.TLSv1,
    "tlsv1.1": ssl.TLSVersion.TLSv1_1,
    "tlsv1.2": ssl.TLSVersion.TLSv1_2,
    "tlsv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {"yes": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL, "no": ssl.CERT_NONE}

#: the settings whose change rebuilds the contexts (Redis's applyTlsCfg)
TLS_SETTINGS = (
    "tls-cert-file",
    "tls-key-file",
    "tls-key-file-pass",
    "tls-client-cert-file",
    "tls-client-key-file",
    "tls-client-key-file-pass",
    "tls-dh-params-file",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
    "tls-auth-clients",
    "tls-protocols",
    "tls-ciphers",
    "tls-ciphersuites",
    "tls-prefer-server-ciphers",
    "tls-session-caching",
    "tls-replication",
    "peers-tls",
)


class TlsError(Exception):
    """The settings cannot make a context; the message says why (logged, as Redis does)."""


def wanted(config: Config) -> bool:
    """Whether this server uses TLS at all (Redis configures it only then)."""
    return bool(config["tls-port"] or config["tls-replication"] or config["peers-tls"])


def _versions(text: str) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    if not text.strip():
        return ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3
    chosen = []
    for word in text.split():
        version = _PROTOCOLS.get(word.lower())
        if version is None:
            raise TlsError(
                "Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', "
                "'TLSv1.2' and 'TLSv1.3'."
            )
        chosen.append(version)
    return min(chosen), max(chosen)


def _apply_common(ctx: ssl.SSLContext, config: Config) -> None:
    """What the server and client contexts share: versions, ciphers, trusted CAs."""
    ctx.minimum_version, ctx.maximum_version = _versions(config["tls-protocols"])
    try:
        if config["tls-ciphers"]:
            ctx.set_ciphers(config["tls-ciphers"])
    except ssl.SSLError:
        raise TlsError(f"Failed to configure ciphers: {config['tls-ciphers']}") from None
    if config["tls-ciphersuites"]:
        set_ciphersuites(ctx, config["tls-ciphersuites"])
    ca_file, ca_dir = config["tls-ca-cert-file"], config["tls-ca-cert-dir"]
    if ca_file or ca_dir:
        try:
            ctx.load_verify_locations(cafile=ca_file or None, capath=ca_dir or None)
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(f"Failed to configure CA certificate(s) file/directory: {exc}") from None


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str, password: str, what: str) -> None:
    try:
        ctx.load_cert_chain(cert, key, password=password or None)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"Failed to load {what} certificate: {cert} / key {key}: {exc}") from None


def server_context(config: Config) -> ssl.SSLContext:
    """The TLS port's context (Redis's tlsConfigure, server side)."""
    cert, key = config["tls-cert-file"], config["tls-key-file"]
    if not cert:
        raise TlsError("No tls-cert-file configured!")
    if not key:
        raise TlsError("No tls-key-file configured!")
    needs_ca = (
        config["tls-auth-clients"] != "no" or config["tls-replication"] or config["peers-tls"]
    )
    if needs_ca and not (config["tls-ca-cert-file"] or config["tls-ca-cert-dir"]):
        raise TlsError(
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, "
            "tls-replication or tls-auth-clients are enabled!"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _apply_common(ctx, config)
    _load_chain(ctx, cert, key, config["tls-key-file-pass"], "server")
    if config["tls-dh-params-file"]:
        try:
            ctx.load_dh_params(config["tls-dh-params-file"])
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(f"Failed to load DH params file: {exc}") from None
    ctx.verify_mode = _CLIENT_AUTH[config["tls-auth-clients"]]
    if config["tls-prefer-server-ciphers"]:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    if not config["tls-session-caching"]:
        ctx.options |= ssl.OP_NO_TICKET
    return ctx


def client_context(config: Config) -> ssl.SSLContext:
    """The context of the links this server opens: it verifies the peer's certificate
    against the trusted CAs (not its name, as Redis), and shows ``tls-client-cert-file``
    (else ``tls-cert-file``)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    _apply_common(ctx, config)
    if config["tls-client-cert-file"]:
        _load_chain(
            ctx,
            config["tls-client-cert-file"],
            config["tls-client-key-file"],
            config["tls-client-key-file-pass"],
            "client",
        )
    elif config["tls-cert-file"]:
        _load_chain(
            ctx,
            config["tls-cert-file"],
            config["tls-key-file"],
            config["tls-key-file-pass"],
            "client",
        )
    return ctx


class TlsContexts:
    """The contexts in force, and the outer one the TLS listeners were made with."""

    def __init__(self) -> None:
        self.server: ssl.SSLContext | None = None
        self.client: ssl.SSLContext | None = None
        self.outer: ssl.SSLContext | None = None

    def configure(self, config: Config) -> None:
        """Build the contexts from the settings (TlsError: nothing changed)."""
        if not wanted(config):
            return
        server = server_context(config)
        client = client_context(config)
        self.server, self.client = server, client
        if self.outer is not None:
            _copy_connection_settings(server, self.outer, config)

    def listening(self) -> ssl.SSLContext:
        """The context the TLS listeners are created with: each connection moves to the
        newest server context during its handshake."""
        if self.outer is None:
            if self.server is None:
                raise TlsError("TLS is not configured")
            outer = server_context_like(self.server)
            outer.sni_callback = self._to_newest
            self.outer = outer
        return self.outer

    def _to_newest(self, connection: Any, name: str | None, ctx: ssl.SSLContext) -> None:
        if self.server is not None:
            connection.context = self.server


def server_context_like(model: ssl.SSLContext) -> ssl.SSLContext:
    """An outer context: what OpenSSL copies into a new connection, as ``model`` has it."""
    outer = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _copy_settings(model, outer)
    return outer


def _copy_settings(source: ssl.SSLContext, target: ssl.SSLContext) -> None:
    target.minimum_version = source.minimum_version
    target.maximum_version = source.maximum_version
    target.options = source.options
    target.verify_mode = source.verify_mode


def _copy_connection_settings(
    source: ssl.SSLContext, outer: ssl.SSLContext, config: Config
) -> None:
    _copy_settings(source, outer)
    if config["tls-ciphers"]:
        outer.set_ciphers(config["tls-ciphers"])
    if config["tls-ciphersuites"]:
        set_ciphersuites(outer, config["tls-ciphersuites"])


# -- connections -------------------------------------------------------------------------------

#: the bytes one read hands over (a buffer kept for the connection's life)
TLS_READ_SIZE = 64 * 1024


class TlsConnection(asyncio.BufferedProtocol):
    """A TLS connection's protocol in front of the plain ``Connection``: the TLS layer
    decrypts into one buffer kept for the connection's life. (Given a plain protocol, it
    allocates 256 KB for every read; with MALLOC_MMAP_THRESHOLD_ below that, as the README
    advises, each read was an mmap and an munmap: half the throughput.)"""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.view = memoryview(bytearray(TLS_READ_SIZE))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.connection.connection_made(transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view

    def buffer_updated(self, nbytes: int) -> None:
        self.connection.data_received(self.view[:nbytes].tobytes())

    def eof_received(self) -> bool | None:
        result: bool | None = self.connection.eof_received()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        self.connection.connection_lost(exc)

    def pause_writing(self) -> None:
        self.connection.pause_writing()

    def resume_writing(self) -> None:
        self.connection.resume_writing()


# -- TLS 1.3 cipher suites -------------------------------------------------------------------


def _libssl() -> Any:
    """Python's own libssl (the one ``_ssl`` is linked with), or None."""
    name = ctypes.util.find_library("ssl")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
        lib.OpenSSL_version.restype = ctypes.c_char_p
        lib.OpenSSL_version.argtypes = [ctypes.c_int]
        version = lib.OpenSSL_version(0).decode()
    except (OSError, AttributeError):
        return None
    if version != ssl.OPENSSL_VERSION or not _mapped(name):
        return None
    lib.SSL_CTX_set_ciphersuites.restype = ctypes.c_int
    lib.SSL_CTX_set_ciphersuites.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    return lib


def _mapped(name: str) -> bool:
    """The library is already in this process (loaded by ``_ssl``), not a second copy."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            return any(line.rstrip().endswith("/" + name) for line in maps)
    except OSError:
        return False


def set_ciphersuites(ctx: ssl.SSLContext, suites: str) -> None:
    lib = _libssl()
    if lib is None:
        raise TlsError("tls-ciphersuites needs Python's ssl to use the system's libssl")
    # (the SSL_CTX pointer is the first field after the object header of Python's context)
    handle = ctypes.c_void_p.from_address(id(ctx) + 2 * ctypes.sizeof(ctypes.c_void_p)).value
    if not lib.SSL_CTX_set_ciphersuites(handle, suites.encode()):
        raise TlsError(f"Failed to configure ciphersuites: {suites}")
