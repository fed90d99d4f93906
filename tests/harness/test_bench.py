"""`mirrorchaos bench`: statistics, confirm bookkeeping, report shape and CLI errors.

Nothing here needs a broker; the end-to-end run lives with the broker fixtures.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pamqp import commands

from cluster.amqp import framing
from faults.ports import free_port
from harness.bench import client, command, confirms, stages, stats
from harness.bench.url import AmqpUrl, parse_amqp_url
from reports import cli


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # unsorted on purpose
    assert stats.percentile(values, 50) == 50.0
    assert stats.percentile(values, 99) == 99.0
    assert stats.percentile(values, 100) == 100.0
    assert stats.percentile(values, 0) == 1.0
    assert stats.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert stats.percentile([7.5], 99) == 7.5


@pytest.mark.parametrize("values, q", [([], 50.0), ([1.0], -1.0), ([1.0], 100.5)])
def test_percentile_rejects_bad_input(values: list[float], q: float) -> None:
    with pytest.raises(ValueError):
        stats.percentile(values, q)


def test_ratios_divide_by_the_first_url() -> None:
    first = {"throughput_transient": 2000.0, "latency_p99_ms_transient": 4.0, "only_first": 1.0}
    other = {"throughput_transient": 2240.0, "latency_p99_ms_transient": 2.0, "only_other": 9.0}
    assert stats.ratios(first, other) == {
        "throughput_transient": 1.12,
        "latency_p99_ms_transient": 0.5,
    }


def test_ratio_against_a_zero_reference_is_null() -> None:
    assert stats.ratios({"latency_p50_ms_transient": 0.0}, {"latency_p50_ms_transient": 1.0}) == {
        "latency_p50_ms_transient": None
    }


def test_parse_amqp_url_defaults_and_vhost() -> None:
    url = parse_amqp_url("amqp://127.0.0.1")
    assert url == AmqpUrl("127.0.0.1", 5672, "guest", "guest", "/")
    assert parse_amqp_url("amqp://h:1/%2F").vhost == "/"
    assert parse_amqp_url("amqp://h:1/").vhost == "/"
    named = parse_amqp_url("amqp://u%40x:p%2Fw@h:5682/a%2Fb")
    assert (named.user, named.password, named.port, named.vhost) == ("u@x", "p/w", 5682, "a/b")


def test_displayed_url_hides_the_password() -> None:
    url = parse_amqp_url("amqp://bob:s3cret@localhost:5999/prod")
    assert url.display == "amqp://bob:***@localhost:5999/prod"
    assert "s3cret" not in str(client.BrokerError(url.display, "refused"))


@pytest.mark.parametrize("text", ["http://h/", "amqps://h/", "amqp:///vhost", "amqp://h:99999/"])
def test_parse_amqp_url_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_amqp_url(text)


async def test_confirm_run_settles_single_multiple_and_nacked_tags() -> None:
    run = confirms.ConfirmRun(first_tag=11, count=5, loop=asyncio.get_running_loop())
    run.mark_sent(5, now=1.0)
    run.settle(13, multiple=False, ack=True, now=1.5)  # out of order, single
    assert (run.confirmed, run.outstanding) == (1, 4)
    run.settle(12, multiple=True, ack=True, now=2.0)  # covers 11 and 12
    assert (run.confirmed, run.outstanding) == (3, 2)
    run.settle(14, multiple=False, ack=False, now=2.0)
    run.settle(5, multiple=False, ack=True, now=2.0)  # a tag from before the run
    assert not run.finished.done()
    run.settle(15, multiple=True, ack=True, now=3.0)  # 13 and 14 already settled
    assert run.finished.done()
    assert (run.confirmed, run.nacked) == (4, 1)
    assert sorted(run.latencies) == [0.5, 1.0, 1.0, 2.0]


class _FakeStage:
    """A stage with fixed figures per URL, to check the report without a broker."""

    name = "fake"

    def __init__(self, by_port: dict[int, dict[str, float]]) -> None:
        self.by_port = by_port

    def figures(self, workload: stages.Workload) -> dict[str, stages.Figure]:
        return {"throughput_transient": stages.Figure("msg/s", "higher")}

    async def measure(
        self, target: stages.TargetResult, ctx: stages.BenchContext
    ) -> dict[str, Any]:
        target.figures.update(self.by_port[target.url.port])
        return {"seen_targets": len(ctx.results)}


async def test_report_shape_has_ratios_for_every_url_after_the_first() -> None:
    urls = [parse_amqp_url(f"amqp://127.0.0.1:{p}") for p in (1, 2, 3)]
    stage = _FakeStage(
        {
            1: {"throughput_transient": 100.0},
            2: {"throughput_transient": 150.0},
            3: {"throughput_transient": 50.0},
        }
    )
    report = await command.run_bench(urls, stages.Workload(), stages=[stage])
    assert report["client"]["name"] == client.CLIENT_NAME
    assert report["figures"] == {"throughput_transient": {"unit": "msg/s", "better": "higher"}}
    first, second, third = report["results"]
    assert "ratio_vs_first" not in first
    assert second["ratio_vs_first"] == {"throughput_transient": 1.5}
    assert third["ratio_vs_first"] == {"throughput_transient": 0.5}
    assert first["details"] == {"fake": {"seen_targets": 3}}
    assert first["url"] == "amqp://guest:***@127.0.0.1:1/"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench"], "--amqp-url"),
        (["bench", "--amqp-url", "http://h/"], "only amqp://"),
        (["bench", "--amqp-url", "amqp://h", "--messages", "0"], "at least 1"),
        (["bench", "--amqp-url", "amqp://h", "--window", "x"], "not a whole number"),
        (["bench", "--amqp-url", "amqp://h", "--size", "-1"], "must not be negative"),
        (["bench", "--amqp-url", "amqp://h", "--rate", "0"], "positive number"),
        (["bench", "--amqp-url", "amqp://h", "--rate", "nan"], "positive number"),
        (["bench", "--amqp-url", "amqp://h", "--delivery", "lazy"], "invalid choice"),
    ],
)
def test_bench_argument_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_no_subcommand_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "bench" in capsys.readouterr().err


def test_unreachable_url_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    assert cli.main(["bench", "--amqp-url", f"amqp://u:pw@127.0.0.1:{port}/"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert f"amqp://u:***@127.0.0.1:{port}/: cannot connect" in err
    assert "Traceback" not in err


def test_confirm_gaps_find_the_failover_pause_and_the_first_confirm_after_the_kill() -> None:
    times = [0.0, 0.01, 0.02, 0.03, 0.25, 0.26, 0.27]
    gaps = stats.confirm_gaps(times, kill_at=0.05)
    assert gaps.longest == pytest.approx(0.22)
    assert gaps.longest_before_kill == pytest.approx(0.01)
    assert gaps.kill_to_first_confirm == pytest.approx(0.20)


def test_confirm_gaps_with_no_confirm_after_the_kill_and_bad_input() -> None:
    gaps = stats.confirm_gaps([0.0, 0.5, 0.6], kill_at=1.0)
    assert (gaps.longest, gaps.kill_to_first_confirm) == (0.5, None)
    assert gaps.longest_before_kill == 0.5
    with pytest.raises(ValueError):
        stats.confirm_gaps([], kill_at=0.0)
    with pytest.raises(ValueError):
        stats.confirm_gaps([0.2, 0.1], kill_at=0.0)


async def test_confirm_run_knows_which_tags_were_acked_and_when() -> None:
    run = confirms.ConfirmRun(first_tag=1, count=4, loop=asyncio.get_running_loop())
    run.mark_sent(4, now=0.0)
    run.settle(2, multiple=True, ack=True, now=1.0)
    run.settle(3, multiple=False, ack=False, now=2.0)
    run.settle(4, multiple=False, ack=True, now=3.0)
    assert run.acked_indices() == [0, 1, 3]
    assert run.ack_times == [1.0, 3.0]  # the nack is no confirm


async def test_numbered_publishes_carry_their_delivery_tag_in_the_body() -> None:
    conn = client.LeanConnection(parse_amqp_url("amqp://127.0.0.1:1"))
    sent: list[bytes] = []
    conn._transport = type("T", (), {"write": lambda self, data: sent.append(data)})()
    frames = conn.numbered_publish_frames("q", 20, persistent=True)
    conn.begin_run(2, None)
    conn.publish_numbered(frames, 2)
    data = sent[0]
    assert len(data) == 2 * len(conn.publish_frames("q", b"x" * 20, True))
    one = len(data) // 2
    for i, message in enumerate((data[:one], data[one:])):
        body = message[-21:-1]  # the body frame's payload, before the frame-end octet
        assert body == (i + 1).to_bytes(8, "big") + b"x" * 12



class _Transport:
    """What the lean client writes, and whether it closed the socket."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def close(self) -> None:
        self.closed = True


