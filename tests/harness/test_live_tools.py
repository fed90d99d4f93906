"""`mirrorchaos bench` and `mirrorchaos demo` against a real node process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pika
import pika.exceptions
import pytest

from faults.ports import free_port
from faults.process.node import NodeProcess
from harness.history import HistoryBuilder
from reports import cli


def test_bench_measures_a_node_and_cleans_up(
    node: NodeProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    code = cli.main([
        "bench", "--amqp-url", node.amqp_url, "--amqp-url", node.amqp_url,
        "--messages", "300", "--warmup", "50", "--repeat", "1", "--window", "32",
        "--json-out", str(out),
    ])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report == json.loads(out.read_text())
    first, second = report["results"]
    for result in (first, second):
        assert result["server"]["product"] == "mirrorchaos"
        figures = result["figures"]
        assert all(value > 0 for value in figures.values())
        for mode in ("persistent", "transient"):
            assert figures[f"latency_p50_ms_{mode}"] <= figures[f"latency_p99_ms_{mode}"]
    assert set(second["ratio_vs_first"]) == set(first["figures"])
    connection = pika.BlockingConnection(pika.URLParameters(node.amqp_url))
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as closed:
        connection.channel().queue_declare("mirrorchaos-bench", passive=True)
    assert closed.value.reply_code == 404
    connection.close()


def test_bench_names_the_url_when_login_is_refused(
    node: NodeProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    url = node.amqp_url.replace("guest:guest", "guest:wrong-secret")
    assert cli.main(["bench", "--amqp-url", url, "--messages", "10", "--repeat", "1"]) == 1
    err = capsys.readouterr().err
    assert "403" in err and "ACCESS_REFUSED" in err and "***" in err
    assert "wrong-secret" not in err


def test_demo_runs_a_node_and_every_message_arrives_once() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reports.cli", "demo", "--messages", "500"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout
    assert "500" in done.stdout


@pytest.mark.parametrize("command", [["faults.toxiproxy"], ["reports.cli", "toxiproxy", "serve"]])
def test_toxiproxy_serve_command_answers_the_api_and_stops_on_sigterm(command: list[str]) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", *command, "--port", str(port), "--seed", "7"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()
        assert f":{port}" in banner and "seed=7" in banner
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/version", timeout=5) as reply:
            assert reply.status == 200
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=10) == 0
    finally:
        server.kill()


def test_check_command_exits_with_the_verdict(tmp_path: Path) -> None:
    lossy = HistoryBuilder()
    lossy.publish("p1-1")
    lossy.drain()
    lossy.write(tmp_path / "history.jsonl")
    done = subprocess.run([sys.executable, "-m", "reports.cli", "check", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["counts"]["lost"] == 1
    assert json.loads((tmp_path / "results.json").read_text())["valid"] is False
