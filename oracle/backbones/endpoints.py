"""Where an LLM backbone or a researcher's online-evaluation endpoint may send
requests, and which environment variable may hold a backbone's key (issues 14
and 31).

One address policy, applied when a URL is saved, when a run starts, and on every
connection, to every address a host name resolves to (oracle.backbones.http
connects only to the addresses checked here, so a name that resolves elsewhere
between the checks gains nothing):

- refused for everyone: link-local and cloud metadata addresses, addresses that
  are no host (0.0.0.0, multicast, reserved), IPv6 forms that embed a
  non-public IPv4 address (NAT64, 6to4, Teredo, IPv4-compatible, ISATAP), and
  the platform itself: its own address (REALICU_APP_ADDRESSES, the Host a page
  is served on), its compose services by name and address
  (REALICU_APP_SERVICE_NAMES), its database, broker and cache, and on any
  address of this machine the ports of PostgreSQL, Redis and the app;
- an admin's backbone may otherwise be on loopback or a private network (local
  LLM servers);
- a researcher's endpoint must be on a public address, unless it lies in a
  network the operator allowed (REALICU_ENDPOINT_ALLOWED_NETWORKS).

An IPv4-mapped IPv6 address (``::ffff:a.b.c.d``) is its IPv4 address; numeric
IPv4 forms the C library reads (``127.1``, ``2130706433``, ``0x7f000001``,
``0177.0.0.1``) are read as it reads them."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit

import httpx
from django.conf import settings

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class Purpose(StrEnum):
    """Whose URL it is: an admin's LLM backbone, or an online-evaluation
    endpoint (a researcher's agent)."""

    BACKBONE = "backbone"
    ENDPOINT = "endpoint"


# The longest URL kept (OnlineEndpoint.url is a varchar(500)).
MAX_URL_CHARS = 500

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
# "This network": Linux connects 0.0.0.0 (and :: ) to this machine.
THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
RESERVED_V4 = ipaddress.ip_network("240.0.0.0/4")  # with 255.255.255.255

# IPv6 forms that carry an IPv4 address to a translator or a relay.
NAT64 = ipaddress.ip_network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215, RFC 6052 layout
V4_COMPATIBLE = ipaddress.ip_network("::/96")
V4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT, RFC 2765

# The compose file's services (docker-compose.yml) and the ports of PostgreSQL
# and Redis, refused on any address of this machine whatever the settings say.
APP_SERVICE_NAMES = ("web", "postgres", "redis", "worker", "housekeeping", "migrate")
APP_SERVICE_PORTS = (5432, 6379)

RESOLVE_CACHE_SECONDS = 30.0


class EndpointRefused(ValueError):
    """A URL or key variable the platform will not use; the message says why
    and what to do."""


class AddressRefused(EndpointRefused):
    """Refused when connecting: the host resolved to an address the policy
    refuses (DNS rebinding, or a URL saved under other rules)."""


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


def api_key_read(name: str) -> str:
    """The API key in the environment variable ``name`` ("" when no name is
    given); raise EndpointRefused when the operator does not allow the name
    or the variable is not set in this process's environment."""
    if not name:
        return ""
    key_env_check(name)
    key = os.environ.get(name, "")
    if not key:
        raise EndpointRefused(
            f"The environment variable {name} that should hold the API key is "
            "not set in the worker's environment."
        )
    return key


# --- names and addresses -------------------------------------------------------


def resolve(host: str) -> list[IPAddress]:
    """The addresses the system resolver gives for ``host``, in its order;
    [] when it gives none. Tests replace this function to play DNS."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return []
    found: list[IPAddress] = []
    for info in infos:
        try:
            found.append(ipaddress.ip_address(str(info[4][0]).split("%")[0]))
        except ValueError:
            continue
    return list(dict.fromkeys(found))


_NUMERIC_V4 = re.compile(r"[0-9a-fx.]+")


def host_literal(host: str) -> IPAddress | None:
    """``host`` as an address if it is one in any form the C library reads
    (dotted, shortened, decimal, hex, octal; IPv6 with or without brackets and
    zone), else None."""
    text = host.strip("[]").replace("%25", "%").split("%")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if _NUMERIC_V4.fullmatch(text):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None


def host_normalise(host: str) -> str:
    """A host name as the resolver will be asked it: lower case, without a
    trailing dot, internationalised names in their ASCII form."""
    host = (host or "").strip().lower().rstrip(".")
    if host.startswith("["):
        return host
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii").lower()
        except UnicodeError:
            raise EndpointRefused(f"{host} is not a valid host name.") from None
    return host


def url_parse(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of an http(s) URL, or EndpointRefused saying
    what is wrong with it. Only syntax: nothing is resolved."""
    if not isinstance(url, str) or not url.strip():
        raise EndpointRefused("Give a URL starting with http:// or https://.")
    if len(url) > MAX_URL_CHARS:
        raise EndpointRefused(
            f"The URL is {len(url):,} characters long; at most {MAX_URL_CHARS}."
        )
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 or c == "\\" for c in url):
        raise EndpointRefused(
            "The URL contains spaces, backslashes or control characters."
        )
    try:
        parts = urlsplit(url)
        hostname, port = parts.hostname, parts.port
        parsed = httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as error:
        raise EndpointRefused(
            f"The URL cannot be read ({str(error)[:80]}): an IPv6 address is "
            "written in brackets, http://[2001:db8::1]:8000/..., and a port is a "
            "number from 1 to 65535."
        ) from None
    if parts.scheme not in ("http", "https") or not hostname:
        raise EndpointRefused(
            "The URL must start with http:// or https:// and name a host."
        )
    client_host = parsed.raw_host.decode("ascii", "replace").lower()
    if client_host.strip("[]") != hostname.lower() and client_host != host_normalise(
        hostname
    ):
        # The two parsers disagree on the host: refuse rather than guess which
        # one the request would follow.
        raise EndpointRefused("The URL's host cannot be read unambiguously.")
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    if not 0 < port < 65536:
        raise EndpointRefused("The URL's port must be a number from 1 to 65535.")
    return parts.scheme, host_normalise(hostname), port


