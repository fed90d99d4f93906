"""GM, guaranteed multicast: the ring protocol mirrored queues replicate through.

An I/O-free state machine per member (``GroupMember``); the shell around it moves
``GMMessage`` values between members and installs the ``View``s the membership manager
makes.
"""

from cluster.gm.member import GroupMember, LostMembership
from cluster.gm.messages import Activity, CatchUp, Entry, GMMessage, Pub, SenderSnapshot
from cluster.gm.view import MemberId, View, ViewError

__all__ = [
    "Activity",
    "CatchUp",
    "Entry",
    "GMMessage",
    "GroupMember",
    "LostMembership",
    "MemberId",
    "Pub",
    "SenderSnapshot",
    "View",
    "ViewError",
]
