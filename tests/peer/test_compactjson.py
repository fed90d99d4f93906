"""The peer protocol's JSON: the json module's own, compact, with its C parts built once
(and the module's pure-Python encoder where the accelerator is missing)."""

from __future__ import annotations

import json
from json import encoder
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.peer import compactjson

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@given(JSON)
def test_a_value_is_written_as_json_dumps_writes_it_compactly_and_read_back(value: Any) -> None:
    text = compactjson.dumps(value)
    assert text == json.dumps(value, separators=(",", ":"))
    assert compactjson.loads(text) == value


def test_tuples_are_lists_and_the_default_turns_the_rest_into_json() -> None:
    dumps = compactjson.make_encoder(lambda value: {"$set": sorted(value)})
    assert dumps([(1, "a"), {3, 2}]) == '[[1,"a"],{"$set":[2,3]}]'
    with pytest.raises(TypeError, match="bytes is not JSON"):
        compactjson.dumps({"a": b"x"})


def test_the_object_hook_sees_every_object_inside_out() -> None:
    seen = []

    def hook(obj: dict[str, Any]) -> Any:
        seen.append(obj)
        return len(obj)

    assert compactjson.make_decoder(hook)('{"a":{"b":1,"c":2},"d":[{}]}') == 2
    assert seen == [{"b": 1, "c": 2}, {}, {"a": 2, "d": [0]}]


@pytest.mark.parametrize(("text", "says"), [
    ("", "Expecting value"),
    ("[1,", "Expecting value"),
    ("{} {}", "Extra data"),
    ('{"a":1}x', "Extra data"),
    ("nope", "Expecting value"),
])
def test_what_is_not_one_json_value_is_a_decode_error(text: str, says: str) -> None:
    with pytest.raises(json.JSONDecodeError, match=says):
        compactjson.loads(text)


def test_without_the_accelerator_the_module_encoder_writes_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encoder, "c_make_encoder", None)
    dumps = compactjson.make_encoder()
    assert dumps({"t": "gm", "q": ["/", "a"], "n": 1.5}) == '{"t":"gm","q":["/","a"],"n":1.5}'
