"""Where an LLM backbone (or an agent's endpoint) may send requests, and which
environment variable may hold its key (issue 14): loopback and private networks
stay open for local LLM servers; link-local and cloud metadata addresses, and
this app's own address, are refused; a key must live in a variable the operator
allowed (settings REALICU_LLM_KEY_ENV_PREFIXES / _NAMES)."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

# Cloud metadata services by name; their addresses are link-local (refused as
# such) except the few listed in METADATA_ADDRESSES.
METADATA_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "metadata.azure.com",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
        "metadata.packet.net",
    }
)
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "fd00:ec2::254",  # AWS IPv6 metadata
        "100.100.100.200",  # Alibaba Cloud metadata
    )
)
LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))


class EndpointRefused(ValueError):
    """A URL or key variable the platform will not use; the message says why
    and what to do."""


def key_env_allowed(name: str) -> bool:
    prefixes = [p for p in getattr(settings, "REALICU_LLM_KEY_ENV_PREFIXES", []) if p]
    names = set(getattr(settings, "REALICU_LLM_KEY_ENV_NAMES", []))
    return name in names or any(name.startswith(p) for p in prefixes)


def key_env_check(name: str) -> None:
    """Raise EndpointRefused unless the operator allows ``name`` as a key
    variable (an empty name, no key, is always fine)."""
    if not name or key_env_allowed(name):
        return
    prefixes = (
        ", ".join(getattr(settings, "REALICU_LLM_KEY_ENV_PREFIXES", [])) or "none"
    )
    names = ", ".join(getattr(settings, "REALICU_LLM_KEY_ENV_NAMES", [])) or "none"
    raise EndpointRefused(
        f"The environment variable {name} is not one the operator allows for API "
        f"keys (names starting with {prefixes}; or named: {names}). Put the key in "
        "an allowed variable, or ask the operator to allow this name "
        "(REALICU_LLM_KEY_ENV_PREFIXES, REALICU_LLM_KEY_ENV_NAMES)."
    )


def _address_problem(address) -> str | None:
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA_ADDRESSES:
        return f"{address} is a cloud metadata address"
    if any(address in network for network in LINK_LOCAL):
        return f"{address} is a link-local address (where cloud metadata services live)"
    if address.is_loopback:
        return None
    if address.is_multicast or address.is_unspecified:
        return f"{address} is not a host address"
    return None


def _resolve(host: str, port: int) -> list:
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return []
    return list(
        dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos)
    )


def _app_endpoints() -> set[tuple[str, int | None]]:
    own = set()
    for entry in getattr(settings, "REALICU_APP_ADDRESSES", []) or []:
        entry = entry.strip()
        if not entry:
            continue
        parts = urlsplit(entry if "//" in entry else f"//{entry}")
        if parts.hostname:
            own.add((parts.hostname.lower(), parts.port))
    return own


def url_check(url: str, *, app_host: str = "") -> None:
    """Raise EndpointRefused if ``url`` may not be called: not http(s), a
    metadata hostname, a name that resolves to a link-local or metadata
    address, or this app itself (REALICU_APP_ADDRESSES, and ``app_host``, the
    Host of the admin's request, when given). A name that does not resolve
    passes: the request will fail on its own, and resolution is checked again
    before every run."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointRefused(
            "The URL must start with http:// or https:// and name a host."
        )
    host = parts.hostname.lower().rstrip(".")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise EndpointRefused(
            "The URL's port is not a number from 0 to 65535."
        ) from None
    blocked = METADATA_HOSTS | {
        h.lower() for h in getattr(settings, "REALICU_LLM_BLOCKED_HOSTS", []) if h
    }
    if host in blocked:
        raise EndpointRefused(
            f"{host} is a cloud metadata service (or a host the operator blocked): "
            "an LLM endpoint cannot be there."
        )
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    addresses = [literal] if literal is not None else _resolve(host, port)
    for address in addresses:
        problem = _address_problem(address)
        if problem:
            raise EndpointRefused(
                f"{host} cannot be an LLM endpoint: {problem}. Loopback and "
                "private-network addresses are allowed for local servers."
            )
    own = _app_endpoints()
    if app_host:
        parts_app = urlsplit(f"//{app_host}")
        if parts_app.hostname:
            own.add((parts_app.hostname.lower(), parts_app.port))
    own_addresses: set = set()
    for own_host, own_port in own:
        if own_host == host and own_port in (None, port):
            raise EndpointRefused(
                f"{host}:{port} is this platform's own address, not an LLM server."
            )
        if own_port == port and own_host in ("0.0.0.0", "::", "[::]"):
            # Bound to every interface: its loopback address is the app.
            if any(a.is_loopback for a in addresses):
                raise EndpointRefused(
                    f"{host}:{port} is this platform's own address, not an LLM server."
                )
        if own_port == port:
            try:
                resolved = [ipaddress.ip_address(own_host.strip("[]"))]
            except ValueError:
                resolved = _resolve(own_host, port)
            own_addresses.update(resolved)
    if own_addresses & set(addresses):
        raise EndpointRefused(
            f"{host}:{port} is this platform's own address, not an LLM server."
        )
