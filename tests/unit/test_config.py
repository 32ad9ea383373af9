from __future__ import annotations

import pytest

from headwater.config import Config, ConfigError, InvalidConfig, UnknownConfig
from headwater.server.options import OptionsError, parse_args


def test_defaults_match_the_design() -> None:
    config = Config()
    assert config["appendonly"] is True and config["appendfsync"] == "everysec"
    assert config["bind"] == ["127.0.0.1"] and config["port"] == 6379 and config["dir"] == "./data"


def test_set_many_is_all_or_nothing() -> None:
    config = Config()
    with pytest.raises(InvalidConfig):
        config.set_many([("hz", "20"), ("maxclients", "x")])
    assert config["hz"] == 10


def test_unknown_and_immutable() -> None:
    config = Config()
    with pytest.raises(UnknownConfig):
        config.set_many([("nope", "1")])
    with pytest.raises(InvalidConfig, match="immutable"):
        config.set_many([("daemonize", "yes")])


def test_a_failed_apply_undoes_the_whole_set() -> None:
    """An applier that fails (a port that cannot be bound) rolls back every value, and the
    appliers that ran get the old values again; an unchanged value is not applied."""
    config = Config()
    calls: list[tuple[str, object]] = []

    def refuse_busy(port: int) -> None:
        calls.append(("port", port))
        if port == 7777:
            raise ConfigError("Unable to listen on this port")

    config.appliers["port"] = refuse_busy
    config.appliers["bind"] = lambda hosts: calls.append(("bind", hosts))
    with pytest.raises(InvalidConfig, match="Unable to listen") as failure:
        config.set_many([("hz", "20"), ("bind", "::1"), ("port", "7777")])
    assert failure.value.name == "port"
    assert (config["hz"], config["bind"], config["port"]) == (10, ["127.0.0.1"], 6379)
    assert calls == [("bind", ["::1"]), ("port", 7777), ("bind", ["127.0.0.1"])]
    calls.clear()
    config.set_many([("port", "6379")])
    assert calls == []


def test_memory_units() -> None:
    config = Config()
    config.set_many([("maxmemory", "1gb")])
    assert config["maxmemory"] == 1024**3
    with pytest.raises(ConfigError):
        config.load_value("maxmemory", ["12xb"])


def test_repeated_save_lines_accumulate_and_empty_disables() -> None:
    config = Config()
    config.load_value("save", ["900", "1"])
    config.load_value("save", ["300", "10"])
    assert config["save"] == [(900, 1), (300, 10)]
    assert parse_args(["--save", ""])["save"] == []


def test_options_and_config_file(tmp_path: object) -> None:
    path = tmp_path / "hw.conf"  # type: ignore[operator]
    path.write_text('# comment\nport 7000\nrequirepass "pa ss"\nsave 60 1\n')
    config = parse_args([str(path), "--port", "7001", "--bind", "127.0.0.1", "::1"])
    assert config["port"] == 7001 and config["requirepass"] == "pa ss"
    assert config["bind"] == ["127.0.0.1", "::1"] and config.file == str(path)


@pytest.mark.parametrize(
    "argv",
    [
        ["--port", "0"],
        ["--nosuch", "1"],
        ["--maxclients", "abc"],
        ["--appendonly", "maybe"],
        ["stray"],
        ["--port", "1", "2"],
    ],
)
def test_bad_options_are_fatal_with_a_message(argv: list[str]) -> None:
    with pytest.raises(OptionsError) as info:
        parse_args(argv)
    assert str(info.value).strip()


def test_bad_config_file_line_names_the_line(tmp_path: object) -> None:
    path = tmp_path / "bad.conf"  # type: ignore[operator]
    path.write_text("port 7000\nfrobnicate yes\n")
    with pytest.raises(OptionsError, match="line 2"):
        parse_args([str(path)])
