"""Hostile input at the broker's AMQP front door, in memory (harness/hostile): deep,
wide, lying and mistyped field tables wherever a client can put one, frames too large,
cut short, of unknown type or with a wrong end octet, content out of place or over
max_message_size, protocol headers not ours, and random bytes and mutations anywhere.

No exception may escape the connection (the node would log a traceback and answer
541); every close carries a reply code the input may get and a reply text; each input
class gets exactly the answer `SPEC` names; and a well-behaved client on the same
broker gets every confirm and message throughout. A failure names the input's class,
seed and index: ``scripts/fuzz-hostile --seed S --replay I`` replays it alone.
"""

from __future__ import annotations

import pytest
from pamqp import commands, frame
from pamqp.base import Frame as Method

from harness.hostile import tables
from harness.hostile.expect import (
    ANY,
    CHANNEL_CLOSE,
    CLOSE,
    HANG_UP,
    HEADER,
    SERVED,
    WAITING,
    Expect,
)
from harness.hostile.inputs import CLASSES, TABLE_KINDS, Generator
from harness.hostile.judge import Answer, judge
from harness.hostile.memory import MemoryRun
from harness.hostile.tally import Tally, describe

pytestmark = pytest.mark.filterwarnings("ignore:This command is deprecated:DeprecationWarning")

SEED = 20261127
INPUTS = 3000  # the default run: a few seconds
MANY_INPUTS = 200_000  # the slow run: minutes
PER_CLASS = 15

# A table breaking the decoding rules is refused with its frame's code: 501 for method
# arguments, 403 for an AMQPLAIN login response, 502 for a message's headers.
REFUSAL = {location: 501 for location in tables.LOCATIONS} | {"amqplain": 403, "headers": 502}

# What each input class must get: (ending, reply code).
SPEC: dict[str, set[tuple[str, int]]] = {
    "frame-over-max": {(CLOSE, 501)},
    "bad-frame-end": {(CLOSE, 501)},
    "unknown-frame-type": {(CLOSE, 501)},
    "truncated-frame": {(WAITING, 0)},
    "heartbeat-on-channel": {(CLOSE, 505)},
    "content-on-channel-0": {(CLOSE, 505)},
    "frame-before-open": {(CLOSE, 504)},
    "short-method": {(CLOSE, 501)},
    "unknown-method": {(CLOSE, 502)},
    "truncated-arguments": {(CLOSE, 501)},
    "bad-utf8": {(CLOSE, 501)},
    # A connection method out of turn, or on a channel: 503; another class's on channel 0: 504.
    "out-of-turn": {(CLOSE, 503), (CLOSE, 504)},
    # A method on a channel never opened: 504; a content frame there: 505.
    "unopened-channel": {(CLOSE, 504), (CLOSE, 505)},
    "second-channel-open": {(CLOSE, 504)},
    "server-only-method": {(CLOSE, 503)},
    "unknown-mechanism": {(CLOSE, 503)},
    "malformed-plain": {(CLOSE, 403)},
    # A client with authentication_failure_close gets 403, others a hung-up socket.
    "wrong-password": {(CLOSE, 403), (HANG_UP, 0)},
    "tune-ok-out-of-range": {(CLOSE, 530)},
    "unknown-vhost": {(CLOSE, 530)},
    "bad-protocol-header": {(HEADER, 0)},
    "content-out-of-place": {(CLOSE, 505)},
    "body-shorter": {(WAITING, 0)},
    "body-over-max-size": {(CHANNEL_CLOSE, 406)},
    "malformed-content-header": {(CLOSE, 502)},
    "random-bytes": {(ANY, 0)},
    "random-mutation": {(ANY, 0)},
    "served": {(SERVED, 0)},
    # A name of two-octet characters echoed in the reply text, cut to 255 octets.
    "multibyte-reply-text": {(CLOSE, 503), (CLOSE, 530), (CHANNEL_CLOSE, 404)},
    # Names RabbitMQ takes but pamqp's reply constructors refuse, echoed in replies.
    "unusual-names": {(SERVED, 0)},
    # Arguments of types JSON lacks in durable declarations, saved in definitions.json.
    "typed-arguments": {(SERVED, 0)},
}
for _location, _code in REFUSAL.items():
    # Too large for its frame, any table is a frame error first.
    SPEC[f"deep-table/{_location}"] = {(SERVED, 0), (CLOSE, _code), (CLOSE, 501)}
    SPEC[f"wide-table/{_location}"] = {(SERVED, 0)}
    SPEC[f"lying-table/{_location}"] = {(CLOSE, _code), (CLOSE, 501)}
    SPEC[f"bad-table-value/{_location}"] = {(CLOSE, _code), (CLOSE, 501)}


