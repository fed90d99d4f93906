"""The management API of a real node process, over real HTTP, with pika as the AMQP
client."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

import pika
import pika.exceptions
import pytest

from faults.process.node import NodeProcess
from tests.node.helpers import (
    api,
    assert_error,
    assert_no_traceback,
    connect,
    connection_error,
    get_bodies,
    numbered,
    ok,
    publish_bodies,
    refused_at_open,
)

PERSISTENT = pika.BasicProperties(delivery_mode=2)


# -- reading the broker's state --------------------------------------------------------------


def test_overview_counts_what_clients_declared_and_published(node: NodeProcess) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.confirm_delivery()
    channel.exchange_declare("logs", "fanout")
    channel.queue_declare("a", durable=True)
    channel.queue_declare("b")
    channel.queue_bind("b", "logs")
    publish_bodies(channel, "a", numbered(3))
    publish_bodies(channel, "", numbered(2), exchange="logs")
    channel.basic_consume("b", lambda *_: None)

    overview = ok(node, "GET", "/api/overview")

    assert overview["node"] == node.name
    assert overview["running"] is True
    assert overview["object_totals"] == {
        "connections": 1, "channels": 1, "exchanges": 5, "queues": 2, "consumers": 1,
    }
    # The consumer on b holds its two messages unacknowledged.
    assert overview["queue_totals"] == {
        "messages": 5, "messages_ready": 3, "messages_unacknowledged": 2,
    }
    assert {(lst["protocol"], lst["port"]) for lst in overview["listeners"]} == {
        ("amqp", node.amqp_port), ("http", node.mgmt_port),
    }
    connection.close()


def test_queue_fields_split_ready_and_unacknowledged(node: NodeProcess) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.confirm_delivery()
    channel.queue_declare("work", durable=True, arguments={"x-max-length": 100})
    publish_bodies(channel, "work", numbered(5))
    channel.basic_qos(prefetch_count=2)
    channel.basic_consume("work", lambda *_: None)  # never acks

    queue = ok(node, "GET", "/api/queues/%2F/work")

    assert queue == {
        "name": "work", "vhost": "/", "durable": True, "auto_delete": False,
        "exclusive": False, "arguments": {"x-max-length": 100}, "node": node.name,
        "messages": 5, "messages_ready": 3, "messages_unacknowledged": 2, "consumers": 1,
        "policy": None, "effective_policy_definition": {}, "state": "running",
        "slave_nodes": [], "synchronised_slave_nodes": [],
        "local": {"role": "master", "messages": 5},
    }
    assert ok(node, "GET", "/api/queues") == [queue]
    assert ok(node, "GET", "/api/queues/%2F") == [queue]
    connection.close()
    # Closing the consumer's connection requeues what it held.
    after = ok(node, "GET", "/api/queues/%2F/work")
    assert (after["messages_ready"], after["messages_unacknowledged"]) == (5, 0)


def test_connections_channels_consumers_and_bindings(node: NodeProcess) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.queue_declare("jobs")
    channel.queue_bind("jobs", "amq.topic", "jobs.#")
    channel.basic_consume("jobs", lambda *_: None, consumer_tag="worker-1")

    [conn] = ok(node, "GET", "/api/connections")
    assert (conn["user"], conn["vhost"], conn["state"], conn["channels"]) == ("guest", "/",
                                                                            "running", 1)
    assert conn["port"] == node.amqp_port
    [chan] = ok(node, "GET", "/api/channels")
    assert chan["connection_details"]["name"] == conn["name"]
    assert chan["consumer_count"] == 1
    [consumer] = ok(node, "GET", "/api/consumers")
    assert consumer["consumer_tag"] == "worker-1"
    assert consumer["queue"] == {"name": "jobs", "vhost": "/"}
    bindings = ok(node, "GET", "/api/bindings/%2F")
    assert [(b["source"], b["destination"], b["routing_key"]) for b in bindings] == [
        ("", "jobs", "jobs"), ("amq.topic", "jobs", "jobs.#"),
    ]
    assert ok(node, "GET", "/api/exchanges/%2F/amq.default")["type"] == "direct"
    connection.close()


# -- policies --------------------------------------------------------------------------------


def test_a_bad_policy_body_is_refused_naming_the_field(node: NodeProcess) -> None:
    path = "/api/policies/%2F/ha"
    bad_key = {"pattern": "^q", "definition": {"ha-mode": "all", "ha-sync-mod": "automatic"}}
    assert_error(api(node, "PUT", path, bad_key), 400, "ha-sync-mod")
    bad_value = {"pattern": "^q", "definition": {"ha-mode": "exactly", "ha-params": 0}}
    assert_error(api(node, "PUT", path, bad_value), 400, "ha-params")
    assert_error(api(node, "PUT", path, {"pattern": "^q", "definition": {"ha-mode": "all"},
                                         "priority": "high"}), 400, "priority")
    assert_error(api(node, "PUT", path, {"pattern": "(", "definition": {"ha-mode": "all"}}),
                 400, "pattern")
    assert_error(api(node, "PUT", path, raw=b'{"pattern": '), 400, "JSON")
    deep = b'{"pattern": "^q", "definition": ' + b'{"a": ' * 100_000 + b"0" + b"}" * 100_001
    assert_error(api(node, "PUT", path, raw=deep), 400, "nested too deeply")
    assert ok(node, "GET", "/api/policies") == []


def test_policies_round_trip_and_the_highest_priority_match_wins(node: NodeProcess) -> None:
    for name in ("q.ha", "q.plain", "other"):
        ok(node, "PUT", f"/api/queues/%2F/{name}", {"durable": True})
    low = {"pattern": "^q\\.", "definition": {"ha-mode": "all"}, "priority": 1,
           "apply-to": "queues"}
    high = {"pattern": "^q\\.ha$", "definition": {"ha-mode": "exactly", "ha-params": 2},
            "priority": 5}
    assert api(node, "PUT", "/api/policies/%2F/low", low).status == 201
    assert api(node, "PUT", "/api/policies/%2F/high", high).status == 201

    policies = {p["name"]: p for p in ok(node, "GET", "/api/policies/%2F")}
    assert policies["low"] == {"vhost": "/", "name": "low", **low}
    assert policies["high"]["apply-to"] == "all"

    def policy_of() -> dict[str, str | None]:
        return {q["name"]: q["policy"] for q in ok(node, "GET", "/api/queues/%2F")}

    assert policy_of() == {"q.ha": "high", "q.plain": "low", "other": None}
    assert ok(node, "GET", "/api/queues/%2F/q.ha")["effective_policy_definition"] == \
        high["definition"]

    # Raising low above high makes it win; deleting it leaves high.
    assert api(node, "PUT", "/api/policies/%2F/low", {**low, "priority": 9}).status == 204
    assert policy_of()["q.ha"] == "low"
    assert api(node, "DELETE", "/api/policies/%2F/low").status == 204
    assert policy_of() == {"q.ha": "high", "q.plain": None, "other": None}
    assert_error(api(node, "DELETE", "/api/policies/%2F/low"), 404, "low")
    assert [p["name"] for p in ok(node, "GET", "/api/policies")] == ["high"]


# -- authentication and authorisation --------------------------------------------------------


def test_wrong_or_missing_credentials_get_401(node: NodeProcess) -> None:
    for answer in (api(node, "GET", "/api/overview", password="wrong"),
                   api(node, "GET", "/api/queues", user="nobody"),
                   api(node, "GET", "/api/overview", user=None)):
        assert_error(answer, 401)
        assert answer.headers["WWW-Authenticate"].startswith("Basic ")


def test_users_and_permissions_govern_amqp_logins(node: NodeProcess) -> None:
    ok(node, "PUT", "/api/vhosts/apps")
    ok(node, "PUT", "/api/users/app", {"password": "s3cret", "tags": []})
    with refused_at_open(530):  # a user with no permissions on the vhost
        connect(node, user="app", password="s3cret", vhost="apps")
    assert api(node, "PUT", "/api/permissions/apps/app",
               {"configure": "^app\\.", "write": ".*", "read": ".*"}).status == 201

    connection = connect(node, user="app", password="s3cret", vhost="apps")
    channel = connection.channel()
    channel.queue_declare("app.inbox")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
        connection.channel().queue_declare("elsewhere")  # outside the configure regex
    assert refused.value.reply_code == 403
    connection.close()

    assert_error(api(node, "PUT", "/api/permissions/apps/app", {"configure": "(", "write": "",
                                                                "read": ""}), 400, "configure")
    assert_error(api(node, "PUT", "/api/permissions/apps/ghost",
                     {"configure": "", "write": "", "read": ""}), 404, "ghost")
    assert api(node, "DELETE", "/api/permissions/apps/app").status == 204
    with refused_at_open(530):
        connect(node, user="app", password="s3cret", vhost="apps")


def test_user_tags_change_with_the_stored_hash_keeping_the_password(
    node: NodeProcess,
) -> None:
    ok(node, "PUT", "/api/users/ops", {"password": "pw", "tags": ""})
    stored = ok(node, "GET", "/api/users/ops")
    assert api(node, "PUT", "/api/users/ops",
               {"password_hash": stored["password_hash"], "tags": ["administrator"]}
               ).status == 204
    assert api(node, "PUT", "/api/vhosts/by-ops", user="ops", password="pw").status == 201
    assert_error(api(node, "PUT", "/api/users/ops", {"password_hash": "bm90IGEgaGFzaA=="}),
                 400, "password_hash")
    assert_error(api(node, "PUT", "/api/users/ops", {"tags": "x"}), 400, "password")


# -- errors ----------------------------------------------------------------------------------


def test_unknown_objects_and_bad_requests(node: NodeProcess) -> None:
    assert_error(api(node, "GET", "/api/queues/%2F/nope"), 404, "nope")
    assert_error(api(node, "GET", "/api/queues/nowhere"), 404, "nowhere")
    assert_error(api(node, "GET", "/api/nodes/rabbit@elsewhere"), 404, "rabbit@elsewhere")
    assert_error(api(node, "GET", "/api/no-such-endpoint"), 404)
    assert_error(api(node, "PUT", "/api/queues/%2F/q", {"durable": "yes"}), 400, "durable")
    assert_error(api(node, "PUT", "/api/queues/%2F/amq.q", {}), 400, "amq.")
    ok(node, "PUT", "/api/queues/%2F/q", {"durable": True})
    # Redeclaring with other properties fails as queue.declare would.
    assert_error(api(node, "PUT", "/api/queues/%2F/q", {"durable": False}), 400,
                 "PRECONDITION_FAILED", "durable")
    assert_error(api(node, "POST", "/api/queues/%2F/q/actions", {"action": "sync"}), 400,
                 "not mirrored")
    assert_error(api(node, "POST", "/api/queues/%2F/q/actions", {"action": "shuffle"}), 400,
                 "shuffle")
    assert_error(api(node, "POST", f"/api/nodes/{node.name}/actions", {"action": "reboot"}),
                 400, "reboot")
    assert api(node, "DELETE", "/api/queues/%2F/q").status == 204
    assert_error(api(node, "DELETE", "/api/queues/%2F/q"), 404)
    # a name no AMQP client could give (a short string is at most 255 bytes)
    assert_error(api(node, "PUT", "/api/queues/%2F/" + "q" * 300, {}), 400, "300 bytes")
    assert api(node, "PUT", "/api/queues/%2F/" + "q" * 255, {}).status == 201
    assert_no_traceback(node)


def test_a_request_line_too_long_is_refused_without_a_traceback(node: NodeProcess) -> None:
    """aiohttp refuses it before any handler runs (and before authentication)."""
    request = urllib.request.Request(node.mgmt_url + "/api/queues/%2F/" + "x" * 9000)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code in (400, 414)
    assert_no_traceback(node)


def test_deleting_a_vhost_closes_its_connections(node: NodeProcess) -> None:
    ok(node, "PUT", "/api/vhosts/tmp")
    ok(node, "PUT", "/api/permissions/tmp/guest", {"configure": ".*", "write": ".*",
                                                   "read": ".*"})
    connection = connect(node, vhost="tmp")
    connection.channel().queue_declare("q", durable=True)
    assert api(node, "DELETE", "/api/vhosts/tmp").status == 204
    with connection_error(320):
        connection.process_data_events(time_limit=5)
    assert_error(api(node, "GET", "/api/vhosts/tmp"), 404)
    assert ok(node, "GET", "/api/permissions") == [
        {"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
    ]


# -- stop_app / start_app and durability -----------------------------------------------------


def node_action(node: NodeProcess, action: str) -> None:
    answer = api(node, "POST", f"/api/nodes/{node.name}/actions", {"action": action})
    assert answer.status == 204, answer


def test_stop_app_closes_clients_and_refuses_amqp_while_mgmt_answers(
    node: NodeProcess,
) -> None:
    ok(node, "PUT", "/api/users/late", {"password": "pw", "tags": "administrator"})
    connection = connect(node)
    connection.channel().queue_declare("q")

    node_action(node, "stop_app")

    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
        connection.process_data_events(time_limit=5)
    assert closed.value.reply_code == 320
    assert "CONNECTION_FORCED" in closed.value.reply_text
    with pytest.raises(pika.exceptions.AMQPConnectionError):
        connect(node)

    overview = ok(node, "GET", "/api/overview")
    assert overview["running"] is False
    assert "object_totals" not in overview
    assert [lst["protocol"] for lst in overview["listeners"]] == ["http"]
    assert ok(node, "GET", f"/api/nodes/{node.name}")["running"] is False
    assert_error(api(node, "GET", "/api/queues"), 503)
    assert api(node, "GET", "/api/queues").body["error"] == "app_stopped"
    # Users the app saved still log in; others still do not.
    assert ok(node, "GET", "/api/overview", user="late", password="pw")["running"] is False
    assert_error(api(node, "GET", "/api/overview", password="wrong"), 401)

    node_action(node, "start_app")
    assert ok(node, "GET", "/api/overview")["running"] is True
    connect(node).close()
    assert_no_traceback(node)


def test_start_app_brings_back_durable_queues_with_persistent_messages(
    node: NodeProcess,
) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.confirm_delivery()
    channel.queue_declare("keep", durable=True)
    channel.queue_declare("lose")
    publish_bodies(channel, "keep", numbered(3, "p"), properties=PERSISTENT)
    publish_bodies(channel, "keep", [b"transient"])
    publish_bodies(channel, "lose", numbered(2), properties=PERSISTENT)

    node_action(node, "stop_app")
    node_action(node, "start_app")

    assert [q["name"] for q in ok(node, "GET", "/api/queues")] == ["keep"]
    assert ok(node, "GET", "/api/queues/%2F/keep")["messages"] == 3
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker):
        connection.process_data_events(time_limit=5)
    again = connect(node)
    assert get_bodies(again.channel(), "keep") == numbered(3, "p")
    again.close()


def test_definitions_survive_a_node_restart(node: NodeProcess) -> None:
    ok(node, "PUT", "/api/vhosts/prod")
    ok(node, "PUT", "/api/users/alice", {"password": "wonder", "tags": ["management"]})
    ok(node, "PUT", "/api/permissions/prod/alice", {"configure": "", "write": ".*",
                                                    "read": ".*"})
    policy = {"pattern": "^ha\\.", "definition": {"ha-mode": "all",
                                                  "ha-sync-mode": "automatic"},
              "priority": 3, "apply-to": "queues"}
    ok(node, "PUT", "/api/policies/prod/ha", policy)
    ok(node, "PUT", "/api/queues/prod/ha.orders", {"durable": True})
    ok(node, "PUT", "/api/users/root", {"password": "r", "tags": "administrator"})
    admin: dict[str, Any] = {"user": "root", "password": "r"}
    ok(node, "DELETE", "/api/users/guest", **admin)

    node.restart()

    assert_error(api(node, "GET", "/api/overview"), 401)  # guest stayed deleted
    assert ok(node, "GET", "/api/users/alice", **admin)["tags"] == ["management"]
    assert ok(node, "GET", "/api/policies/prod/ha", **admin) == {"vhost": "prod",
                                                                  "name": "ha", **policy}
    assert ok(node, "GET", "/api/queues/prod/ha.orders", **admin)["policy"] == "ha"
    assert ok(node, "GET", "/api/permissions/prod/alice", **admin)["configure"] == ""
    connect(node, user="alice", password="wonder", vhost="prod").close()
