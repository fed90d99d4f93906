"""A publish's confirm when queues on other nodes hold it."""

from __future__ import annotations


class ConfirmWait:
    """The replicas (by node) that have yet to confirm one publish.

    A replica on the publishing channel's own node is covered by the store's LSN, as a
    single node's confirms are (``local``). A replica that dies stops being waited for;
    a publish that no replica ever confirmed and no local one holds is nacked.
    """

    __slots__ = ("confirmed", "local", "outstanding")

    def __init__(self) -> None:
        self.outstanding: set[str] = set()
        self.confirmed = 0
        self.local = False

    @property
    def done(self) -> bool:
        return not self.outstanding

    @property
    def failed(self) -> bool:
        return not self.outstanding and not self.local and self.confirmed == 0

    def heard(self, node: str) -> None:
        if node in self.outstanding:
            self.outstanding.discard(node)
            self.confirmed += 1

    def lost(self, node: str) -> None:
        self.outstanding.discard(node)
