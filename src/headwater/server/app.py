"""Process-level server: listening sockets, the flush callback, the cron, signals, shutdown.

Replies and durability: once per loop turn ``flush`` has the AOF write (and, with
``appendfsync always``, start syncing) the effects produced so far, then sends every pending
client's replies, except those of clients whose last write is not durable yet, or (with
``always``) that may have read an effect not durable yet: these wait in ``held``. When the
AOF's background sync ends, ``Durability`` calls ``_durable`` on the loop thread, which
starts the next write + sync and sends the replies that may go now. If nothing is in flight
that will end that wait (a failed write, everysec's postponed write), a timer retries every
50 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import glob
import logging
import os
import secrets
import signal
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from headwater import REDIS_COMPAT_VERSION, __version__
from headwater.cluster.nodes_conf import NodesConfBusy, NodesConfError
from headwater.commands.context import Client, CommandSpec
from headwater.config import Config, ConfigError
from headwater.engine import Engine
from headwater.engine.core import allowed_while_busy
from headwater.persistence.aof import SYSTEM_FILE_OPS, FileOps
from headwater.server.aa_links import RegionLinks
from headwater.server.busy import BusyPoller
from headwater.server.cluster_bus import ClusterLinks
from headwater.server.durability import Durability, StartupError
from headwater.server.listen import Listeners
from headwater.server.loading import LOADING, LoadInterrupted, LoadWatch, allowed_while_loading
from headwater.server.protocol import Connection, send_replies
from headwater.server.querybuf import resize as resize_query_buffer
from headwater.server.replication import Replication
from headwater.server.tls import TLS_SETTINGS, TlsConnection, TlsContexts, TlsError

if TYPE_CHECKING:
    from headwater.server.admin import AdminServer

log = logging.getLogger("headwater")

#: How long the running thread may keep the GIL from one that waits for it (Python's default:
#: 5 ms). The AOF's fsync worker needs the GIL to report that its sync ended; with the default
#: a busy event loop kept it, and with it each ``appendfsync always`` batch's replies, up to
#: 5 ms longer (XADD c50 with always: 0.53x Redis at 5 ms, 0.60x at 0.5 ms, 0.66x at 0.1 ms,
#: 7 Dec). It costs only while a thread waits: the fsync worker, or a snapshot's loader.
GIL_SWITCH_INTERVAL_S = 0.0001


class Server:
    """``ops`` and ``extra_commands`` are for tests (tests/support/faulty_server.py): file
    operations that fail or wait, and the command rows that drive them."""

    def __init__(
        self,
        config: Config,
        loop: asyncio.AbstractEventLoop,
        data_dir: str = ".",
        ops: FileOps = SYSTEM_FILE_OPS,
        extra_commands: tuple[CommandSpec, ...] = (),
    ) -> None:
        self.config = config
        self.loop = loop
        try:
            self.engine = Engine(config, scheduler=loop, extra_commands=extra_commands)
        except ConfigError as exc:  # (the ACL users of the configuration)
            raise StartupError(str(exc)) from None
        except NodesConfBusy as exc:
            raise StartupError(str(exc)) from None
        except NodesConfError as exc:  # (cluster mode: the node's own table)
            raise StartupError(
                f"Unrecoverable error: corrupted cluster config file {exc}"
            ) from None
        except OSError as exc:
            raise StartupError(f"cannot write the cluster config file: {exc}") from None
        wake = loop.call_soon_threadsafe
        self.durability = Durability(config, self.engine, data_dir, wake, ops)
        self.durability.on_durable = self._durable
        self.engine.on_kill = self.kill
        self.replication = Replication(self, data_dir)
        self.durability.on_reload = self.replication.history_lost
        #: an active-active region's links to its peers (None on a plain server)
        self.region_links: RegionLinks | None = None
        if self.engine.region is not None:
            self.region_links = RegionLinks(self, self.engine.region)
        #: cluster mode's bus (None on a plain server)
        self.cluster_links: ClusterLinks | None = None
        if self.engine.cluster is not None:
            self.cluster_links = ClusterLinks(self, self.engine.cluster)
            self.engine.cluster_bus = self.cluster_links.bus
        self.busy_poller = BusyPoller(self)
        self.engine.busy_poller = self.busy_poller
        self.connections: dict[Client, Connection] = {}
        #: connections past the soft output limit: the cron re-checks them (Redis: clientsCron)
        self.soft_limited: set[Connection] = set()
        self.listeners = Listeners(loop, lambda: Connection(self))
        #: TLS (server/tls.py): the contexts, and the listeners of ``tls-port``
        self.tls = TlsContexts()
        try:
            self.tls.configure(config)
        except TlsError as exc:
            log.warning("%s", exc)
            raise StartupError("Failed to configure TLS. Check logs for more info.") from None
        self.tls_listeners = Listeners(
            loop, lambda: TlsConnection(Connection(self)), self.tls.listening
        )
        #: the admin HTTP port (server/admin.py), when ``admin-port`` is set
        self.admin: AdminServer | None = None
        #: clients whose replies wait for the AOF (their gate's ``may_reply``), in order
        self.held: dict[Client, None] = {}
        #: a ``flush`` is queued for this loop turn (read by the connections: no call per batch)
        self.flush_scheduled = False
        self._retry_scheduled = False
        self._query_buffers_resized_ms = 0.0
        self._stopped = loop.create_future()
        info = self.engine.info
        info.port = config["port"]
        info.pid = os.getpid()
        info.run_id = secrets.token_hex(20)
        info.executable = os.path.abspath(sys.argv[0])
        info.config_file = config.file or ""
        info.event_loop = type(loop).__module__.split(".")[0]

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen, then load the data (clients that come meanwhile hear -LOADING: see
        server/loading.py), then start replication and the cron."""
        config = self.config
        try:
            if config["admin-port"]:  # (first: once the data port answers, so does this one)
                from headwater.server.admin import AdminServer  # (aiohttp: ~0.3 s to import)

                self.admin = AdminServer(self)
                tls = self.tls.listening() if config["tls-port"] else None
                await self.admin.start(config["admin-bind"], config["admin-port"], tls)
            await self.listeners.start(config["bind"], config["port"], config["tcp-backlog"])
            if self.cluster_links is not None:
                await self.cluster_links.start()
            if config["tls-port"]:
                await self.tls_listeners.start(
                    config["bind"], config["tls-port"], config["tcp-backlog"]
                )
        except OSError:
            await self._close_listeners()
            raise
        try:
            self._load()
        except (LoadInterrupted, StartupError):
            await self._close_listeners()
            raise
        # All of it lives as long as the process: in the permanent generation it is never
        # walked again (the first full collection after 5M replayed entries took ~50 ms),
        # and a BGSAVE child does not dirty its pages (copy-on-write).
        gc.freeze()
        self.replication.start()
        if self.region_links is not None:
            self.region_links.start()
        self.config.appliers["port"] = self._move_port
        self.config.appliers["bind"] = self._move_bind
        self.config.appliers["tls-port"] = self._move_tls_port
        for name in TLS_SETTINGS:
            self.config.appliers[name] = self._reconfigure_tls
        self._schedule_cron()

    async def _close_listeners(self) -> None:
        self.listeners.close()
        self.tls_listeners.close()
        if self.cluster_links is not None:
            self.cluster_links.close()
        if self.admin is not None:
            await self.admin.close()

    def _load(self) -> None:
        """Recovery, before any command runs; the clients that connect meanwhile are
        answered -LOADING while it lasts (all but the commands Redis allows then)."""
        engine = self.engine
        watch = LoadWatch(engine.info.loading, self._serve_while_loading)
        gc.disable()  # what recovery builds is acyclic: collections would only walk it
        completed = False
        try:
            self.durability.open(watch=watch)
            completed = True
        finally:
            gc.enable()
            watch.end(completed)

    def _serve_while_loading(self) -> bool:
        """Serve the clients once (the busy poller), -LOADING to most (not the load's own
        commands: only while polling); False once SHUTDOWN asked to stop."""
        engine = self.engine
        engine.busy_reply, engine.busy_allows = LOADING, allowed_while_loading
        try:
            self.busy_poller(None)
        finally:
            engine.busy_reply, engine.busy_allows = None, allowed_while_busy
        return engine.shutdown_requested is None

    # -- CONFIG SET port / bind: the listeners move -------------------------------------------

    def _move_port(self, port: int) -> None:
        failure = "Unable to listen on this port. Check server logs."
        self._relisten(self.config["bind"], port, failure)
        self.engine.info.port = port

    def _move_bind(self, hosts: list[str]) -> None:
        self._relisten(hosts, self.config["port"], "Failed to bind to specified addresses.")
        if self.config["tls-port"]:
            self._relisten_tls(hosts, self.config["tls-port"])

    def _move_tls_port(self, port: int) -> None:
        if port:
            self._reconfigure_tls(port)
        self._relisten_tls(self.config["bind"], port)

    def _relisten_tls(self, hosts: list[str], port: int) -> None:
        try:
            self.tls_listeners.move(hosts, port, self.config["tcp-backlog"])
        except OSError as exc:
            log.warning("could not listen on %s TLS port %d: %s", hosts, port, exc.strerror or exc)
            raise ConfigError("Unable to listen on this port. Check server logs.") from None

    def _reconfigure_tls(self, value: object) -> None:
        """A ``tls-*`` setting changed (already in the configuration): new contexts for new
        connections, or Redis's refusal with the old ones kept."""
        try:
            self.tls.configure(self.config)
        except TlsError as exc:
            log.warning("%s", exc)
            raise ConfigError("Unable to update TLS configuration. Check server logs.") from None

    def _relisten(self, hosts: list[str], port: int, failure: str) -> None:
        """Redis's changeListener: when a bind fails, CONFIG SET answers ``failure`` and the
        old listeners keep serving."""
        try:
            self.listeners.move(hosts, port, self.config["tcp-backlog"])
        except OSError as exc:
            log.warning("could not listen on %s port %d: %s", hosts, port, exc.strerror or exc)
            raise ConfigError(failure) from None
        self.busy_poller.forget_listeners()

    async def serve_until_stopped(self) -> None:
        await self._stopped
        self.listeners.close()
        self.tls_listeners.close()
        if self.admin is not None:
            await self.admin.close()
        requested = self.engine.shutdown_requested
        self.replication.close()
        if self.region_links is not None:
            self.region_links.close()
        if self.cluster_links is not None:
            self.cluster_links.close()
        self.durability.shutdown(requested[0] if requested is not None else None)
        if self.durability.aof.clean_close:
            self.replication.save_state()
        for conn in list(self.connections.values()):
            if conn.transport is not None:
                conn.transport.close()
        await asyncio.sleep(0)

    def stop(self) -> None:
        if not self._stopped.done():
            self._stopped.set_result(None)

    def kill(self, client: Client) -> None:
        if client.is_master:  # CLIENT KILL TYPE master: the link reconnects and resyncs
            self.replication.cut_link()
            return
        conn = self.connections.get(client)
        if conn is not None and conn.transport is not None:
            # (what it has not received is dropped, as Redis frees a killed client: a client
            # that does not read would otherwise hold its connection open for ever)
            client.out.clear()
            conn.transport.abort()

    # -- per-iteration flush ---------------------------------------------------------------

    def schedule_flush(self) -> None:
        due = self.engine.pending or self.durability.pending or self.replication.due
        if not self.flush_scheduled and due:
            self.flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self.flush_scheduled = False
        if self.cluster_links is not None:
            self.cluster_links.after()  # (nodes.conf before the replies, as Redis)
        self.engine.broadcast_invalidations()
        durability = self.durability
        pending, held = self.engine.pending, self.held
        durability.persist(waiting=len(pending) + len(held))
        self.replication.flush()  # (after the AOF write, as Redis's beforeSleep)
        if self.region_links is not None:
            self.region_links.flush()  # (own effects, once durable)
        send_replies(pending, held, self.connections, durability.holds_nobody())
        durability.finish_roll_back()
        if held and not durability.syncing and not self._retry_scheduled:
            # a failed or postponed AOF write: nothing in flight will call _durable
            self._retry_scheduled = True
            self.loop.call_later(0.05, self._retry_held)
        if self.engine.shutdown_requested is not None:
            log.warning("User requested shutdown...")
            self.stop()

    def _durable(self) -> None:
        """The AOF's background sync ended (or its file was switched): persist what gathered
        meanwhile, and send the replies that were waiting for it."""
        if self._stopped.done():
            return  # shutting down: the AOF is closed and the connections with it
        pending, held = self.engine.pending, self.held
        pending.add_all(held)
        held.clear()
        self.flush()
        link = self.replication.link
        if link is not None:
            link.fsynced()

    def _retry_held(self) -> None:
        self._retry_scheduled = False
        if self.held:
            self._durable()

    # -- cron ------------------------------------------------------------------------------

    def _schedule_cron(self) -> None:
        hz = max(1, min(self.config["hz"], 500))
        self.loop.call_later(1.0 / hz, self._cron)

    def _cron(self) -> None:
        if self._stopped.done():
            return  # shutting down: the AOF is closed, and must not be reopened
        try:
            self.engine.cron()
        except Exception:
            log.exception("cron failed")
        self.durability.cron()  # retries a failed write, starts everysec's fsync, children…
        self.replication.cron()
        if self.region_links is not None:
            try:  # (a failing link cron must not stop this one: fsyncs, expiry, timeouts)
                self.region_links.cron()
            except Exception:
                log.exception("region links' cron failed")
            self.region_links.flush()
        for conn in list(self.soft_limited):
            conn.check_output_limit()
        self._close_idle_clients()
        self._resize_query_buffers()
        self.schedule_flush()
        self._schedule_cron()

    def _resize_query_buffers(self) -> None:
        """Once a second, as Redis's clientsCron goes over every client in a second."""
        now = self.engine.clock.monotonic_ms()
        if now - self._query_buffers_resized_ms < 1000:
            return
        self._query_buffers_resized_ms = now
        for client in self.connections:
            if client.qbuf_alloc:
                resize_query_buffer(client, now)

    def _close_idle_clients(self) -> None:
        """``timeout`` seconds without a command closes a client (Redis: clientsCronHandleTimeout);
        blocked clients are exempt, their wait has its own deadline, and so are subscribers
        and monitors, which only listen."""
        timeout_s = self.config["timeout"]
        if not timeout_s:
            return
        now = self.engine.clock.monotonic_ms()
        for client, conn in list(self.connections.items()):
            idle = now - client.last_interaction_ms
            waiting = client.gate.blocked is not None or client.subscribed() or client.monitor
            # (a reply still to send: a blocked client served this turn, idle for long, must
            # get its reply, not a closed connection; seen once in CI under load)
            waiting = waiting or client.is_replica or bool(client.out)
            if not waiting and idle > timeout_s * 1000 and conn.transport is not None:
                log.info("Closing idle client id=%d", client.id)
                conn.transport.close()