def _assert_clean(tally: Tally) -> None:
    """No traceback and no wrong answer."""
    findings = describe(tally.findings)
    assert not tally.tracebacks, f"tracebacks: {dict(tally.tracebacks)}\n{findings}"
    assert not tally.problems, f"{tally.problems} wrong answers:\n{findings}"
    assert not tally.polite_problems, tally.polite_problems
    assert tally.polite_published > 0
    assert tally.polite_confirmed == tally.polite_delivered == tally.polite_published


def test_spec_names_every_class() -> None:
    assert set(SPEC) == set(CLASSES)
    assert {kind.split("/")[0] for kind in SPEC if "/" in kind} == set(TABLE_KINDS)


@pytest.mark.parametrize("kind", sorted(SPEC))
def test_each_class_gets_the_answer_its_spec_names(kind: str) -> None:
    generator = Generator(SEED)
    for index in range(PER_CLASS):
        expect = generator.input(index, kind).expect
        assert (expect.ending, expect.code) in SPEC[kind], (index, expect)
    tally = MemoryRun(generator, kind=kind).run(0, PER_CLASS)
    assert tally.by_class == {kind: PER_CLASS}
    _assert_clean(tally)


def test_thousands_of_hostile_inputs_in_memory() -> None:
    tally = MemoryRun(Generator(SEED)).run(0, INPUTS)
    assert tally.inputs == INPUTS
    _assert_clean(tally)
    # The frame-level checks, the handshake's and the channels' were all reached.
    for code in (403, 501, 502, 503, 504, 505, 530):
        assert tally.by_outcome[f"connection.close {code}"] > 0, tally.by_outcome
    assert tally.by_outcome["channel.close 406"] > 0
    assert tally.by_outcome["protocol header"] > 0


@pytest.mark.slow
@pytest.mark.timeout(1800)  # minutes on one core
def test_hundreds_of_thousands_of_hostile_inputs_in_memory() -> None:
    tally = MemoryRun(Generator(SEED + 1)).run(0, MANY_INPUTS)
    _assert_clean(tally)


# -- the judge fails wrong answers ------------------------------------------------------

def _answer(*methods: tuple[int, Method]) -> Answer:
    answer = Answer()
    answer.feed(b"".join(frame.marshal(method, channel) for channel, method in methods))
    return answer


def _close(code: int, text: str = "REPLY - text") -> tuple[int, Method]:
    return 0, commands.Connection.Close(reply_code=code, reply_text=text, class_id=0,
                                        method_id=0)


def test_the_judge_accepts_the_right_close() -> None:
    assert judge(Expect(CLOSE, 501, "text"), _answer(_close(501)), closed=False) == []


@pytest.mark.parametrize("answer, expect, problem", [
    (_answer(_close(541)), Expect(ANY), "code 541"),  # an internal error
    (_answer(_close(320)), Expect(ANY), "code 320"),  # forced
    (_answer(_close(501, "")), Expect(ANY), "without a reply text"),
    (_answer(_close(502)), Expect(CLOSE, 501), "got 502"),  # the wrong code
    (_answer(_close(501, "other")), Expect(CLOSE, 501, "text"), "got 501 'other'"),
    (_answer(), Expect(CLOSE, 501), "got none"),  # no close at all
    (_answer(_close(501), (1, commands.Channel.OpenOk())), Expect(ANY),
     "frames after connection.close"),
    (_answer(_close(501)), Expect(WAITING), "unexpected connection.close 501"),
    (_answer((1, commands.Channel.Close(reply_code=406, reply_text="PRECONDITION_FAILED",
                                        class_id=0, method_id=0))), Expect(SERVED),
     "unexpected channel.close"),
    (_answer(), Expect(SERVED, replies=((1, "Basic.Ack"),)),
     "expected replies [(1, 'Basic.Ack')]"),  # an answer missing
    (_answer(), Expect(HEADER), "expected our protocol header"),
])
def test_the_judge_fails_wrong_answers(answer: Answer, expect: Expect, problem: str) -> None:
    problems = judge(expect, answer, closed=False)
    assert len(problems) == 1 and problem in problems[0], problems


def test_the_judge_fails_output_that_is_not_amqp() -> None:
    answer = Answer()
    answer.feed(b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x32\x00")  # wrong frame end
    assert judge(Expect(ANY), answer, closed=False)


def test_the_judge_fails_a_connection_closed_that_should_stay_open() -> None:
    assert judge(Expect(WAITING), Answer(), closed=True)
    assert not judge(Expect(WAITING), Answer(), closed=True, live=True)
