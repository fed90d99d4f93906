"""mqctl against a real node process: output shapes, exit codes, and that what it sets
governs AMQP clients."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pika.exceptions
import pytest

from cluster import mqctl
from cluster.mqctl.errors import EX_SOFTWARE, EX_UNAVAILABLE, EX_USAGE
from faults.ports import free_port
from faults.process.node import NodeProcess
from tests.node.helpers import connect, numbered, publish_bodies, refused_at_open


@dataclass
class Run:
    code: int
    out: str
    err: str


Mqctl = Callable[..., Run]


@pytest.fixture
def ctl(node: NodeProcess, capsys: pytest.CaptureFixture[str]) -> Mqctl:
    """Run mqctl in-process against ``node`` (real HTTP); returns exit code and output."""
    def run(*args: str) -> Run:
        capsys.readouterr()
        try:
            code = mqctl.main(["-n", node.mgmt_url, *args])
        except SystemExit as exit_:  # argparse's usage errors and --help
            code = int(exit_.code or 0)
        out, err = capsys.readouterr()
        return Run(code, out, err)

    return run


def test_list_queues_prints_a_header_and_tab_separated_rows(node: NodeProcess,
                                                            ctl: Mqctl) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.confirm_delivery()
    channel.queue_declare("b.jobs", durable=True)
    channel.queue_declare("a.events")
    publish_bodies(channel, "b.jobs", numbered(4))
    channel.basic_qos(prefetch_count=1)
    channel.basic_consume("b.jobs", lambda *_: None)

    assert ctl("list_queues") == Run(0, "Listing queues for vhost / ...\n"
                                        "name\tmessages\n"
                                        "a.events\t0\n"
                                        "b.jobs\t4\n", "")
    fields = ["name", "messages_ready", "messages_unacknowledged", "consumers", "durable",
              "exclusive", "arguments", "policy", "pid", "slave_pids",
              "synchronised_slave_pids", "state", "node"]
    quiet = ctl("-q", "list_queues", *fields)
    assert quiet.out.splitlines() == [
        "\t".join(fields),
        f"a.events\t0\t0\t0\tfalse\tfalse\t{{}}\t\t<{node.name}>\t[]\t[]\trunning\t{node.name}",
        f"b.jobs\t3\t1\t1\ttrue\tfalse\t{{}}\t\t<{node.name}>\t[]\t[]\trunning\t{node.name}",
    ]
    as_json = json.loads(ctl("list_queues", "--formatter", "json", "name", "pid",
                             "slave_pids", "durable").out)
    assert as_json == [
        {"name": "a.events", "pid": f"<{node.name}>", "slave_pids": [], "durable": False},
        {"name": "b.jobs", "pid": f"<{node.name}>", "slave_pids": [], "durable": True},
    ]
    connection.close()


def test_other_listings(node: NodeProcess, ctl: Mqctl) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.queue_declare("q")
    channel.queue_bind("q", "amq.direct", "rk")
    assert ctl("-q", "list_bindings").out.splitlines() == [
        "source_name\tsource_kind\tdestination_name\tdestination_kind\trouting_key\targuments",
        "\texchange\tq\tqueue\tq\t{}",
        "amq.direct\texchange\tq\tqueue\trk\t{}",
    ]
    assert ctl("-q", "list_exchanges").out.splitlines() == [
        "name\ttype", "\tdirect", "amq.direct\tdirect", "amq.fanout\tfanout",
        "amq.topic\ttopic",
    ]
    [header, row] = ctl("-q", "list_connections").out.splitlines()
    assert header == "user\tpeer_host\tpeer_port\tstate"
    assert row.startswith("guest\t127.0.0.1\t") and row.endswith("\trunning")
    assert ctl("-q", "list_users").out == "user\ttags\nguest\t[administrator]\n"
    assert ctl("-q", "list_vhosts").out == "name\n/\n"
    assert ctl("-q", "list_permissions").out == "user\tconfigure\twrite\tread\nguest\t.*\t.*\t.*\n"
    connection.close()


def test_add_user_and_set_permissions_let_that_user_in(node: NodeProcess, ctl: Mqctl) -> None:
    assert ctl("add_user", "carol", "s3cret").code == 0
    assert ctl("add_vhost", "shop").code == 0
    with refused_at_open(530):  # no permissions on the vhost yet
        connect(node, user="carol", password="s3cret", vhost="shop")

    assert ctl("set_permissions", "-p", "shop", "carol", "^carol\\.", ".*", ".*").code == 0
    connection = connect(node, user="carol", password="s3cret", vhost="shop")
    connection.channel().queue_declare("carol.inbox")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
        connection.channel().queue_declare("not-hers")
    assert refused.value.reply_code == 403
    connection.close()
    # guest made the vhost, which gave it every permission there (as in RabbitMQ).
    assert ctl("-q", "list_permissions", "-p", "shop").out == (
        "user\tconfigure\twrite\tread\ncarol\t^carol\\.\t.*\t.*\nguest\t.*\t.*\t.*\n"
    )

    assert ctl("clear_permissions", "-p", "shop", "carol").code == 0
    with refused_at_open(530):
        connect(node, user="carol", password="s3cret", vhost="shop")
    with refused_at_open(403):
        connect(node, user="carol", password="wrong", vhost="shop")

    again = ctl("add_user", "carol", "other")
    assert again.code == EX_SOFTWARE
    assert "Error: user 'carol' already exists" in again.err


def test_user_tags_and_passwords(node: NodeProcess, ctl: Mqctl) -> None:
    ctl("add_user", "dave", "pw")
    ctl("set_permissions", "dave", ".*", ".*", ".*")
    refused = ctl("-u", "dave", "-P", "pw", "add_vhost", "v")
    assert refused.code == EX_SOFTWARE
    assert "Not management user" in refused.err

    assert ctl("set_user_tags", "dave", "administrator", "monitoring").code == 0
    # The tags changed and the password did not.
    assert ctl("-u", "dave", "-P", "pw", "add_vhost", "v").code == 0
    assert "dave\t[administrator, monitoring]" in ctl("list_users").out

    assert ctl("change_password", "dave", "new").code == 0
    assert ctl("-u", "dave", "-P", "pw", "list_vhosts").code == EX_SOFTWARE
    assert ctl("-u", "dave", "-P", "new", "-q", "list_vhosts").out == "name\n/\nv\n"
    assert ctl("delete_vhost", "v").code == 0
    assert ctl("delete_user", "dave").code == 0
    gone = ctl("delete_user", "dave")
    assert (gone.code, gone.err) == (EX_SOFTWARE, "Error: no user 'dave'\n")


def test_policies_through_mqctl(node: NodeProcess, ctl: Mqctl) -> None:
    set_ = ctl("set_policy", "--priority", "2", "--apply-to", "queues", "ha-two", "^two\\.",
               '{"ha-mode":"exactly","ha-params":2}')
    assert set_.code == 0
    assert set_.out.startswith('Setting policy "ha-two" for pattern "^two\\."')
    assert ctl("-q", "list_policies").out.splitlines() == [
        "vhost\tname\tpattern\tapply-to\tdefinition\tpriority",
        '/\tha-two\t^two\\.\tqueues\t{"ha-mode":"exactly","ha-params":2}\t2',
    ]
    connect(node).channel().queue_declare("two.q")
    assert ctl("-q", "list_queues", "name", "policy").out == "name\tpolicy\ntwo.q\tha-two\n"

    bad = ctl("set_policy", "ha", ".*", '{"ha-mode":"all","ha-sync-mode":"sometimes"}')
    assert bad.code == EX_SOFTWARE
    assert bad.err.startswith("Error: ha-sync-mode must be one of")
    assert ctl("set_policy", "ha", ".*", "{ha-mode: all}").code == EX_USAGE

    assert ctl("clear_policy", "ha-two").code == 0
    assert ctl("-q", "list_policies").out.splitlines() == [
        "vhost\tname\tpattern\tapply-to\tdefinition\tpriority",
    ]
    assert ctl("clear_policy", "ha-two").code == EX_SOFTWARE


def test_sync_queue_on_a_lone_node_says_the_queue_is_not_mirrored(node: NodeProcess,
                                                                   ctl: Mqctl) -> None:
    connect(node).channel().queue_declare("q", durable=True)
    for command in ("sync_queue", "cancel_sync_queue"):
        run = ctl(command, "q")
        assert run.code == EX_SOFTWARE
        assert run.err == "Error: queue 'q' in vhost '/' is not mirrored\n"
    missing = ctl("sync_queue", "-p", "/", "absent")
    assert (missing.code, missing.err) == (EX_SOFTWARE,
                                           "Error: no queue 'absent' in vhost '/'\n")


def test_stop_app_and_start_app(node: NodeProcess, ctl: Mqctl) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.confirm_delivery()
    channel.queue_declare("durable", durable=True)
    publish_bodies(channel, "durable", numbered(2),
                   properties=pika.BasicProperties(delivery_mode=2))

    stop = ctl("stop_app")
    assert stop == Run(0, f"Stopping rabbit application on node {node.name} ...\n", "")
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker):
        connection.process_data_events(time_limit=5)
    stopped = ctl("list_queues")
    assert stopped.code == EX_UNAVAILABLE
    assert "stopped" in stopped.err
    status = json.loads(ctl("cluster_status", "--formatter", "json").out)
    assert status["disk_nodes"] == [node.name]
    assert status["running_nodes"] == []

    assert ctl("start_app").code == 0
    assert ctl("-q", "list_queues").out == "name\tmessages\ndurable\t2\n"
    assert f"Running Nodes\n\n{node.name}\n" in ctl("cluster_status").out


def test_status(node: NodeProcess, ctl: Mqctl) -> None:
    assert node.process is not None
    run = ctl("status")
    assert run.code == 0
    assert run.out.startswith(f"Status of node {node.name} ...\n")
    assert f"OS PID: {node.process.pid}\n" in run.out
    assert f"Interface: 127.0.0.1, port: {node.amqp_port}, protocol: amqp" in run.out
    assert json.loads(ctl("status", "--formatter", "json").out)["running"] is True


def test_usage_errors_exit_64(ctl: Mqctl) -> None:
    for args in (["no_such_command"], ["add_user", "only-a-name"], ["list_queues", "colour"],
                 []):
        run = ctl(*args)
        assert run.code == EX_USAGE, args
        assert "Error:" in run.err


def test_an_unreachable_node_exits_69_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run([sys.executable, "-m", "cluster.mqctl", "-n", url, "list_queues"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 69
    assert done.stderr.startswith(f"Error: unable to reach node at {url}/api/queues/%2F: ")
    assert "refused" in done.stderr
