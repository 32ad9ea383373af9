"""Issue 18: the active-active options (region-id, peers, active-active-id-mode) on the
command line, in headwater.conf, and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.config import Config, InvalidConfig
from headwater.server.options import OptionsError, parse_args


def test_defaults_are_a_plain_server() -> None:
    config = Config()
    assert config["region-id"] == 0 and config["peers"] == []
    assert config["active-active-id-mode"] == "strict"


def test_command_line() -> None:
    config = parse_args(
        ["--region-id", "2", "--peers", "127.0.0.1:7001,localhost:7003",
         "--active-active-id-mode", "LIBERAL"]
    )  # fmt: skip
    assert config["region-id"] == 2
    assert config["peers"] == [("127.0.0.1", 7001), ("localhost", 7003)]
    assert config["active-active-id-mode"] == "liberal"
    assert config.render("peers") == "127.0.0.1:7001,localhost:7003"


def test_peers_as_separate_words_and_in_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "hw.conf"
    path.write_text("region-id 3\npeers h1:1 h2:2\nactive-active-id-mode semi-strict\n")
    config = parse_args([str(path)])
    assert config["region-id"] == 3 and config["peers"] == [("h1", 1), ("h2", 2)]
    assert config["active-active-id-mode"] == "semi-strict"
    assert "peers h1:1,h2:2" in config.rewrite_lines()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--region-id", "17"], "between 0 (off) and 16"),
        (["--region-id", "-1"], "must be an integer between 0"),
        (["--region-id", "one"], "must be an integer between 0"),
        (["--region-id", "1", "--peers", "hostonly"], "host:port pairs"),
        (["--region-id", "1", "--peers", "h:0"], "port 1..65535"),
        (["--region-id", "1", "--peers", "h:99999"], "host:port pairs"),
        (["--region-id", "1", "--peers", "h:1,h:1"], "twice"),
        (["--peers", "h:1"], "--peers needs --region-id"),
        (["--region-id", "1", "--replicaof", "h", "1"], "cannot be combined"),
        (["--region-id", "1", "--cluster-enabled", "yes"], "--cluster-enabled cannot be"),
        (["--cluster-enabled", "maybe"], "argument must be 'yes' or 'no'"),
        (["--cluster-preferred-endpoint-type", "dns"], "ip, hostname, unknown-endpoint"),
        (["--region-id", "1", "--port", "7000", "--peers", "127.0.0.1:7000"], "itself"),
        (["--active-active-id-mode", "loose"], "strict, semi-strict, liberal"),
    ],
)
def test_bad_values_are_fatal_with_a_clear_message(argv: list[str], message: str) -> None:
    with pytest.raises(OptionsError) as info:
        parse_args(argv)
    assert message in str(info.value)


def test_bad_value_in_the_config_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.conf"
    path.write_text("port 7000\nregion-id 99\n")
    with pytest.raises(OptionsError, match="line 2"):
        parse_args([str(path)])


@pytest.mark.parametrize("name", ["region-id", "peers", "active-active-id-mode"])
def test_immutable_at_run_time(name: str) -> None:
    with pytest.raises(InvalidConfig, match="immutable"):
        Config().set_many([(name, "1")])


@pytest.mark.parametrize(
    ("name", "value"), [("region-id", "0"), ("peers", ""), ("active-active-id-mode", "strict")]
)
def test_setting_the_value_it_has_is_a_no_op(name: str, value: str) -> None:
    """Writing back what CONFIG GET * shows works (a client restoring a configuration)."""
    config = Config()
    config.set_many([(name, value)])
    assert config.render(name) == value