def _reading_client() -> tuple[client.LeanConnection, _Transport]:
    conn = client.LeanConnection(parse_amqp_url("amqp://127.0.0.1:1"))
    transport = _Transport()
    conn._transport = transport  # type: ignore[assignment]
    return conn, transport


async def test_confirms_split_anywhere_settle_the_run_and_refill() -> None:
    conn, _ = _reading_client()
    refills: list[int] = []
    run = conn.begin_run(4, lambda: refills.append(run.confirmed))
    run.mark_sent(4, now=0.0)
    stream = (framing.confirm_frame(1, 2, multiple=True)
              + framing.confirm_frame(1, 3, multiple=False, ack=False)
              + framing.confirm_frame(1, 4, multiple=False))
    for start in range(0, len(stream), 5):  # cut inside frames, as TCP may
        conn.data_received(stream[start : start + 5])
    assert (run.confirmed, run.nacked, run.finished.done()) == (3, 1, True)
    assert refills and refills[-1] == 3


async def test_a_broker_refusing_the_protocol_or_sending_a_bad_frame_fails_the_client() -> None:
    conn, transport = _reading_client()
    conn.data_received(b"AMQP\x00\x00\x09\x01")
    assert conn.closed and transport.closed
    assert "rejected AMQP 0-9-1" in conn.error_text
    conn, transport = _reading_client()
    run = conn.begin_run(1, None)
    run.mark_sent(1, now=0.0)
    bad = bytearray(framing.confirm_frame(1, 1, multiple=False))
    bad[-1] = 0
    conn.data_received(framing.confirm_frame(1, 1, multiple=False) + bytes(bad))
    assert run.confirmed == 1  # the frame before the bad one is read first
    assert conn.error_text == "malformed frame from broker"


async def test_a_broker_close_is_answered_and_fails_the_client() -> None:
    conn, transport = _reading_client()
    close = commands.Connection.Close(320, "CONNECTION_FORCED - bye", 0, 0)
    conn.data_received(framing.method_frame(0, close))
    assert transport.sent == [framing.method_frame(0, commands.Connection.CloseOk())]
    assert conn.error_text == "broker closed the connection: 320 CONNECTION_FORCED - bye"

@pytest.mark.parametrize(
    "extra, message",
    [
        (["--stage", "failover", "--rate", "10"], "needs --master-url and --kill-command"),
        (
            [
                "--stage",
                "failover",
                "--rate",
                "10",
                "--master-url",
                "amqp://h",
                "--kill-command",
                "k",
            ],
            "the master that is killed",
        ),
        (
            ["--master-url", "amqp://a", "--master-url", "amqp://b", "--master-url", "amqp://c"],
            "once per --amqp-url",
        ),
        (["--stage", "latency"], "needs --rate"),
    ],
)
def test_bench_failover_argument_errors(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--amqp-url", "amqp://h", "--amqp-url", "amqp://h:2", *extra])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