def _embedded_v4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries to a translator or a relay."""
    value = int(address)
    found: list[ipaddress.IPv4Address] = []
    if address in NAT64 or address in V4_TRANSLATED:
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    elif address in V4_COMPATIBLE and value > 1:
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    elif address in NAT64_LOCAL:
        # RFC 6052 with a /48 prefix: bits 48-63, then (after the u octet)
        # bits 72-87.
        found.append(
            ipaddress.IPv4Address(
                ((value >> 64) & 0xFFFF) << 16 | ((value >> 40) & 0xFFFF)
            )
        )
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if (value >> 32) & 0xFDFFFFFF == 0x00005EFE:  # ISATAP interface id
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    return found


def _canonical(address: IPAddress) -> IPAddress:
    if address.version == 6 and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _no_host(address: IPAddress) -> str | None:
    """Why ``address`` may never be connected to, whoever asks (a noun
    phrase), or None."""
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if any(address in network for network in LINK_LOCAL):
        return "a link-local address (where cloud metadata services live)"
    if address.is_unspecified or (address.version == 4 and address in THIS_NETWORK):
        return "not a host address (connecting to it reaches this machine)"
    if address.is_multicast or (address.version == 4 and address in RESERVED_V4):
        return "not a host address"
    return None


def _public(address: IPAddress) -> bool:
    if address.version == 6 and address.is_site_local:
        return False
    return address.is_global


# --- the platform itself -------------------------------------------------------

_cache_lock = threading.Lock()
_resolved_cache: dict[str, tuple[float, list[IPAddress]]] = {}
_interfaces_cache: list = [0.0, frozenset()]


def _resolve_cached(host: str) -> list[IPAddress]:
    literal = host_literal(host)
    if literal is not None:
        return [_canonical(literal)]
    now = time.monotonic()
    with _cache_lock:
        hit = _resolved_cache.get(host)
    if hit is not None and hit[0] > now:
        return hit[1]
    found = [_canonical(a) for a in resolve(host)]
    with _cache_lock:
        _resolved_cache[host] = (now + RESOLVE_CACHE_SECONDS, found)
    return found


def _interface_addresses() -> frozenset:
    """Every address of this machine's network interfaces (cached briefly)."""
    now = time.monotonic()
    with _cache_lock:
        expires, cached = _interfaces_cache
    if expires > now:
        return cached
    found: set = set()
    try:
        import psutil

        for addresses in psutil.net_if_addrs().values():
            for entry in addresses:
                if entry.family in (socket.AF_INET, socket.AF_INET6):
                    try:
                        found.add(
                            _canonical(
                                ipaddress.ip_address(entry.address.split("%")[0])
                            )
                        )
                    except ValueError:
                        continue
    except Exception:  # psutil missing or refused: the host name's addresses
        found.update(resolve(socket.gethostname()))
    result = frozenset(found)
    with _cache_lock:
        _interfaces_cache[:] = [now + RESOLVE_CACHE_SECONDS, result]
    return result