class ShutdownSignals:
    """SIGTERM and SIGINT, as Redis's sigShutdownHandler: the shutdown is scheduled (the loop
    stops the server on its next turn, so a busy script delays it until it ends or is
    killed), and a SIGINT after a first signal exits at once with status 1, removing the
    snapshot this process was writing (the shutdown's save, say).

    The loop's own handler (``add_signal_handler``) cannot run while a script keeps the loop
    busy. The Python-level handler put in front of it can: CPython runs it between two
    bytecodes, and the busy poller is Python code run every 100,000 Lua instructions."""

    NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT"}

    def __init__(self, server: Server, data_dir: str) -> None:
        self.server = server
        self.data_dir = data_dir
        self.received = False

    def install(self) -> None:
        for signum in self.NAMES:
            with contextlib.suppress(NotImplementedError):
                self.server.loop.add_signal_handler(signum, self.server.stop)
                # (the loop's Python-level handler does nothing: its wakeup fd, written by
                # CPython's C handler whichever Python handler is set, is what it reads)
                signal.signal(signum, self._received)

    def _received(self, signum: int, frame: object) -> None:
        if self.received and signum == signal.SIGINT:
            self._exit_now()
        self.received = True
        log.warning("Received %s scheduling shutdown...", self.NAMES[signal.Signals(signum)])

    def _exit_now(self) -> None:
        log.warning("You insist... exiting now.")
        pattern = os.path.join(glob.escape(self.data_dir), f"temp-{os.getpid()}-*")
        for temp in glob.glob(pattern):
            with contextlib.suppress(OSError):
                os.unlink(temp)
        for handler in logging.getLogger().handlers + log.handlers:
            handler.flush()
        os._exit(1)  # (not a clean shutdown: nothing saved, as Redis)


