"""A seeded generator of hostile inputs for the broker's AMQP front door.

Each input is a handshake prefix (none, or up to a given step) and then the hostile
bytes, and names what the broker must answer (`harness.hostile.expect`). Input ``i`` of
seed ``s`` comes from its own random stream, so any input can be rebuilt alone. The
classes live in `frames`, `login`, `content`, `tables` and `noise`.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.hostile import content, frames, login, noise, tables, wire
from harness.hostile.context import STAGE_REPLIES, Builder, Built, Context, Limits, close
from harness.hostile.expect import ANY, FRAME_ERROR, Expect, HostileInput

__all__ = ["Generator", "Limits"]


# -- field tables: a class per kind of table and place it goes --------------------------

def _table_class(make: Callable[[Context, str], tables.Table]) -> Callable[[str], Builder]:
    def for_location(location: str) -> Builder:
        def build(ctx: Context) -> Built:
            placed = tables.LOCATIONS[location](make(ctx, location), ctx.name)
            if max(wire.frame_sizes(placed.data)) + 8 > ctx.limit(placed.stage):
                # Too large to be decoded at all: a frame error, and no answer to it.
                return close(placed.stage, placed.data, FRAME_ERROR, "exceeds frame_max")
            return placed
        return build
    return for_location


# Room left for a table in a frame of the largest size (other arguments take the rest).
TABLE_OVERHEAD = 300


def _room(ctx: Context, location: str) -> int:
    stage = "header" if location in ("client-properties", "amqplain") else "open"
    return ctx.limit(stage) - TABLE_OVERHEAD


deep_table = _table_class(lambda ctx, location: tables.deep(ctx.rng))
wide_table = _table_class(lambda ctx, location: tables.wide(ctx.rng, _room(ctx, location)))
lying_table = _table_class(lambda ctx, location: tables.lying(
    ctx.rng, nested_only=location == "amqplain"))
bad_table_value = _table_class(lambda ctx, location: tables.bad_value(ctx.rng))


# -- the classes ------------------------------------------------------------------------

# Weights per location (8 of them). Wide tables are few: the broker takes milliseconds
# to decode one.
TABLE_KINDS = {"deep-table": (deep_table, 3), "wide-table": (wide_table, 0.3),
               "lying-table": (lying_table, 2), "bad-table-value": (bad_table_value, 1)}

CLASSES: dict[str, tuple[Builder, float]] = {
    "frame-over-max": (frames.frame_over_max, 4),
    "bad-frame-end": (frames.bad_frame_end, 4),
    "unknown-frame-type": (frames.unknown_frame_type, 3),
    "truncated-frame": (frames.truncated_frame, 4),
    "heartbeat-on-channel": (frames.heartbeat_on_channel, 2),
    "content-on-channel-0": (frames.content_on_channel_zero, 2),
    "frame-before-open": (frames.frame_before_open, 3),
    "short-method": (frames.short_method, 2),
    "unknown-method": (frames.unknown_method, 3),
    "truncated-arguments": (frames.truncated_arguments, 6),
    "bad-utf8": (frames.bad_utf8, 3),
    "out-of-turn": (frames.out_of_turn, 4),
    "unopened-channel": (frames.unopened_channel, 3),
    "second-channel-open": (frames.second_channel_open, 1),
    "server-only-method": (frames.server_only_method, 3),
    "unknown-mechanism": (login.unknown_mechanism, 2),
    "malformed-plain": (login.malformed_plain, 2),
    "wrong-password": (login.wrong_password, 2),
    "tune-ok-out-of-range": (login.tune_ok_out_of_range, 2),
    "unknown-vhost": (login.unknown_vhost, 2),
    "bad-protocol-header": (login.bad_protocol_header, 3),
    "content-out-of-place": (content.content_out_of_place, 8),
    "body-shorter": (content.body_shorter, 2),
    "body-over-max-size": (content.body_over_max_size, 3),
    "malformed-content-header": (content.malformed_content_header, 4),
    **{f"{kind}/{location}": (make(location), weight)
       for kind, (make, weight) in TABLE_KINDS.items() for location in tables.LOCATIONS},
    "random-bytes": (noise.random_bytes, 6),
    "random-mutation": (noise.random_mutation, 12),
    "served": (noise.served, 2),
    "multibyte-reply-text": (frames.multibyte_reply_text, 2),
    "unusual-names": (frames.unusual_names, 2),
    "typed-arguments": (frames.typed_arguments, 2),
}
# Class names and their cumulative weights, for the draw.
NAMES = list(CLASSES)
CUMULATIVE_WEIGHTS = list(itertools.accumulate(CLASSES[name][1] for name in NAMES))


@dataclass(frozen=True)
class Generator:
    seed: int
    limits: Limits = field(default_factory=Limits)

    def input(self, index: int, kind: str | None = None) -> HostileInput:
        """Input ``index``; ``kind`` forces its class (the draw is then skipped)."""
        rng = random.Random(f"hostile:{self.seed}:{index}")
        if kind is None:
            kind = rng.choices(NAMES, cum_weights=CUMULATIVE_WEIGHTS)[0]
        build, _ = CLASSES[kind]
        ctx = Context(rng, self.limits, f"hostile-{self.seed}-{index}",
                      rng.choice([0, 4096, 8192, 16384, 65536, self.limits.frame_max]))
        built = build(ctx)
        expect = built.expect
        if expect.ending != ANY:
            expect = Expect(expect.ending, expect.code, expect.text,
                            STAGE_REPLIES[built.stage] + expect.replies)
        return HostileInput(kind, self.seed, index, ctx.prefix(built.stage), built.data,
                            expect, built.stage)
