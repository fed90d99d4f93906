"""The history format: writer, streaming reader, torn tails and precise errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.checker import check
from harness.history import (
    FORMAT,
    VERSION,
    BadHistory,
    HistoryBuilder,
    HistoryWriter,
    InconsistentHistory,
    read_history,
)

CONFIG = {"nodes": ["n1", "n2"], "partition_handling": "autoheal",
          "queues": {"q": {"members": ["n1", "n2"], "policy": {"ha-mode": "all"}}}}
HEADER = {"format": FORMAT, "version": VERSION, "run_id": "r1", "scenario": "smoke",
          "seed": 7, "time": 1.0, "config": CONFIG}


def _write(path: Path, *lines: Any, tail: str = "") -> Path:
    text = "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines)
    path.write_text(text + tail, encoding="utf-8")
    return path


def _event(**fields: Any) -> dict[str, Any]:
    base = {"time": 2.0, "process": "p1", "op": "publish", "type": "invoke", "msg": "p1-1",
            "queue": "q"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def _error(path: Path) -> BadHistory:
    with pytest.raises(BadHistory) as info:
        list(read_history(path))
    return info.value


def test_writer_output_reads_back_event_for_event(tmp_path: Path) -> None:
    ticks = iter(range(100))
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, run_id="r1", scenario="smoke", seed=7, config=CONFIG,
                       clock=lambda: float(next(ticks)), wall_clock=lambda: 1e9) as w:
        w.append("p1", "publish", "invoke", msg="p1-1", queue="q", node="n1")
        w.append("p1", "confirm", "ok", msg="p1-1")
        w.append("c1", "deliver", "ok", msg="p1-1", queue="q", redelivered=False, mode="ack")
        w.append("nemesis", "fault-start", "ok", fault="kill", fault_id="k1", targets=["n2"])
    history = read_history(path)
    assert history.header.scenario == "smoke" and history.header.seed == 7
    assert history.header.queue("q").members == ("n1", "n2")
    events = list(history)
    assert [(e.op, e.type, e.time) for e in events] == [
        ("publish", "invoke", 1.0), ("confirm", "ok", 2.0), ("deliver", "ok", 3.0),
        ("fault-start", "ok", 4.0)]
    assert (events[0].producer, events[0].seq, events[0].node) == ("p1", 1, "n1")
    assert events[2].mode == "ack" and events[2].redelivered is False
    assert events[3].targets == ("n2",) and events[3].fault == "kill"
    assert history.torn is None


def test_writer_flushes_each_line_as_it_goes(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    w = HistoryWriter(path, run_id="r", scenario="s", seed=1, config=CONFIG)
    w.append("p1", "publish", "invoke", msg="p1-1", queue="q")
    assert len(path.read_text().splitlines()) == 2  # readable before close
    w.close()


def test_writer_refuses_a_line_that_breaks_the_format_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, run_id="r", scenario="s", seed=1, config=CONFIG) as w:
        with pytest.raises(BadHistory, match="field 'msg': expected a message id"):
            w.append("p1", "publish", "invoke", queue="q")
        w.append("p1", "publish", "invoke", msg="p1-1", queue="q")
    assert [e.line for e in read_history(path)] == [2]


def test_writer_refuses_a_bad_configuration(tmp_path: Path) -> None:
    with pytest.raises(BadHistory, match=r"config\.partition_handling"):
        HistoryWriter(tmp_path / "h.jsonl", run_id="r", scenario="s", seed=1,
                      config={"nodes": ["n1"], "partition_handling": "pause-minority"})


def test_a_torn_last_line_is_skipped_and_reported(tmp_path: Path) -> None:
    path = _write(tmp_path / "h.jsonl", HEADER, _event(), tail='{"time": 3.0, "proc')
    history = read_history(path)
    assert [e.line for e in history] == [2]
    assert history.torn is not None and history.torn.line == 3
    assert history.torn.text.startswith('{"time": 3.0')


def test_a_last_line_cut_inside_a_multibyte_character_is_torn(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    cut = json.dumps(_event(time=3.0, error="é"), ensure_ascii=False).encode()[:-3]
    path.write_bytes((json.dumps(HEADER) + "\n" + json.dumps(_event()) + "\n").encode() + cut)
    history = read_history(path)
    assert len(list(history)) == 1 and history.torn is not None


def test_a_complete_last_line_without_newline_is_an_event(tmp_path: Path) -> None:
    path = _write(tmp_path / "h.jsonl", HEADER, tail=json.dumps(_event()))
    history = read_history(path)
    assert len(list(history)) == 1 and history.torn is None


def test_a_torn_history_checks_as_unknown(tmp_path: Path) -> None:
    path = _write(tmp_path / "h.jsonl", HEADER,
                  _event(), _event(op="confirm", type="ok", time=2.5),
                  {"time": 3.0, "process": "c1", "op": "deliver", "type": "ok", "msg": "p1-1",
                   "queue": "q", "redelivered": False},
                  {"time": 4.0, "process": "harness", "op": "drain", "type": "ok"},
                  tail='{"time": 5')
    result = check(read_history(path))
    assert result.valid == "unknown"
    assert "torn line (6)" in (result.error or "")


@pytest.mark.parametrize(("line", "field", "expected"), [
    ("not json", None, "one JSON object per line"),
    ("[1, 2]", None, "a JSON object (an event)"),
    ('{"time": 2.0} {"x": 1}', None, "one JSON object per line"),
    (_event(time="2"), "time", "a finite number"),
    (_event(time=float("nan")), "time", "a finite number"),
    (_event(process=""), "process", "a non-empty string"),
    (_event(op="publsh"), "op", "one of ack, cancel"),
    (_event(op=["x"]), "op", "one of ack, cancel"),
    (_event(type="okay"), "type", "one of invoke, ok, fail, info"),
    (_event(msg="p1"), "msg", "a message id '<producer>-<seq>'"),
    (_event(msg="p1-x"), "msg", "a message id '<producer>-<seq>'"),
    (_event(queue=None), "queue", "a queue name (required for publish)"),
    (_event(op="confirm", msg=None), "msg", "a message id (required for confirm)"),
    (_event(op="deliver", type="ok"), "redelivered", "true or false"),
    (_event(op="deliver", type="info", redelivered=True), "type", "ok"),
    (_event(op="deliver", type="ok", redelivered=False, mode="auto"), "mode", "ack or no-ack"),
    (_event(op="nack", type="ok"), "requeue", "true or false"),
    (_event(op="consume", type="ok", msg=None), "mode", "ack or no-ack"),
    (_event(op="fault-start", type="ok", msg=None), "fault", "a non-empty string"),
    (_event(op="fault-start", type="ok", fault="kill", msg=None), "fault_id", "a non-empty"),
    (_event(op="fault-start", type="ok", fault="kill", fault_id="k", targets="n1"), "targets",
     "a list of names"),
    (_event(op="fault-start", type="ok", fault="policy", fault_id="k"), "definition",
     "the policy definition"),
    (_event(op="fault-start", type="ok", fault="sync", fault_id="s", queue=None), "queue",
     "the queue being synchronised"),
    (_event(op="fault-start", type="ok", fault="partition", fault_id="p", grudge=["n1"]),
     "grudge", "an object of node"),
    (_event(op="promotion", type="ok", process="n1"), "type", "info"),
    (_event(op="node-event", type="info", process="n1", msg=None), "event", "a non-empty"),
    (_event(wall="now"), "wall", "a number"),
])
def test_a_bad_line_is_an_error_naming_line_field_and_expectation(
        tmp_path: Path, line: Any, field: str | None, expected: str) -> None:
    path = _write(tmp_path / "h.jsonl", HEADER, line, _event(time=9.0, msg="p1-9"))
    error = _error(path)
    assert (error.path, error.line, error.field) == (str(path), 2, field)
    assert expected in error.expected
    assert str(error).startswith(f"{path}:2: ")


def test_a_bad_last_line_that_is_complete_is_an_error_not_a_torn_tail(tmp_path: Path) -> None:
    path = _write(tmp_path / "h.jsonl", HEADER, _event(), "{broken")
    assert _error(path).line == 3


def test_invalid_utf8_inside_the_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes((json.dumps(HEADER) + "\n").encode() + b'{"time": 2.0, "x": "\xff"}\n'
                     + (json.dumps(_event(time=3.0)) + "\n").encode())
    error = _error(path)
    assert error.line == 2 and error.expected == "UTF-8 text"


def test_time_going_backwards_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "h.jsonl", HEADER, _event(time=5.0), _event(time=4.0, msg="p1-2"))
    error = _error(path)
    assert (error.line, error.field) == (3, "time")
    assert "lines are in time order" in error.expected


def test_deliveries_and_answers_to_them_may_carry_what_is_no_message_id(
        tmp_path: Path) -> None:
    """A broker may deliver anything (a probe it should have returned): the consumer's
    ack, nack or reject of it names it as delivered."""
    path = _write(tmp_path / "h.jsonl", HEADER,
                  _event(op="deliver", type="ok", msg="garbage", redelivered=False),
                  _event(op="ack", type="ok", msg="garbage"),
                  *(_event(op=op, type="ok", msg="garbage", requeue=True)
                    for op in ("nack", "reject")))
    assert [(ev.msg, ev.producer, ev.seq) for ev in read_history(path)] == [
        ("garbage", None, -1)] * 4


def test_a_publish_of_what_is_no_message_id_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "h.jsonl", HEADER, _event(op="publish", msg="p1-u1"))
    error = _error(path)
    assert (error.line, error.field) == (2, "msg")


def test_a_version_1_file_still_reads(tmp_path: Path) -> None:
    """Version 2 only added ops: what version 1 wrote means the same."""
    path = _write(tmp_path / "h.jsonl", {**HEADER, "version": 1},
                  _event(op="deliver", type="ok", msg="garbage", redelivered=False))
    assert [ev.op for ev in read_history(path)] == ["deliver"]


@pytest.mark.parametrize(("header", "field", "expected"), [
    ({**HEADER, "format": "jepsen"}, "format", "'mirrorchaos-history'"),
    ({**HEADER, "version": 4}, "version", "1 or 2 or 3 (the versions this reader knows)"),
    ({**HEADER, "seed": "7"}, "seed", "an integer"),
    ({**HEADER, "run_id": ""}, "run_id", "a non-empty string"),
    ({**HEADER, "config": {**CONFIG, "nodes": []}}, "config.nodes", "a non-empty list"),
    ({**HEADER, "config": {**CONFIG, "queues": {"q": {"members": ["n9"]}}}},
     "config.queues.q.members", "names from config.nodes"),
    ({**HEADER, "config": {**CONFIG, "queues": {"q": {"durable": "yes"}}}},
     "config.queues.q.durable", "true or false"),
    ({**HEADER, "config": {**CONFIG, "queues": {
        "q": {"policy": {"ha-promote-on-failure": "never"}}}}},
     "config.queues.q.policy.ha-promote-on-failure", "always or when-synced"),
])
def test_a_bad_header_is_an_error_before_any_event_is_read(
        tmp_path: Path, header: dict[str, Any], field: str, expected: str) -> None:
    path = _write(tmp_path / "h.jsonl", header)
    with pytest.raises(BadHistory) as info:
        read_history(path)
    assert (info.value.line, info.value.field) == (1, field)
    assert expected in info.value.expected


def test_empty_missing_and_header_only_torn_files_are_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(BadHistory, match="expected a header line; got 'an empty file'"):
        read_history(empty)
    with pytest.raises(BadHistory, match="expected a readable history file"):
        read_history(tmp_path / "missing.jsonl")
    torn = tmp_path / "torn.jsonl"
    torn.write_text(json.dumps(HEADER)[:20])
    with pytest.raises(BadHistory, match="a complete header line"):
        read_history(torn)


def test_lines_that_contradict_earlier_ones_are_inconsistent(tmp_path: Path) -> None:
    cases = [
        [_event(), _event(time=3.0)],  # the same id published twice
        [_event(op="confirm", type="ok")],  # confirm of a message never published
        [_event(op="fault-end", type="ok", fault="kill", fault_id="k", msg=None)],
        [_event(op="fault-start", type="ok", fault="kill", fault_id="k", msg=None),
         _event(op="fault-start", type="ok", fault="kill", fault_id="k", msg=None, time=3.0)],
    ]
    for number, lines in enumerate(cases):
        path = _write(tmp_path / f"h{number}.jsonl", HEADER, *lines)
        with pytest.raises(InconsistentHistory) as info:
            check(read_history(path))
        assert info.value.line == len(lines) + 1, lines


def test_the_builder_produces_what_the_reader_reads(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.publish("p1-1")
    b.deliver("p1-1")
    b.fault("kill", ["n1"])
    from_file = list(read_history(b.write(tmp_path / "h.jsonl")))
    assert [e.raw for e in from_file] == [e.raw for e in b.build()]


def test_the_documented_example_is_a_valid_history(tmp_path: Path) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "history-format.md").read_text()
    example = doc.split("## Example", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    result = check(read_history(_write(tmp_path / "h.jsonl", example.rstrip("\n"))))
    assert result.valid is True
    assert result.counts["confirmed"] == result.counts["delivered"] == 1
