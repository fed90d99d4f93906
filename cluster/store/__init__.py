"""The node's on-disk message store: a log of segment files with group commit."""

from cluster.store.log import (
    MessageStore,
    Recovery,
    StoreCorrupted,
    StoreError,
    TruncatedTail,
)

__all__ = ["MessageStore", "Recovery", "StoreCorrupted", "StoreError", "TruncatedTail"]
