"""Who may use which management route: RabbitMQ's user tags (README, "Management API
permissions"), on a real node, one user per tag class."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pika
import pytest

from faults.process.node import NodeProcess
from tests.node.helpers import NodeFactory, api, config_toml, connect, ok

PASSWORD = "pw"
# One user per tag class, named after it.
TAG_CLASSES = ("none", "management", "policymaker", "monitoring", "administrator")
N, MG, PM, MO, AD = TAG_CLASSES
EVERY_TAG_CLASS = set(TAG_CLASSES)
POLICY = {"pattern": "^nothing$", "definition": {"ha-mode": "all"}}


@dataclass
class Scene:
    """Vhosts ``ours`` (every tag-class user may open it, and configure ``q.*`` and
    ``x.*`` there), ``theirs`` (only user ``owner``, no tags) and ``/`` (guest). Each
    has a queue ``q.<vhost>``, bound to a fanout ``x.<vhost>``, a consumer on it whose
    connection is ``management``'s (ours), ``owner``'s (theirs) or guest's (/), and a
    policy ``p.<vhost>``."""

    node: NodeProcess
    connections: list[pika.BlockingConnection]


@pytest.fixture
def scene(node_factory: NodeFactory) -> Iterator[Scene]:
    ours = {"vhost": "ours", "configure": "^[qx]\\.", "write": ".*", "read": ".*"}
    node = node_factory(config_text=config_toml(
        users=[{"name": name, "password": PASSWORD, "tags": [] if name == N else [name]}
               for name in TAG_CLASSES] + [{"name": "owner", "password": PASSWORD}],
        vhosts=["ours", "theirs"],
        permissions=[{"user": name, **ours} for name in TAG_CLASSES]
        + [{"user": "owner", "vhost": "theirs"}],
    ))
    connections = []
    for user, vhost, label in ((MG, "ours", "ours"), ("owner", "theirs", "theirs"),
                               ("guest", "/", "root")):
        password = "guest" if user == "guest" else PASSWORD
        connection = connect(node, user=user, password=password, vhost=vhost)
        channel = connection.channel()
        channel.exchange_declare(f"x.{label}", "fanout")
        channel.queue_declare(f"q.{label}")
        channel.queue_bind(f"q.{label}", f"x.{label}")
        channel.basic_consume(f"q.{label}", lambda *_: None)
        connections.append(connection)
        ok(node, "PUT", f"/api/policies/{'%2F' if vhost == '/' else vhost}/p.{label}", POLICY)
    yield Scene(node, connections)
    for connection in connections:
        connection.close()


def statuses(allowed: set[str], status: int = 200) -> dict[str, int]:
    """``status`` for the tag classes in ``allowed``, 401 for the others."""
    return {name: status if name in allowed else 401 for name in TAG_CLASSES}


ANY = EVERY_TAG_CLASS - {N}  # any management tag
ADMIN = {AD}
MONITORS = {MO, AD}
POLICYMAKERS = {PM, AD}
NOBODY: set[str] = set()

# (method, path, body, expected status per tag class). {user} is the requesting user.
ROUTES: list[tuple[str, str, Any, dict[str, int]]] = [
    ("GET", "/api/overview", None, statuses(ANY)),
    ("GET", "/api/nodes", None, statuses(MONITORS)),
    ("GET", "/api/nodes/{node}", None, statuses(MONITORS)),
    # Past the guard an unknown action is a 400: the app keeps running.
    ("POST", "/api/nodes/{node}/actions", {"action": "reboot"}, statuses(ADMIN, 400)),
    ("GET", "/api/queues", None, statuses(ANY)),
    ("GET", "/api/queues/ours", None, statuses(ANY)),
    ("GET", "/api/queues/theirs", None, statuses(ADMIN)),
    ("GET", "/api/queues/nowhere", None, statuses(ANY, 404)),
    ("GET", "/api/queues/ours/q.ours", None, statuses(ANY)),
    ("GET", "/api/queues/theirs/q.theirs", None, statuses(ADMIN)),
    ("PUT", "/api/queues/ours/q.{user}", {}, statuses(ANY, 201)),
    # Queue writes need configure permission, administrators' too.
    ("PUT", "/api/queues/ours/other.{user}", {}, statuses(NOBODY)),
    ("PUT", "/api/queues/theirs/q.{user}", {}, statuses(NOBODY)),
    ("DELETE", "/api/queues/ours/q.{user}", None, statuses(ANY, 204)),
    ("DELETE", "/api/queues/theirs/q.theirs", None, statuses(NOBODY)),
    ("POST", "/api/queues/ours/q.ours/actions", {"action": "sync"}, statuses(ADMIN, 400)),
    ("GET", "/api/exchanges", None, statuses(ANY)),
    ("GET", "/api/exchanges/ours", None, statuses(ANY)),
    ("GET", "/api/exchanges/theirs", None, statuses(ADMIN)),
    ("GET", "/api/exchanges/ours/x.ours", None, statuses(ANY)),
    ("GET", "/api/exchanges/theirs/x.theirs", None, statuses(ADMIN)),
    ("GET", "/api/bindings", None, statuses(ANY)),
    ("GET", "/api/bindings/ours", None, statuses(ANY)),
    ("GET", "/api/bindings/theirs", None, statuses(ADMIN)),
    ("GET", "/api/connections", None, statuses(ANY)),
    ("GET", "/api/channels", None, statuses(ANY)),
    ("GET", "/api/consumers", None, statuses(ANY)),
    ("GET", "/api/vhosts", None, statuses(ANY)),
    ("GET", "/api/vhosts/ours", None, statuses(ADMIN)),
    ("PUT", "/api/vhosts/new.{user}", None, statuses(ADMIN, 201)),
    ("DELETE", "/api/vhosts/ghost", None, statuses(ADMIN, 404)),
    ("GET", "/api/vhosts/ours/permissions", None, statuses(ADMIN)),
    ("GET", "/api/users", None, statuses(ADMIN)),
    ("GET", "/api/users/owner", None, statuses(ADMIN)),
    ("PUT", "/api/users/new.{user}", {"password": "x", "tags": ""}, statuses(ADMIN, 201)),
    ("DELETE", "/api/users/ghost", None, statuses(ADMIN, 404)),
    ("GET", "/api/permissions", None, statuses(ADMIN)),
    ("GET", "/api/permissions/ours/management", None, statuses(ADMIN)),
    ("PUT", "/api/permissions/%2F/owner", {"configure": "", "write": "", "read": ""},
     statuses(ADMIN, 201)),
    ("DELETE", "/api/permissions/%2F/ghost", None, statuses(ADMIN, 404)),
    ("GET", "/api/policies", None, statuses(ANY)),
    ("GET", "/api/policies/ours", None, statuses(ANY)),
    ("GET", "/api/policies/theirs", None, statuses(ADMIN)),
    ("GET", "/api/policies/ours/p.ours", None, statuses(POLICYMAKERS)),
    ("GET", "/api/policies/theirs/p.theirs", None, statuses(ADMIN)),
    ("PUT", "/api/policies/ours/p.{user}", POLICY, statuses(POLICYMAKERS, 201)),
    ("PUT", "/api/policies/theirs/p.{user}", POLICY, statuses(ADMIN, 201)),
    ("DELETE", "/api/policies/ours/p.{user}", None, statuses(POLICYMAKERS, 204)),
]


def test_every_route_answers_each_tag_class_as_rabbitmq_does(scene: Scene) -> None:
    node = scene.node
    wrong = []
    for method, template, body, expected in ROUTES:
        for user in TAG_CLASSES:
            path = template.format(user=user, node=node.name)
            answer = api(node, method, path, body, user=user, password=PASSWORD)
            if answer.status != expected[user]:
                wrong.append(f"{user}: {method} {path} answered {answer.status} "
                             f"{answer.body}, not {expected[user]}")
            elif answer.status == 401:
                # A known user refused: no new credentials would help, so no
                # WWW-Authenticate (a browser would ask for them again).
                assert answer.body["error"] == "not_authorised", answer
                assert "WWW-Authenticate" not in answer.headers, answer
                if user == N:
                    assert answer.body["reason"] == "Not management user", answer
    assert wrong == []


def test_refusals_give_rabbitmqs_reasons(scene: Scene) -> None:
    node = scene.node

    def reason(user: str, method: str, path: str, body: Any = None) -> str:
        answer = api(node, method, path, body, user=user, password=PASSWORD)
        assert answer.status == 401, answer
        return str(answer.body["reason"])

    assert reason(MG, "GET", "/api/users") == "Not administrator user"
    assert reason(PM, "GET", "/api/nodes") == "Not monitor user"
    assert reason(MO, "GET", "/api/queues/theirs") == \
        "User not authorised to access virtual host"
    assert reason(MO, "PUT", "/api/policies/ours/p", POLICY) == \
        "User not authorised to access object"
    assert reason(AD, "PUT", "/api/queues/theirs/q.new", {}) == \
        "ACCESS_REFUSED - access to queue 'q.new' in vhost 'theirs' refused for user " \
        "'administrator'"


def _listing(node: NodeProcess, user: str, path: str, *fields: str) -> set[tuple[Any, ...]]:
    return {tuple(row[field] for field in fields)
            for row in ok(node, "GET", path, user=user, password=PASSWORD)}


def test_listings_show_only_what_the_user_may_see(scene: Scene) -> None:
    node = scene.node
    every_vhost = {"/", "ours", "theirs"}
    for user in (MG, PM, MO, AD):
        # Objects: every vhost's for administrators only (monitoring users too see
        # those of the vhosts they may open, as in RabbitMQ).
        objects = every_vhost if user == AD else {"ours"}
        assert _listing(node, user, "/api/queues", "vhost", "name") == {
            (vhost, f"q.{'root' if vhost == '/' else vhost}") for vhost in objects}
        assert {vhost for vhost, name in _listing(node, user, "/api/exchanges", "vhost",
                                                  "name") if name.startswith("x.")} == objects
        assert _listing(node, user, "/api/bindings", "vhost") == {(v,) for v in objects}
        assert _listing(node, user, "/api/policies", "vhost") == {(v,) for v in objects}
        # Vhosts, connections, channels, consumers: all of them for monitoring users.
        monitor = user in (MO, AD)
        assert _listing(node, user, "/api/vhosts", "name") == {
            (v,) for v in (every_vhost if monitor else {"ours"})}
        own = {"guest", MG, "owner"} if monitor else {MG} & {user}
        assert _listing(node, user, "/api/connections", "user") == {(u,) for u in own}
        assert _listing(node, user, "/api/channels", "user") == {(u,) for u in own}
        consumers = ok(node, "GET", "/api/consumers", user=user, password=PASSWORD)
        assert {c["channel_details"]["user"] for c in consumers} == own
        totals = ok(node, "GET", "/api/overview", user=user, password=PASSWORD)[
            "object_totals"]
        assert (totals["queues"], totals["connections"], totals["consumers"]) == (
            (3, 3, 3) if monitor else (1, len(own), 1))


def test_a_vhost_made_through_the_api_is_open_to_its_maker(scene: Scene) -> None:
    """As in RabbitMQ: without this an administrator could not declare a queue in the
    vhost she just made."""
    node = scene.node
    assert api(node, "PUT", "/api/vhosts/fresh", user=AD, password=PASSWORD).status == 201
    assert ok(node, "GET", "/api/permissions/fresh/administrator") == {
        "user": AD, "vhost": "fresh", "configure": ".*", "write": ".*", "read": ".*"}
    assert api(node, "PUT", "/api/queues/fresh/q", {}, user=AD,
               password=PASSWORD).status == 201
