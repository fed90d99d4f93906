"""Which users log in from loopback addresses only (RabbitMQ's ``loopback_users``), and
the node config key that names them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.config import ConfigError, load_config
from cluster.core.users import may_log_in_from

LOOPBACK = ["127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1"]
ELSEWHERE = ["192.0.2.2", "172.17.0.1", "fd00::2", "::ffff:192.0.2.2", "0.0.0.0", "localhost",
             "", "?"]


@pytest.mark.parametrize("host", LOOPBACK)
def test_a_listed_user_logs_in_from_loopback(host: str) -> None:
    assert may_log_in_from("guest", host, ["guest"])


@pytest.mark.parametrize("host", ELSEWHERE)
def test_a_listed_user_is_refused_from_anything_else(host: str) -> None:
    """A host name is not an address: the node only ever passes addresses."""
    assert not may_log_in_from("guest", host, ["guest"])


@pytest.mark.parametrize("host", ELSEWHERE)
def test_other_users_log_in_from_anywhere(host: str) -> None:
    assert may_log_in_from("alice", host, ["guest"])
    assert may_log_in_from("guest", host, [])


def _node_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "node.toml"
    path.write_text(text)
    return path


def test_guest_is_the_default_and_the_config_file_can_free_it(tmp_path: Path) -> None:
    assert load_config(None, "rabbit@n1").broker.loopback_users == ["guest"]
    path = _node_config(tmp_path, "[node]\nloopback_users = []\n")
    assert load_config(path, "rabbit@n1").broker.loopback_users == []
    path = _node_config(tmp_path, '[node]\nloopback_users = ["guest", "ops"]\n')
    assert load_config(path, "rabbit@n1").broker.loopback_users == ["guest", "ops"]


@pytest.mark.parametrize("value", ['"guest"', '["guest", 1]', "false"])
def test_loopback_users_must_be_a_list_of_names(tmp_path: Path, value: str) -> None:
    path = _node_config(tmp_path, f"[node]\nloopback_users = {value}\n")
    with pytest.raises(ConfigError) as refused:
        load_config(path, "rabbit@n1")
    assert str(refused.value).startswith(f"{path}: node.loopback_users must be a list of "
                                         "strings, got")
