"""The address forms of issue 31 item 1, shared by the backbone and endpoint
tests, and a DNS played by the test (``fake_dns``): the resolver is outside the
machine, so it is the one thing replaced; everything after it (the policy, the
connection) runs for real.

Every form in REFUSED_FOR_ALL names the platform (bound at APP_ADDRESS, its
compose services, PostgreSQL and Redis) or a link-local / metadata address,
written some other way; ``answer`` is what a DNS name would resolve to in
order to reach the same place (the rebinding variant)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest

from oracle.backbones import endpoints

# The app's bind address in these tests (REALICU_APP_ADDRESSES).
APP_ADDRESS = "127.0.0.1:8000"

# The compose network's answers for the service names.
COMPOSE_DNS = {
    "localhost": ["127.0.0.1", "::1"],
    "web": ["172.18.0.5"],
    "postgres": ["172.18.0.2"],
    "redis": ["172.18.0.3"],
    "worker": ["172.18.0.6"],
    "housekeeping": ["172.18.0.7"],
}


@dataclass(frozen=True)
class Form:
    id: str
    netloc: str  # host[:port] as written in the URL
    answer: str  # the address a name would resolve to for the same target
    port: int
    why: str  # words of the refusal

    @property
    def url(self) -> str:
        return f"http://{self.netloc}/v1"


def _form(id, netloc, answer, why):
    return Form(id, netloc, answer, urlsplit(f"http://{netloc}/").port or 80, why)


OWN = "own address"
REFUSED_FOR_ALL = [
    # The app itself, at its bind address, in every IPv4 and IPv6 form.
    _form("ipv4", "127.0.0.1:8000", "127.0.0.1", OWN),
    _form("localhost", "localhost:8000", "127.0.0.1", OWN),
    _form("localhost-upper-dot", "LOCALHOST.:8000", "127.0.0.1", OWN),
    _form("ipv4-short", "127.1:8000", "127.0.0.1", OWN),
    _form("ipv4-decimal", "2130706433:8000", "127.0.0.1", OWN),
    _form("ipv4-hex", "0x7f000001:8000", "127.0.0.1", OWN),
    _form("ipv4-hex-short", "0x7f.1:8000", "127.0.0.1", OWN),
    _form("ipv4-octal", "0177.0.0.1:8000", "127.0.0.1", "cannot be read"),
    _form("other-loopback", "127.0.0.2:8000", "127.0.0.2", OWN),
    _form("ipv6-loopback", "[::1]:8000", "::1", OWN),
    _form("v4-mapped", "[::ffff:127.0.0.1]:8000", "::ffff:127.0.0.1", OWN),
    _form("v4-mapped-hex", "[::ffff:7f00:1]:8000", "::ffff:7f00:1", OWN),
    _form(
        "v4-mapped-long",
        "[0:0:0:0:0:ffff:127.0.0.1]:8000",
        "::ffff:127.0.0.1",
        OWN,
    ),
    _form("v4-compatible", "[::127.0.0.1]:8000", "::127.0.0.1", "embeds"),
    _form("nat64", "[64:ff9b::127.0.0.1]:8000", "64:ff9b::7f00:1", "embeds"),
    _form("6to4", "[2002:7f00:1::]:8000", "2002:7f00:1::", "embeds"),
    _form("unspecified-v4", "0.0.0.0:8000", "0.0.0.0", "not a host address"),
    _form("unspecified-v6", "[::]:8000", "::", "not a host address"),
    # Its compose services, by name and by address, and its own ports on any
    # local address.
    _form("service-web", "web:8000", "172.18.0.5", OWN),
    _form("service-web-other-port", "web:8080", "172.18.0.5", OWN),
    _form("service-web-address", "172.18.0.5:8000", "172.18.0.5", OWN),
    _form("service-postgres", "postgres:5432", "172.18.0.2", OWN),
    _form("service-redis", "redis:6379", "172.18.0.3", OWN),
    _form("service-worker", "worker:8000", "172.18.0.6", OWN),
    _form("service-housekeeping", "housekeeping:8000", "172.18.0.7", OWN),
    _form("postgres-port", "127.0.0.1:5432", "127.0.0.1", OWN),
    _form("postgres-port-localhost", "localhost:5432", "127.0.0.1", OWN),
    _form("redis-port-v6", "[::1]:6379", "::1", OWN),
    _form("redis-port-mapped", "[::ffff:127.0.0.1]:6379", "::ffff:127.0.0.1", OWN),
    # Link-local and cloud metadata addresses, and their embedded forms.
    _form("metadata", "169.254.169.254", "169.254.169.254", "metadata"),
    _form("metadata-port", "169.254.169.254:8080", "169.254.169.254", "metadata"),
    _form("metadata-decimal", "2852039166", "169.254.169.254", "metadata"),
    _form("metadata-hex", "0xa9fea9fe", "169.254.169.254", "metadata"),
    _form("metadata-short", "169.254.43518", "169.254.169.254", "metadata"),
    _form("metadata-name", "metadata.google.internal", "169.254.169.254", "metadata"),
    _form("metadata-ecs", "169.254.170.2", "169.254.170.2", "metadata"),
    _form("metadata-alibaba", "100.100.100.200", "100.100.100.200", "metadata"),
    _form("link-local-v4", "169.254.0.1:8080", "169.254.0.1", "link-local"),
    _form("link-local-v6", "[fe80::1]:8080", "fe80::1", "link-local"),
    _form("link-local-v6-zone", "[fe80::1%25eth0]:8080", "fe80::1", "link-local"),
    _form("metadata-aws-v6", "[fd00:ec2::254]", "fd00:ec2::254", "metadata"),
    _form(
        "metadata-mapped", "[::ffff:169.254.169.254]", "::ffff:a9fe:a9fe", "metadata"
    ),
    _form("metadata-mapped-hex", "[::ffff:a9fe:a9fe]", "::ffff:a9fe:a9fe", "metadata"),
    _form(
        "metadata-nat64",
        "[64:ff9b::169.254.169.254]",
        "64:ff9b::a9fe:a9fe",
        "metadata",
    ),
    _form(
        "metadata-nat64-local",
        "[64:ff9b:1:a9fe:a9:fe00::]",
        "64:ff9b:1:a9fe:a9:fe00::",
        "metadata",
    ),
    _form("metadata-6to4", "[2002:a9fe:a9fe::]", "2002:a9fe:a9fe::", "metadata"),
    _form("metadata-v4-compatible", "[::169.254.169.254]", "::a9fe:a9fe", "metadata"),
    _form(
        "metadata-teredo",
        "[2001:0:4136:e378:8000:63bf:5601:5601]",
        "2001:0:4136:e378:8000:63bf:5601:5601",
        "metadata",
    ),
    _form(
        "metadata-isatap",
        "[2001:db8::5efe:a9fe:a9fe]",
        "2001:db8::5efe:a9fe:a9fe",
        "metadata",
    ),
]

# Allowed for an admin's backbone (a local or private LLM server), refused for
# a researcher's endpoint unless the operator allowed the network.
NOT_PUBLIC = [
    _form("loopback", "127.0.0.1:8080", "127.0.0.1", "not a public address"),
    _form("localhost-other-port", "localhost:11434", "127.0.0.1", "not a public"),
    _form("loopback-v6", "[::1]:8080", "::1", "not a public address"),
    _form("private-10", "10.0.0.5:8000", "10.0.0.5", "not a public address"),
    _form("private-172", "172.16.4.2:8000", "172.16.4.2", "not a public address"),
    _form("private-192", "192.168.1.20", "192.168.1.20", "not a public address"),
    _form("shared-cgnat", "100.64.0.1", "100.64.0.1", "not a public address"),
    _form("unique-local-v6", "[fd12:3456::1]", "fd12:3456::1", "not a public"),
    _form("private-mapped", "[::ffff:10.0.0.5]", "::ffff:a00:5", "not a public"),
]

PUBLIC_ANSWER = "93.184.216.34"  # what a name answers at saving, before rebinding
PRIVATE_ANSWER = "10.9.8.7"  # a private LLM server: fine for a backbone


class FakeDNS:
    """The resolver of oracle.backbones.endpoints, answered by the test:
    COMPOSE_DNS, and names given with ``answer`` (several answers in turn:
    each lookup takes the next, the last one stays). Unknown names resolve
    to nothing."""

    def __init__(self) -> None:
        self.script: dict[str, list[list[str]]] = {
            name: [addresses] for name, addresses in COMPOSE_DNS.items()
        }
        self.asked: list[str] = []

    def answer(self, name: str, *answers: list[str] | str) -> None:
        self.script[name] = [[a] if isinstance(a, str) else list(a) for a in answers]

    def __call__(self, host: str):
        import ipaddress

        self.asked.append(host)
        answers = self.script.get(host)
        if not answers:
            return []
        current = answers[0] if len(answers) == 1 else answers.pop(0)
        return [ipaddress.ip_address(a) for a in current]


def _forget_cached_addresses() -> None:
    """The platform caches its own names' addresses and this machine's
    interfaces (oracle.backbones.endpoints); a test that fakes them starts and
    ends without that cache."""
    with endpoints._cache_lock:
        endpoints._resolved_cache.clear()
        endpoints._interfaces_cache[:] = [0.0, frozenset()]


@pytest.fixture
def fake_dns(monkeypatch, settings):
    dns = FakeDNS()
    monkeypatch.setattr(endpoints, "resolve", dns)
    settings.REALICU_APP_ADDRESSES = [APP_ADDRESS]
    _forget_cached_addresses()
    yield dns
    _forget_cached_addresses()


@pytest.fixture
def no_socket_opened(monkeypatch):
    """Fails a test that opens a TCP connection; yields the list of attempts."""
    import socket

    attempts: list = []

    def refuse(address, *args, **kwargs):
        attempts.append(address)
        raise OSError("a connection was opened")

    monkeypatch.setattr(socket, "create_connection", refuse)
    yield attempts
