"""GM messages and replicated queue operations as bytes for peer links.

GM payloads are queue operations (lists, JSON-able) in which message bodies travel as
base64 text; a GM message is one JSON document carried as an envelope's payload, so
its size is not bounded by the envelope header's.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cluster.core.message import Message
from cluster.gm import Activity, CatchUp, Entry, GMMessage, Pub, SenderSnapshot


def message_text(message: Message) -> str:
    return base64.b64encode(message.encode()).decode()


def message_from_text(text: str) -> Message:
    return Message.decode(base64.b64decode(text))


def _pub(pub: Pub) -> list[Any]:
    return [pub.seq, pub.view, pub.payload]


def encode_gm(message: GMMessage) -> bytes:
    if isinstance(message, Activity):
        doc: dict[str, Any] = {"a": message.view_version, "e": [
            [e.sender, [_pub(p) for p in e.pubs], e.ack] for e in message.entries]}
    else:
        doc = {"c": message.view_version, "s": {
            sender: [[_pub(p) for p in snap.pending], snap.last_pub, snap.last_ack]
            for sender, snap in message.senders.items()}}
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_gm(data: bytes) -> GMMessage:
    doc = json.loads(data)
    if "a" in doc:
        return Activity(int(doc["a"]), [
            Entry(sender, [Pub(int(s), int(v), p) for s, v, p in pubs], int(ack))
            for sender, pubs, ack in doc["e"]])
    return CatchUp(int(doc["c"]), {
        sender: SenderSnapshot(tuple(Pub(int(s), int(v), p) for s, v, p in pending),
                               int(last_pub), int(last_ack))
        for sender, (pending, last_pub, last_ack) in doc["s"].items()})
