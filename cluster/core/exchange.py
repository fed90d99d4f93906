"""Exchanges and their bindings: direct, fanout and topic routing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cluster.breakages import CORRECT, Breaks

EXCHANGE_TYPES = ("direct", "fanout", "topic")


@dataclass(frozen=True, slots=True)
class Binding:
    queue: str
    routing_key: str


def _topic_subject(routing_key: str) -> str:
    """What `topic_regex` patterns match: ``"." + routing_key``, or ``""`` for the empty
    key, which is zero words (as in RabbitMQ), not one empty word."""
    return "." + routing_key if routing_key else ""


def topic_regex(pattern: str, hash_needs_a_word: bool = False) -> re.Pattern[str]:
    """AMQP topic pattern → regex over `_topic_subject`: each pattern word consumes its
    own leading dot, so ``#`` (zero or more words) needs no special cases.
    ``hash_needs_a_word`` is the planted bug of that name (docs/planted-bugs.md)."""
    if not pattern:
        return re.compile(r"\Z")  # zero words: only the empty routing key
    words = []
    for word in pattern.split("."):
        if word == "#":
            words.append(r"(?:\.[^.]*)+" if hash_needs_a_word else r"(?:\.[^.]*)*")
        elif word == "*":
            words.append(r"\.[^.]*")
        else:
            words.append(r"\." + re.escape(word))
    return re.compile("".join(words) + r"\Z")


@dataclass(eq=False)
class Exchange:
    name: str
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.bindings: set[Binding] = set()
        self._topic_cache: dict[tuple[str, bool], re.Pattern[str]] = {}

    def bind(self, queue: str, routing_key: str) -> None:
        self.bindings.add(Binding(queue, routing_key))

    def unbind(self, queue: str, routing_key: str) -> bool:
        binding = Binding(queue, routing_key)
        if binding in self.bindings:
            self.bindings.remove(binding)
            return True
        return False

    def unbind_queue(self, queue: str) -> None:
        self.bindings = {b for b in self.bindings if b.queue != queue}

    def route(self, routing_key: str, breaks: Breaks = CORRECT) -> set[str]:
        """Names of the queues a message with this routing key goes to. ``breaks``: the
        planted bugs of routing a node runs with (docs/planted-bugs.md)."""
        if self.type == "fanout":
            if breaks.fanout_one_queue and self.bindings:
                return {min(b.queue for b in self.bindings)}
            return {b.queue for b in self.bindings}
        if self.type == "direct":
            matched = {b.queue for b in self.bindings if b.routing_key == routing_key}
            return {min(matched)} if breaks.direct_one_queue and matched else matched
        matched = set()
        for binding in self.bindings:
            key = (binding.routing_key, breaks.topic_hash_needs_a_word)
            regex = self._topic_cache.get(key)
            if regex is None:
                regex = self._topic_cache[key] = topic_regex(*key)
            if regex.match(_topic_subject(routing_key)):
                matched.add(binding.queue)
        return matched
