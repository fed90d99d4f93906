"""The node's on-disk message store: a log of segment files with group commit."""

from cluster.store.errors import StoreCorrupted, StoreError
from cluster.store.log import MessageStore, Recovery, TruncatedTail

__all__ = ["MessageStore", "Recovery", "StoreCorrupted", "StoreError", "TruncatedTail"]
