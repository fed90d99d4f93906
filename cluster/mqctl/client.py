"""The management API over HTTP: JSON with basic auth, every failure a `CtlError`."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from cluster.mqctl.errors import EX_SOFTWARE, EX_UNAVAILABLE, CtlError


def quote(segment: str) -> str:
    """``segment`` as one segment of an API path."""
    return urllib.parse.quote(segment, safe="")


class Client:
    def __init__(self, base_url: str, user: str, password: str, timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.user = user
        self.timeout = timeout
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._authorization = f"Basic {token}"

    def request(self, method: str, path: str, body: Any = None) -> Any:
        url = self.base_url + path
        request = urllib.request.Request(
            url, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": self._authorization, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise self._refused(error) from None
        except urllib.error.URLError as error:
            reason = getattr(error.reason, "strerror", None) or error.reason
            raise CtlError(f"unable to reach node at {url}: {reason}", EX_UNAVAILABLE) from None
        except OSError as error:  # a timeout or reset after connecting
            raise CtlError(f"unable to reach node at {url}: {error}", EX_UNAVAILABLE) from None
        return json.loads(raw) if raw else None

    def _refused(self, error: urllib.error.HTTPError) -> CtlError:
        text = error.read().decode("utf-8", "replace")
        try:
            reason = json.loads(text)["reason"]
        except (ValueError, KeyError, TypeError):
            reason = text.strip() or f"HTTP {error.code} {error.reason}"
        if error.code == 401:
            reason = f"{reason} (user '{self.user}' at {self.base_url})"
        # 503 is the node saying its broker application is stopped: unavailable.
        exit_code = EX_UNAVAILABLE if error.code == 503 else EX_SOFTWARE
        return CtlError(str(reason), exit_code, error.code)

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def put(self, path: str, body: Any) -> None:
        self.request("PUT", path, body)

    def delete(self, path: str) -> None:
        self.request("DELETE", path)

    def post(self, path: str, body: Any) -> None:
        self.request("POST", path, body)
