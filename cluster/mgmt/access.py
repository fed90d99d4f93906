"""Who may use which route of the management API: RabbitMQ's user tags, as a table
(README, "Management API permissions"). Pure: tags and one fact about the user's
vhosts in, a decision out; `cluster.mgmt.auth` (routes) and `cluster.mgmt.resource`
(listings) apply it.

``administrator`` includes ``policymaker`` and ``monitoring``, which both include
``management``; a user with none of the four has no access at all. Refusals are 401
``not_authorised`` with RabbitMQ's reasons.
"""

from __future__ import annotations

import enum
from collections.abc import Collection

MANAGEMENT_TAGS = frozenset({"management", "policymaker", "monitoring", "administrator"})


class Guard(enum.Enum):
    """What a route asks of a user with a management tag."""

    MANAGEMENT = "management"  # nothing more: what she sees is filtered (`Listing`)
    VHOST = "vhost"  # the vhost in the path is one she may open (any, for administrators)
    POLICIES = "policies"  # policymaker, and the vhost in the path is one she may open
    MONITORING = "monitoring"
    ADMINISTRATOR = "administrator"


class Listing(enum.Enum):
    """Whose objects a listing without a vhost in its path shows."""

    # Queues, exchanges, bindings, policies: every vhost's to administrators, to others
    # those of the vhosts they may open (monitoring users too: they watch, not inspect).
    OBJECTS = "objects"
    # /api/vhosts and the overview's totals: every vhost to monitoring users.
    VHOSTS = "vhosts"
    # Connections, channels, consumers: everyone's to monitoring users, to others their
    # own (another user's connection names her client's address and properties).
    CLIENTS = "clients"


def _is_administrator(tags: Collection[str]) -> bool:
    return "administrator" in tags


def _is_monitoring(tags: Collection[str]) -> bool:
    return "monitoring" in tags or _is_administrator(tags)


def _is_policymaker(tags: Collection[str]) -> bool:
    return "policymaker" in tags or _is_administrator(tags)


def refusal(guard: Guard, tags: Collection[str], opens_vhost: bool) -> str | None:
    """Why a user with ``tags`` may not call a route behind ``guard``, or None when she
    may. ``opens_vhost``: she has permissions on the vhost the path names (true when it
    names none, or one that does not exist: that is the route's 404 to give)."""
    if not MANAGEMENT_TAGS.intersection(tags):
        return "Not management user"
    if guard is Guard.MANAGEMENT or _is_administrator(tags):
        return None
    if guard is Guard.VHOST:
        return None if opens_vhost else "User not authorised to access virtual host"
    if guard is Guard.POLICIES:
        allowed = _is_policymaker(tags) and opens_vhost
        return None if allowed else "User not authorised to access object"
    if guard is Guard.MONITORING:
        return None if _is_monitoring(tags) else "Not monitor user"
    return "Not administrator user"


def sees_all(listing: Listing, tags: Collection[str]) -> bool:
    """Whether ``listing`` shows a user with ``tags`` everything, not only her part."""
    if listing is Listing.OBJECTS:
        return _is_administrator(tags)
    return _is_monitoring(tags)
