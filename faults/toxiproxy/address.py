"""``host:port`` strings parsed, resolved and formatted the way toxiproxy's Go code does.

The API reports addresses in Go's form (``127.0.0.1:8474``, ``[::]:8474``) and decides
whether a proxy changed by comparing resolved addresses, so the details matter.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket


class AddressError(ValueError):
    """A malformed or unresolvable address, worded like Go's net package."""


def split_host_port(addr: str) -> tuple[str, str]:
    """Go's ``net.SplitHostPort``: the host may be empty; IPv6 hosts come in brackets."""

    def fail(why: str) -> AddressError:
        return AddressError(f"address {addr}: {why}")

    colon = addr.rfind(":")
    if colon < 0:
        raise fail("missing port in address")
    if addr.startswith("["):
        close = addr.find("]")
        if close < 0:
            raise fail("missing ']' in address")
        if close + 1 == len(addr):
            raise fail("missing port in address")
        if close + 1 != colon:
            colons = addr[close + 1] == ":"
            raise fail("too many colons in address" if colons else "missing port in address")
        host, before, after = addr[1:close], addr[1:], addr[close + 1 :]
    else:
        host, before, after = addr[:colon], addr, addr
        if ":" in host:
            raise fail("too many colons in address")
    if "[" in before:
        raise fail("unexpected '[' in address")
    if "]" in after:
        raise fail("unexpected ']' in address")
    return host, addr[colon + 1 :]


def port_number(addr: str, port: str) -> int:
    """A decimal port, or a service name as Go accepts (``http``)."""
    if port.isdigit():
        number = int(port)
        if number > 65535:
            raise AddressError(f"address {addr}: invalid port")
        return number
    try:
        return socket.getservbyname(port, "tcp")
    except OSError:
        raise AddressError(f"lookup tcp/{port}: unknown port") from None


def join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def format_sockname(sockname: tuple[object, ...]) -> str:
    host, port = sockname[0], sockname[1]
    assert isinstance(host, str) and isinstance(port, int)
    return join_host_port(host, port)


def is_wildcard(host: str) -> bool:
    return host in ("", "0.0.0.0", "::")


async def resolve_host(host: str) -> tuple[socket.AddressFamily, str]:
    """The address Go would use for ``host``: an IP literal as is, else the first IPv4
    address of the name, else its first IPv6 address."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return (socket.AF_INET6 if ip.version == 6 else socket.AF_INET), str(ip)
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise AddressError(f"lookup {host}: no such host") from None
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    family, _, _, _, sockaddr = infos[0]
    return family, str(sockaddr[0])


async def resolve_tcp_addr(addr: str) -> str:
    """Go's ``net.ResolveTCPAddr(...).String()``: ``localhost:80`` becomes ``127.0.0.1:80``
    and an empty host stays empty (``:80``)."""
    host, port_text = split_host_port(addr) if addr else ("", "0")
    port = port_number(addr, port_text) if port_text else 0
    if not host:
        return f":{port}"
    _, ip = await resolve_host(host)
    return join_host_port(ip, port)
