"""The broker's decoder of method arguments and field tables (cluster/amqp/fields.py):
valid input decodes to what pamqp decodes it to; nesting stops at MAX_DEPTH whatever
the stack; every length must stay within its container."""

from __future__ import annotations

import datetime
import decimal
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pamqp import commands, decode, encode, frame

from cluster.amqp import fields, framing
from cluster.amqp.errors import ConnectionError_
from harness.hostile import methods, wire
from tests.examples import examples

# basic.recover-async: deprecated, decoded all the same.
pytestmark = pytest.mark.filterwarnings("ignore:This command is deprecated:DeprecationWarning")

scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.floats(allow_nan=False, width=32),  # pamqp encodes floats in 32 bits
    st.text(max_size=20),
    st.binary(max_size=20).map(bytearray),  # byte arrays: pamqp encodes no bytes
    st.decimals(allow_nan=False, allow_infinity=False, places=2,
                min_value=decimal.Decimal(-(10**6)), max_value=decimal.Decimal(10**6)),
    st.datetimes(min_value=datetime.datetime(1970, 1, 2), max_value=datetime.datetime(2100, 1, 1),
                 timezones=st.just(datetime.UTC)),
    st.none(),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=30)
tables = st.dictionaries(st.text(max_size=8), values, max_size=6)


@settings(max_examples=examples(300), deadline=None)
@given(tables)
def test_valid_tables_decode_as_pamqp_decodes_them(table: dict[str, Any]) -> None:
    raw = encode.field_table(table)
    ours, end = fields.read_table(raw, 0, len(raw))
    assert (end, ours) == decode.field_table(raw)


@pytest.mark.parametrize("name", methods.ALL)
def test_every_method_decodes_as_pamqp_decodes_it(name: str) -> None:
    payload = frame.marshal(methods.build(name), 1)[7:-1]
    ours = framing.decode_method(payload)
    theirs = methods.build(name)
    theirs.unmarshal(payload[4:])
    if isinstance(ours, framing.Publish | framing.Ack):  # the fast paths: what they read
        assert all(getattr(ours, key) == getattr(theirs, key) for key in ours.__slots__)
    else:
        assert (type(ours), dict(ours)) == (type(theirs), dict(theirs))


@settings(max_examples=examples(100), deadline=None)
@given(st.booleans(), st.booleans(), st.booleans(), tables,
       st.text(alphabet="abcdefghijklmnopqrstuvwxyz.-_", max_size=40))
def test_declare_arguments_and_flags_decode_as_pamqp_decodes_them(
        durable: bool, exclusive: bool, nowait: bool, arguments: dict[str, Any],
        name: str) -> None:
    method = commands.Queue.Declare(queue=name, durable=durable, exclusive=exclusive,
                                    nowait=nowait, arguments=arguments)
    payload = frame.marshal(method, 1)[7:-1]
    theirs = commands.Queue.Declare()
    theirs.unmarshal(payload[4:])
    ours = framing.decode_method(payload)
    assert isinstance(ours, commands.Queue.Declare) and dict(ours) == dict(theirs)


def _deep(kinds: bytes) -> bytes:
    return wire.nested(kinds, b"\x01kV" if kinds[-1:] != b"A" else b"V")


@pytest.mark.parametrize("kind", [b"F", b"A", b"FA"])
def test_nesting_up_to_the_limit_decodes_and_one_more_level_is_refused(kind: bytes) -> None:
    deepest = (kind * fields.MAX_DEPTH)[: fields.MAX_DEPTH]
    table, _ = fields.read_table(_deep(deepest), 0, len(_deep(deepest)))
    assert table
    too_deep = _deep(deepest + b"F")
    with pytest.raises(ValueError, match=fields.TOO_DEEP):
        fields.read_table(too_deep, 0, len(too_deep))


def test_thousands_of_levels_are_refused_without_recursing() -> None:
    """Refused at the limit, not at Python's recursion limit: the same at any depth of
    the caller's stack."""
    deep = _deep(b"F" * 5000)

    def at_depth(levels: int) -> None:
        if levels:
            at_depth(levels - 1)
            return
        with pytest.raises(ValueError, match=fields.TOO_DEEP):
            fields.read_table(deep, 0, len(deep))

    at_depth(700)


@pytest.mark.parametrize("raw, reason", [
    (struct.pack(">I", 10) + b"\x01kV", "length 10 runs past"),
    (wire.table([wire.entry("k", b"S", struct.pack(">I", 99) + b"ab")]), "runs past"),
    (wire.table([wire.entry("k", b"I", b"\x00\x00")]), "runs past"),
    (wire.table([b"\x05ab"]), "entry runs past"),
    (wire.table([wire.entry("k", b"Z", b"")]), "unknown field value type"),
    # An inner table longer than what is left of the outer one.
    (wire.table([wire.entry("t", b"F", struct.pack(">I", 4) + b"\x01kV")]), "runs past"),
])
def test_lengths_and_types_must_hold(raw: bytes, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        fields.read_table(raw, 0, len(raw))


def test_an_entry_may_not_take_its_value_from_past_the_table() -> None:
    """pamqp read a key at a table's last octet and its value from what followed."""
    raw = struct.pack(">I", 2) + b"\x01k" + b"t\x01"
    with pytest.raises(ValueError, match="entry runs past"):
        fields.read_table(raw, 0, len(raw))


def test_malformed_arguments_are_a_frame_error_naming_the_method() -> None:
    payload = struct.pack(">HH", 50, 10) + b"\x00\x00" + wire.short("q") + b"\x00" + struct.pack(
        ">I", 1000)
    with pytest.raises(ConnectionError_) as caught:
        framing.decode_method(payload)
    assert (caught.value.code, caught.value.class_id, caught.value.method_id) == (501, 50, 10)
    assert "malformed method class 50 method 10" in caught.value.text


def test_a_header_with_headers_too_deep_is_a_syntax_error() -> None:
    headers = _deep(b"F" * (fields.MAX_DEPTH + 1))
    payload = struct.pack(">HHQH", 60, 0, 1, 0x2000) + headers
    with pytest.raises(ConnectionError_) as caught:
        framing.decode_content_header(payload)
    assert caught.value.code == 502 and fields.TOO_DEEP in caught.value.text
