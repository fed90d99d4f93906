"""Verified heal of the links a nemesis has faulted, shared by the link nemeses."""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping

from faults.client import HealError, HealVerifier, ToxiproxyError, UpstreamDown
from faults.topology import Topology

from .core import Op

# Per link name: the toxics to remove, and whether the proxy must be enabled again.
LinkFaults = Mapping[str, tuple[Collection[str], bool]]


def heal_links(op: Op, verifier: HealVerifier, topology: Topology,
               faults: LinkFaults) -> tuple[Op, list[str]]:
    """Heal every link, verified; the completed op and the links that are healed.
    Links whose heal could not be verified make the op ``fail`` with the reasons. Once
    one link's upstream is found down, the other links to it are only undone: their
    check would wait for the same node in vain."""
    healed: dict[str, str] = {}
    failed: dict[str, str] = {}
    down: set[str] = set()  # upstreams that did not answer
    for name, (toxics, disabled) in sorted(faults.items()):
        spec = topology.spec(topology.link(name))
        try:
            if spec.upstream in down:
                verifier.undo(spec, toxics=toxics, enable=disabled)
                failed[name] = f"undone, unverified: upstream {spec.upstream} is down"
                continue
            outcome = verifier.heal(spec, toxics=toxics, enable=disabled)
        except UpstreamDown as exc:
            down.add(spec.upstream)
            failed[name] = exc.reason
            continue
        except HealError as exc:
            failed[name] = exc.reason
            continue
        except ToxiproxyError as exc:  # from the unverified undo
            failed[name] = str(exc)
            continue
        healed[name] = outcome.method
    value = {"healed": healed, "unhealed": failed}
    if failed:
        return op.fail(f"links not healed: {failed}", value), list(healed)
    return op.ok(value), list(healed)


def undo_links(verifier: HealVerifier, topology: Topology, faults: LinkFaults) -> None:
    """Remove every fault from its link, unverified (a failure here is left for the
    verified heal to report): run for every link nemesis before any verifies, so one
    fault's check is not blocked by another's toxic on the same link."""
    for name, (toxics, disabled) in sorted(faults.items()):
        with contextlib.suppress(ToxiproxyError):
            verifier.undo(topology.spec(topology.link(name)), toxics=toxics, enable=disabled)
