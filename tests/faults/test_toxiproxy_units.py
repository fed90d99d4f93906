"""Pure pieces: slicing, Go-style addresses and request decoding."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faults.toxiproxy.address import AddressError, resolve_tcp_addr, split_host_port
from faults.toxiproxy.errors import ApiError
from faults.toxiproxy.toxics import Latency, Slicer, decode_attributes
from faults.toxiproxy.wire import decode_body


# Properties, not timings: a loaded machine must not fail them on Hypothesis's deadline.
@settings(deadline=None)
@given(
    size=st.integers(min_value=1, max_value=20_000),
    average=st.integers(min_value=-5, max_value=3000),
    variation=st.integers(min_value=-5, max_value=3000),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_slicer_pieces_tile_the_chunk(size: int, average: int, variation: int, seed: int) -> None:
    pieces = Slicer(average_size=average, size_variation=variation).pieces(
        size, random.Random(seed)
    )
    assert pieces[0][0] == 0 and pieces[-1][1] == size
    assert all(start < end for start, end in pieces)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces))


@settings(deadline=None)
@given(
    size=st.integers(min_value=1, max_value=20_000), seed=st.integers(min_value=0, max_value=2**32)
)
def test_slicer_pieces_are_near_the_average(size: int, seed: int) -> None:
    pieces = Slicer(average_size=100, size_variation=20).pieces(size, random.Random(seed))
    assert all(end - start <= 120 for start, end in pieces)
    if size > 120:
        assert all(end - start >= 40 for start, end in pieces)


def test_latency_delay_range() -> None:
    rng = random.Random(1)
    draws = [Latency(latency=100, jitter=30).delay(rng) for _ in range(2000)]
    assert min(draws) == pytest.approx(0.070) and max(draws) == pytest.approx(0.129)
    assert Latency(latency=100).delay(rng) == 0.1


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:80", ("127.0.0.1", "80")),
        ("[::1]:80", ("::1", "80")),
        (":8474", ("", "8474")),
        ("host:", ("host", "")),
    ],
)
def test_split_host_port(address: str, expected: tuple[str, str]) -> None:
    assert split_host_port(address) == expected


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ("local373", "address local373: missing port in address"),
        ("a:b:c", "address a:b:c: too many colons in address"),
        ("[::1", "address [::1: missing ']' in address"),
        ("[::1]x:80", "address [::1]x:80: missing port in address"),
        ("[::1]:80]", "address [::1]:80]: unexpected ']' in address"),
    ],
)
def test_split_host_port_errors(address: str, message: str) -> None:
    with pytest.raises(AddressError) as caught:
        split_host_port(address)
    assert str(caught.value) == message


async def test_resolve_tcp_addr_like_go() -> None:
    assert await resolve_tcp_addr("localhost:80") == "127.0.0.1:80"
    assert await resolve_tcp_addr("[::1]:80") == "[::1]:80"
    assert await resolve_tcp_addr(":80") == ":80"
    assert await resolve_tcp_addr("") == ":0"
    with pytest.raises(AddressError):
        await resolve_tcp_addr("127.0.0.1:99999")


def test_decode_body_reads_one_value_like_go() -> None:
    assert decode_body(b'  {"a": 1} trailing junk') == {"a": 1}
    for raw, message in [(b"", "bad request body: EOF"), (b"  \n", "bad request body: EOF")]:
        with pytest.raises(ApiError) as caught:
            decode_body(raw)
        assert (caught.value.message, caught.value.status) == (message, 400)
    with pytest.raises(ApiError, match="unexpected EOF"):
        decode_body(b'{"a": ')


def test_attributes_merge_like_go_struct_decoding() -> None:
    base = Latency(latency=10, jitter=3)
    assert decode_attributes(base, None) == base
    assert decode_attributes(base, {"jitter": None, "unknown": "x"}) == base
    assert decode_attributes(base, {"JITTER": 4}) == Latency(latency=10, jitter=4)
    for bad in ({"latency": 1.0}, {"latency": True}, {"latency": 2**63}, "10", [1]):
        with pytest.raises(ApiError):
            decode_attributes(base, bad)
