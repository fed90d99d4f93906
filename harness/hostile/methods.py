"""Every AMQP 0-9-1 method as pamqp builds it, and which of them a client may send when."""

from __future__ import annotations

import warnings
from typing import Any

from pamqp import commands
from pamqp.base import Frame as Method

# Arguments for the methods pamqp cannot marshal with its defaults.
_ARGUMENTS: dict[str, dict[str, Any]] = {
    "Connection.Secure": {"challenge": ""},
    "Connection.SecureOk": {"response": ""},
    "Connection.Close": {"reply_code": 200, "reply_text": "bye", "class_id": 0,
                         "method_id": 0},
    "Connection.UpdateSecret": {"new_secret": "", "reason": ""},
    "Channel.Flow": {"active": True},
    "Channel.FlowOk": {"active": True},
    "Channel.Close": {"reply_code": 200, "reply_text": "bye", "class_id": 0, "method_id": 0},
    "Queue.DeclareOk": {"queue": "q", "message_count": 0, "consumer_count": 0},
    "Queue.PurgeOk": {"message_count": 0},
    "Queue.DeleteOk": {"message_count": 0},
    "Basic.ConsumeOk": {"consumer_tag": "t"},
    "Basic.Cancel": {"consumer_tag": "t"},
    "Basic.CancelOk": {"consumer_tag": "t"},
    "Basic.Return": {"reply_code": 312, "reply_text": "NO_ROUTE", "exchange": "",
                     "routing_key": "q"},
    "Basic.Deliver": {"consumer_tag": "t", "delivery_tag": 1, "redelivered": False,
                      "exchange": "", "routing_key": "q"},
    "Basic.GetOk": {"delivery_tag": 1, "redelivered": False, "exchange": "",
                    "routing_key": "q", "message_count": 0},
    "Basic.Reject": {"delivery_tag": 1},
}


_CLASSES: list[type[Method]] = list(commands.INDEX_MAPPING.values())
_BY_NAME = {cls.name: cls for cls in _CLASSES}


def build(name: str) -> Method:
    """An instance of the method named ``name`` ("Queue.Declare"), with valid arguments."""
    with warnings.catch_warnings():  # basic.recover-async is deprecated: sent all the same
        warnings.simplefilter("ignore", DeprecationWarning)
        return _BY_NAME[name](**_ARGUMENTS.get(name, {}))


ALL = sorted(_BY_NAME)
CONNECTION_METHODS = [name for name in ALL if name.startswith("Connection.")]
OTHER_METHODS = [name for name in ALL if not name.startswith("Connection.")]

# What the client sends next in each handshake state; any other connection method then is
# a command error (503). Close is always allowed, blocked/unblocked are ignored, and
# update-secret, which RabbitMQ takes on an open connection, is left out.
EXPECTED_NEXT = {"header": "Connection.StartOk", "start_ok": "Connection.TuneOk",
                 "tune_ok": "Connection.Open", "open": ""}
NEVER_OUT_OF_TURN = {"Connection.Close", "Connection.Blocked", "Connection.Unblocked",
                     "Connection.UpdateSecret"}

# Methods only a server sends: a client sending one on an open channel is a command error.
SERVER_ONLY = [
    "Channel.OpenOk", "Channel.FlowOk", "Exchange.DeclareOk", "Exchange.DeleteOk",
    "Exchange.BindOk", "Exchange.UnbindOk", "Queue.DeclareOk", "Queue.BindOk",
    "Queue.PurgeOk", "Queue.DeleteOk", "Queue.UnbindOk", "Basic.QosOk", "Basic.ConsumeOk",
    "Basic.CancelOk", "Basic.Return", "Basic.Deliver", "Basic.GetOk", "Basic.GetEmpty",
    "Basic.RecoverOk", "Tx.SelectOk", "Tx.CommitOk", "Tx.RollbackOk", "Confirm.SelectOk",
]

# Methods a client sends on a channel, with arguments, to truncate or corrupt.
CHANNEL_METHODS: list[Method] = [
    commands.Queue.Declare(queue="hostile-q", durable=True, arguments={"x-max-length": 5}),
    commands.Queue.Bind(queue="hostile-q", exchange="amq.direct", routing_key="k"),
    commands.Queue.Unbind(queue="hostile-q", exchange="amq.direct", routing_key="k"),
    commands.Queue.Purge(queue="hostile-q"),
    commands.Queue.Delete(queue="hostile-q", if_unused=True),
    commands.Exchange.Declare(exchange="hostile-x", exchange_type="topic"),
    commands.Exchange.Delete(exchange="hostile-x"),
    commands.Basic.Qos(prefetch_count=10),
    commands.Basic.Consume(queue="hostile-q", consumer_tag="c", arguments={"x-priority": 1}),
    commands.Basic.Cancel(consumer_tag="c"),
    commands.Basic.Get(queue="hostile-q"),
    commands.Basic.Publish(exchange="amq.direct", routing_key="k", mandatory=True),
    commands.Basic.Ack(delivery_tag=7, multiple=True),
    commands.Basic.Nack(delivery_tag=7, requeue=False),
    commands.Basic.Reject(delivery_tag=7, requeue=True),
    commands.Basic.Recover(requeue=True),
    commands.Confirm.Select(),
    commands.Channel.Flow(active=True),
    commands.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0),
]
