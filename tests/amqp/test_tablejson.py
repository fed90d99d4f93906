"""Documents holding AMQP field values (queue and exchange arguments) read back from
JSON exactly as written: the same values of the same types."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.amqp import tablejson


def _typed(value: Any) -> Any:
    """A value with the type of every part spelled out (bytes == bytearray, 1 == 1.0
    and True == 1 in Python: equality alone would miss a changed type)."""
    if isinstance(value, dict):
        return ("table", [(key, _typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("array", [_typed(item) for item in value])
    return (type(value).__name__, value)


# Every type pamqp's field-table decoder gives.
SCALARS = (st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
           | st.floats(allow_nan=False) | st.text() | st.binary().map(bytearray)
           | st.binary() | st.decimals(allow_nan=False, allow_infinity=False)
           | st.datetimes(timezones=st.just(datetime.UTC)))
KEYS = st.text(max_size=8) | st.just(tablejson.TAG)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(KEYS, inner, max_size=4), max_leaves=20)


@given(st.dictionaries(KEYS, VALUES, max_size=6))
def test_any_table_reads_back_with_its_types(table: dict[str, Any]) -> None:
    assert _typed(tablejson.loads(tablejson.dumps(table))) == _typed(table)


def test_plain_documents_are_plain_json() -> None:
    document = {"queues": [{"name": "q", "arguments": {"x-max-length": 10}}]}
    assert json.loads(tablejson.dumps(document)) == document
    assert tablejson.loads(json.dumps(document)) == document


def test_types_json_lacks_are_tagged() -> None:
    text = tablejson.dumps({"x-custom": Decimal("1.05"), "x-raw": b"\xff\xfe"})
    assert json.loads(text) == {"x-custom": {tablejson.TAG: "decimal", "value": "1.05"},
                                "x-raw": {tablejson.TAG: "bytes", "value": "//4="}}


@pytest.mark.parametrize("text", [
    '{"__amqp__": "float128", "value": "1"}',  # an unknown type
    '{"__amqp__": "decimal", "value": "1", "extra": 2}',  # more than a tagged value
    '{"__amqp__": "decimal"}',  # no value
])
def test_a_malformed_tagged_value_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a tagged AMQP value"):
        tablejson.loads(text)
