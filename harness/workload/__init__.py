"""The workload: real AMQP clients, one per logical process, recording
every operation in the run's history, and the final drain."""

from harness.workload.answers import CLIENT_ERRORS
from harness.workload.client import Client, ClientContext
from harness.workload.consumers import Consumer, Requeuer
from harness.workload.drain import drain
from harness.workload.getters import Getter
from harness.workload.publishers import Publisher, TxPublisher
from harness.workload.recorder import LiveFigures, Recorder
from harness.workload.spec import WorkloadSpec
from harness.workload.workload import Workload

__all__ = [
    "CLIENT_ERRORS",
    "Client",
    "ClientContext",
    "Consumer",
    "Getter",
    "LiveFigures",
    "Publisher",
    "Recorder",
    "Requeuer",
    "TxPublisher",
    "Workload",
    "WorkloadSpec",
    "drain",
]
