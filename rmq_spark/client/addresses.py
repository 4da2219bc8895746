"""Server addresses as users and routes write them: ``host:port`` (IPv6 in brackets) and lists of them."""

from __future__ import annotations

from rmq_spark.client.errors import AddressError


def host_port(address: str, what: str = "address") -> tuple[str, int]:
    """``host:port`` (or ``[v6]:port``) → (host, port); AddressError naming ``what`` and the address if it is not
    one."""
    host, sep, port = address.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise AddressError(f"{what} {address.strip()!r} is not host:port")
    return host, int(port)


def address_list(spec: str, what: str = "address") -> list[str]:
    """``host:port;host:port`` (commas accepted too) → the addresses, each checked by ``host_port``."""
    addresses = [a.strip() for a in spec.replace(",", ";").split(";") if a.strip()]
    for address in addresses:
        host_port(address, what)
    return addresses
