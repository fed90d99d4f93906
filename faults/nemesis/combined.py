"""The combined random nemesis: every kind of fault the cluster allows, as one
nemesis, each part with its own random stream derived from the run's root seed."""

from __future__ import annotations

from collections.abc import Mapping

from faults.client import HealVerifier, ToxiproxyClient
from faults.management import Management
from faults.process import ProcessControl
from faults.seeds import stream
from faults.topology import Topology

from .admin import PolicyNemesis, QueueAdminNemesis
from .core import Compose, Nemesis
from .forget import ForgetNemesis
from .links import LinkNemesis
from .partition import PartitionNemesis
from .process import ProcessNemesis
from .view import ClusterView


def combined_nemesis(seed: int, *, control: ProcessControl | None = None,
                     view: ClusterView | None = None, client: ToxiproxyClient | None = None,
                     topology: Topology | None = None, verifier: HealVerifier | None = None,
                     management: Mapping[str, Management] | None = None) -> Compose:
    """The parts the given pieces allow: process faults with ``control``, link faults
    and partitions with ``client`` and ``topology``, policy faults and queue admin
    (sync, forget) with ``management``, and with both, ``forget`` (a stop, then
    forget_cluster_node). Heal order: link degradation and partitions
    (undone first, so a node that starts again can hear its peers), processes,
    policies; a link to a node that was down is verified by `Compose`'s second go."""
    parts: list[Nemesis] = []
    if client is not None and topology is not None:
        verifier = verifier or HealVerifier(client)
        parts.append(LinkNemesis(client, topology, verifier=verifier))
        parts.append(PartitionNemesis(client, topology, stream(seed, "nemesis", "partition"),
                                      verifier=verifier))
    process: ProcessNemesis | None = None
    admin: QueueAdminNemesis | None = None
    if control is not None:
        process = ProcessNemesis(control, stream(seed, "nemesis", "process"), view=view)
        parts.append(process)
    if management is not None:
        admin = QueueAdminNemesis(management, stream(seed, "nemesis", "queue-admin"))
        parts.append(PolicyNemesis(management, stream(seed, "nemesis", "admin")))
        parts.append(admin)
    if process is not None and admin is not None:
        parts.append(ForgetNemesis(process, admin))
    if not parts:
        raise ValueError("a combined nemesis needs process control, toxiproxy and a "
                         "topology, or management endpoints")
    return Compose(parts)
