"""Verified heal of the links a nemesis has faulted, shared by the link nemeses."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from faults.client import HealError, HealVerifier
from faults.topology import Topology

from .core import Op

# Per link name: the toxics to remove, and whether the proxy must be enabled again.
LinkFaults = Mapping[str, tuple[Collection[str], bool]]


def heal_links(op: Op, verifier: HealVerifier, topology: Topology,
               faults: LinkFaults) -> tuple[Op, list[str]]:
    """Heal every link, verified; the completed op and the links that are healed.
    Links whose heal could not be verified make the op ``fail`` with the reasons."""
    healed: dict[str, str] = {}
    failed: dict[str, str] = {}
    for name, (toxics, disabled) in sorted(faults.items()):
        try:
            outcome = verifier.heal(topology.spec(topology.link(name)), toxics=toxics,
                                    enable=disabled)
        except HealError as exc:
            failed[name] = exc.reason
            continue
        healed[name] = outcome.method
    value = {"healed": healed, "unhealed": failed}
    if failed:
        return op.fail(f"links not healed: {failed}", value), list(healed)
    return op.ok(value), list(healed)
