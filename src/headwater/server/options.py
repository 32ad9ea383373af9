"""Command-line options and config files in redis.conf syntax.

``headwater server [/path/to/headwater.conf] [--name value ...]``: as redis-server, the config
file is read first and options on the command line override it; any config name works as an
option. Every error is reported with where it came from, and the process exits with status 1.
"""

from __future__ import annotations

import os
from typing import NoReturn

from headwater.config import Config, ConfigError
from headwater.resp.parser import split_args


class OptionsError(Exception):
    """A fatal configuration problem; the message is shown to the user as is."""


def load_file(config: Config, path: str, depth: int = 0) -> None:
    if depth > 10:
        raise OptionsError(f"Too many nested includes at {path}")
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError as exc:
        raise OptionsError(
            f"Fatal error, can't open config file '{path}': {exc.strerror}"
        ) from None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        words = split_args(line)
        if words is None:
            _fatal_line(path, number, raw, "Unbalanced quotes in configuration line")
        name = words[0].decode("utf-8", "replace").lower()
        args = [w.decode("utf-8", "surrogateescape") for w in words[1:]]
        if name == "include" and len(args) == 1:
            load_file(config, args[0], depth + 1)
            continue
        try:
            config.load_value(name, args)
        except ConfigError as exc:
            _fatal_line(path, number, raw, str(exc))


def _fatal_line(path: str, number: int, raw: bytes, reason: str) -> NoReturn:
    line = raw.decode("utf-8", "replace").strip()
    raise OptionsError(
        "\n*** FATAL CONFIG FILE ERROR (Headwater) ***\n"
        f"Reading the configuration file {path}, at line {number}\n"
        f">>> '{line}'\n{reason}"
    )


def parse_args(argv: list[str]) -> Config:
    """Build the configuration from ``[configfile] [--name value ...]``."""
    config = Config()
    rest = list(argv)
    if rest and not rest[0].startswith("--"):
        path = rest.pop(0)
        load_file(config, path)
        config.file = os.path.abspath(path)
    directives: list[tuple[str, list[str]]] = []
    for word in rest:
        if word.startswith("--") and len(word) > 2:
            directives.append((word[2:], []))
        elif not directives:
            raise OptionsError(f"Unexpected argument '{word}': options look like --name value")
        else:
            directives[-1][1].append(word)
    for name, args in directives:
        if not args and name.lower() in ("save",):
            args = [""]
        try:
            config.load_value(name, args)
        except ConfigError as exc:
            shown = " ".join(args)
            raise OptionsError(
                f"\n*** FATAL CONFIG ERROR (Headwater) ***\n>>> '--{name} {shown}'\n{exc}"
            ) from None
    if config["port"] == 0 and not config["tls-port"]:
        raise OptionsError(
            "--port 0 is not supported without --tls-port: Headwater only serves TCP, so it "
            "needs a port between 1 and 65535"
        )
    check_regions(config)
    return config


def check_regions(config: Config) -> None:
    """The active-active options that only make sense together."""
    if config["peers"] and not config["region-id"]:
        raise OptionsError(
            "--peers needs --region-id: peers are the other regions of an active-active "
            "database (region-id 1..16)"
        )
    if config["region-id"] and config["replicaof"] is not None:
        raise OptionsError(
            "--region-id and --replicaof cannot be combined: an active-active region is a "
            "primary that exchanges effects with its peers"
        )
    if config["region-id"] and config["cluster-enabled"]:
        raise OptionsError(
            "--region-id and --cluster-enabled cannot be combined: a region's streams, "
            "envelopes and peer links belong to one process, while a cluster spreads keys "
            "over nodes (docs/cluster.md)"
        )
    own = ("127.0.0.1", config["port"])
    if config["region-id"] and own in config["peers"]:
        raise OptionsError(f"--peers names this server itself ({own[0]}:{own[1]})")
