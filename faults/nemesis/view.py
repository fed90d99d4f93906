"""What the cluster itself reports, for nemeses that wait for the cluster to
notice a change (a restarted node seen back by its peers before the next one goes)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Protocol

from faults.management import Management, ManagementError


class ClusterView(Protocol):
    def sees(self, observer: str, node: str) -> bool:
        """Whether ``observer`` reports ``node`` running (False if it does not answer)."""


class ManagementView:
    """Through each node's management API (``GET /api/nodes``)."""

    def __init__(self, endpoints: Mapping[str, Management]) -> None:
        self.endpoints = dict(endpoints)

    def sees(self, observer: str, node: str) -> bool:
        try:
            return node in self.endpoints[observer].running_nodes()
        except ManagementError:
            return False


def wait_seen(view: ClusterView, node: str, observers: Iterable[str], timeout: float,
              interval: float = 0.1) -> list[str]:
    """Wait until every observer sees ``node``; the observers that still do not."""
    deadline = time.monotonic() + timeout
    pending = [observer for observer in observers if observer != node]
    while True:
        pending = [observer for observer in pending if not view.sees(observer, node)]
        if not pending or time.monotonic() >= deadline:
            return pending
        time.sleep(interval)