def _is_local(address: IPAddress) -> bool:
    """Whether a connection to ``address`` reaches this machine."""
    return (
        address.is_loopback
        or address.is_unspecified
        or (address.version == 4 and address in THIS_NETWORK)
        or address in _interface_addresses()
    )


def _host_port(entry: str, default_port: int | None) -> tuple[str, int | None] | None:
    entry = (entry or "").strip()
    if not entry or entry.startswith("/"):
        return None
    try:
        parts = urlsplit(entry if "//" in entry else f"//{entry}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    return host_normalise(host), port or default_port


@dataclass
class _Platform:
    """Where the platform itself answers: host names (any port when the port
    is None), addresses with their port (None: any), and ports refused on any
    address of this machine."""

    names: dict[str, set] = field(default_factory=dict)
    addresses: dict[IPAddress, set] = field(default_factory=dict)
    local_ports: set[int] = field(default_factory=lambda: set(APP_SERVICE_PORTS))

    def add(self, host: str, port: int | None, *, by_name: bool = True) -> None:
        if by_name and host_literal(host) is None:
            self.names.setdefault(host, set()).add(port)
        for address in _resolve_cached(host):
            if _is_local(address):
                # Bound on this machine: any of its addresses reaches it.
                self.local_ports.update([port] if port else [80, 443])
            else:
                self.addresses.setdefault(address, set()).add(port)

    def name_problem(self, host: str, port: int) -> str | None:
        ports = self.names.get(host)
        if ports is not None and (None in ports or port in ports):
            return f"{host}:{port} is this platform's own address"
        return None

    def address_problem(self, address: IPAddress, port: int) -> str | None:
        ports = self.addresses.get(address)
        if (ports is not None and (None in ports or port in ports)) or (
            port in self.local_ports and _is_local(address)
        ):
            return (
                f"{address} port {port} is this platform's own address (the app, "
                "its database, broker or cache)"
            )
        return None


def _platform(app_host: str = "") -> _Platform:
    platform = _Platform()
    entries = list(getattr(settings, "REALICU_APP_ADDRESSES", []) or [])
    if app_host:
        entries.append(app_host)
    for entry in entries:
        found = _host_port(entry, None)
        if found:
            platform.add(*found)
    for name in getattr(settings, "REALICU_APP_SERVICE_NAMES", APP_SERVICE_NAMES):
        if name and name.strip():
            platform.add(host_normalise(name), None)
    services = []
    for database in getattr(settings, "DATABASES", {}).values():
        if database.get("HOST"):
            port = int(database.get("PORT") or 0) or 5432
            services.append(_host_port(f"{database['HOST']}:{port}", 5432))
    for url in (getattr(settings, "CELERY_BROKER_URL", "") or "",):
        if url.startswith(("redis://", "rediss://", "amqp://")):
            services.append(_host_port(url, 6379))
    for cache in getattr(settings, "CACHES", {}).values():
        locations = cache.get("LOCATION") or []
        for location in [locations] if isinstance(locations, str) else locations:
            if str(location).startswith(("redis://", "rediss://")):
                services.append(_host_port(str(location), 6379))
    for found in services:
        if found:
            platform.add(*found, by_name=False)
    return platform


def _allowed_networks() -> list:
    networks = []
    for entry in getattr(settings, "REALICU_ENDPOINT_ALLOWED_NETWORKS", []) or []:
        entry = str(entry).strip()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            logger.warning(
                "REALICU_ENDPOINT_ALLOWED_NETWORKS: %r is not a network", entry
            )
    return networks


# --- the policy ----------------------------------------------------------------


def address_problem(
    address: IPAddress,
    port: int,
    *,
    purpose: Purpose,
    platform: _Platform | None = None,
) -> str | None:
    """Why ``address``:``port`` may not be connected to for ``purpose`` (a
    sentence without its subject's host), or None."""
    address = _canonical(address)
    platform = platform if platform is not None else _platform()
    problem = _no_host(address)
    if problem:
        return f"{address} is {problem}"
    if address.version == 6:
        for inner in _embedded_v4(address):
            problem = _no_host(inner)
            if problem:
                return f"{address} embeds {inner}, {problem}"
            if not _public(inner):
                return (
                    f"{address} embeds the non-public IPv4 address {inner} (NAT64, "
                    "6to4, Teredo or IPv4-compatible form); give the IPv4 "
                    "address itself"
                )
    problem = platform.address_problem(address, port)
    if problem:
        return problem
    if purpose == Purpose.ENDPOINT and not any(
        address.version == network.version and address in network
        for network in _allowed_networks()
    ):
        if not _public(address):
            what = "not a public address"
        elif _is_local(address):
            what = "an address of the platform's own machine"
        else:
            return None
        return (
            f"{address} is {what}: an online-evaluation endpoint must be on a "
            "public address of another machine (an admin can allow a network "
            "for endpoints: REALICU_ENDPOINT_ALLOWED_NETWORKS)"
        )
    return None


def _refusal(host: str, problem: str, purpose: Purpose) -> str:
    if purpose == Purpose.ENDPOINT:
        return f"{host} cannot be an online-evaluation endpoint: {problem}."
    return (
        f"{host} cannot be an LLM endpoint: {problem}. Loopback and "
        "private-network addresses are allowed for local servers."
    )


def _name_problem(host: str, port: int, platform: _Platform) -> str | None:
    blocked = METADATA_HOSTS | {
        h.lower() for h in getattr(settings, "REALICU_LLM_BLOCKED_HOSTS", []) if h
    }
    if host in blocked:
        return f"{host} is a cloud metadata service (or a host the operator blocked)"
    return platform.name_problem(host, port)


def host_addresses(
    host: str, port: int, *, purpose: Purpose, app_host: str = ""
) -> list[IPAddress]:
    """Resolve ``host`` once and check every address it gives: the addresses to
    connect to, in the resolver's order ([] when it gives none). Raises
    AddressRefused if the name or any of its addresses is refused: one bad
    answer among good ones refuses them all."""
    host = host_normalise(host)
    platform = _platform(app_host)
    problem = _name_problem(host, port, platform)
    if problem:
        raise AddressRefused(_refusal(host, problem, purpose))
    literal = host_literal(host)
    addresses = [literal] if literal is not None else resolve(host)
    addresses = list(dict.fromkeys(_canonical(a) for a in addresses))
    for address in addresses:
        problem = address_problem(address, port, purpose=purpose, platform=platform)
        if problem:
            raise AddressRefused(_refusal(host, problem, purpose))
    return addresses


def url_check(
    url: str, *, app_host: str = "", purpose: Purpose = Purpose.BACKBONE
) -> None:
    """Raise EndpointRefused if ``url`` may not be called for ``purpose``: not
    a readable http(s) URL of at most MAX_URL_CHARS, a metadata host name, or
    a host any of whose addresses the policy refuses (see the module), this
    app itself among them (REALICU_APP_ADDRESSES, and ``app_host``, the Host of
    the request that saves it, when given). A name that does not resolve
    passes: the request will fail on its own, and every connection is checked
    again (oracle.backbones.http)."""
    _, host, port = url_parse(url)
    try:
        host_addresses(host, port, purpose=purpose, app_host=app_host)
    except AddressRefused as error:
        raise EndpointRefused(str(error)) from None
