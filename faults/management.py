"""The few management-API calls the nemeses need (RabbitMQ's shapes, so the same
calls work against a real RabbitMQ): who a node sees running, policies, queue sync,
and forgetting a node."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote


class ManagementError(Exception):
    """A management call failed; ``status`` is None when the node did not answer."""

    def __init__(self, call: str, status: int | None, message: str) -> None:
        super().__init__(f"{call}: {status or 'no answer'} {message}".rstrip())
        self.call = call
        self.status = status


class Management:
    def __init__(self, url: str, user: str = "guest", password: str = "guest",
                 timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def __repr__(self) -> str:
        return f"Management({self.url!r})"

    def call(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            self.url + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": self._auth, "Content-Type": "application/json"})
        name = f"{method} {self.url}{path}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                text = reply.read()
        except urllib.error.HTTPError as exc:
            raise ManagementError(name, exc.code, exc.read().decode("utf-8", "replace")) from None
        except OSError as exc:
            raise ManagementError(name, None, str(exc)) from None
        return json.loads(text) if text else None

    def running_nodes(self) -> set[str]:
        """The nodes this node reports running, itself included."""
        return {node["name"] for node in self.call("GET", "/api/nodes") if node["running"]}

    def policy(self, vhost: str, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.call("GET", _policy_path(vhost, name)))
        except ManagementError as exc:
            if exc.status == 404:
                return None
            raise

    def put_policy(self, vhost: str, name: str, body: dict[str, Any]) -> None:
        self.call("PUT", _policy_path(vhost, name), body)

    def delete_policy(self, vhost: str, name: str) -> None:
        """Delete; a policy already gone is fine."""
        try:
            self.call("DELETE", _policy_path(vhost, name))
        except ManagementError as exc:
            if exc.status != 404:
                raise


    def queue_action(self, vhost: str, name: str, action: str) -> None:
        """``sync`` or ``cancel_sync`` a mirrored queue."""
        self.call("POST", f"/api/queues/{quote(vhost, safe='')}/{quote(name, safe='')}"
                          "/actions", {"action": action})

    def forget_node(self, asker: str, node: str) -> None:
        """``forget_cluster_node``, done by ``asker`` (this endpoint's node)."""
        self.call("POST", f"/api/nodes/{quote(asker, safe='')}/actions",
                  {"action": "forget_cluster_node", "node": node})


def _policy_path(vhost: str, name: str) -> str:
    return f"/api/policies/{quote(vhost, safe='')}/{quote(name, safe='')}"
