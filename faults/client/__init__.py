"""The toxiproxy client layer: an API client over ``toxiproxy-python``, discovery of
a toxiproxy to use, TCP probes, and verified heals."""

from .api import ProxyInfo, ToxicInfo, ToxiproxyClient
from .discovery import ToxiproxyHandle, ToxiproxyStartError, find_toxiproxy
from .errors import (
    AlreadyExists,
    HealError,
    InvalidRequest,
    NotFound,
    ToxiproxyError,
    ToxiproxyRequestError,
    ToxiproxyServerError,
    ToxiproxyUnavailable,
    UpstreamDown,
)
from .heal import HealOutcome, HealVerifier, ProxySpec
from .probes import Probe, RefusalProbe, ReplyProbe, split_address

__all__ = [
    "AlreadyExists",
    "HealError",
    "HealOutcome",
    "HealVerifier",
    "InvalidRequest",
    "NotFound",
    "Probe",
    "ProxyInfo",
    "ProxySpec",
    "RefusalProbe",
    "ReplyProbe",
    "ToxicInfo",
    "ToxiproxyClient",
    "ToxiproxyError",
    "ToxiproxyHandle",
    "ToxiproxyRequestError",
    "ToxiproxyServerError",
    "ToxiproxyStartError",
    "ToxiproxyUnavailable",
    "UpstreamDown",
    "find_toxiproxy",
    "split_address",
]