def startup_line(config: Config, data_dir: str) -> str:
    return (
        f"Headwater {__version__} (Redis {REDIS_COMPAT_VERSION} compatible) ready to accept "
        f"connections: port={config['port']} pid={os.getpid()} dir={data_dir}"
    )


def prepare_data_dir(path: str) -> str:
    data_dir = os.path.abspath(path)
    os.makedirs(data_dir, exist_ok=True)
    return data_dir


async def serve(
    config: Config, ops: FileOps = SYSTEM_FILE_OPS, extra_commands: tuple[CommandSpec, ...] = ()
) -> None:
    loop = asyncio.get_running_loop()
    data_dir = prepare_data_dir(config["dir"])
    server = Server(config, loop, data_dir, ops, extra_commands)
    try:
        await server.start()
    except LoadInterrupted:
        log.warning("SHUTDOWN while loading the data: exiting, nothing saved")
        return
    ShutdownSignals(server, data_dir).install()
    log.warning(startup_line(config, data_dir))
    await server.serve_until_stopped()
    log.warning("Headwater is now ready to exit, bye bye...")


def run(
    config: Config, ops: FileOps = SYSTEM_FILE_OPS, extra_commands: tuple[CommandSpec, ...] = ()
) -> None:
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        _run_loop(serve(config, ops, extra_commands))
    except StartupError as exc:
        log.error("%s", exc)
        sys.exit(1)


def _run_loop(main: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        asyncio.run(main)
        return
    uvloop.run(main)
