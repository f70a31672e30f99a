"""No input answers 5xx (issue 31, item 3), on the configured database; run on
SQLite too by tests/test_fuzz_inputs_sqlite.py.

First the known 500s, as explicit cases: a NUL byte in a release file's path
(PostgreSQL), and on SQLite integers beyond its 64-bit range: evidence
``[2**63]`` or ``[1.5e308]`` in a draft, a stay id of 2**63 in a URL, a
30-digit cohort on the campaign form, 30-digit campaigns on the calibration
draw. Then hypothesis, signed in as each role (anonymous, physician,
researcher, admin): every URL pattern of the site (walked from the resolver)
with generated path parameters, by GET and POST; and every form of the site
(its fields named by the rendered pages and by the templates) posted with
generated values, valid ids and choices mixed with huge, negative, fractional,
NUL-bearing, over-long and JSON-bomb values."""

from __future__ import annotations

import io
import json
import re
import traceback
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, urlparse

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import Resolver404, resolve, reverse
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tests.forged import (  # noqa: F401  (fixtures)
    ROLES,
    _isolated,
    client_for,
    site_routes,
    url_of,
    world,
)

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent
BIG = 2**63


# The known 500s ---------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/releases/{release_id}/files/manifest.json%00",
        "/api/v1/releases/{release_id}/files/%00",
        "/releases/{release_id}/files/manifest.json%00",
        "/api/v1/releases/{release_id}/files/" + "a/" * 2000,
        "/releases/?q=%00",
        "/stays/?sort=%00",
    ],
)
def test_a_nul_byte_or_an_overlong_path_is_a_4xx(world, path):
    response = client_for(world, "admin").get(path.format(**world["ids"]))
    assert 400 <= response.status_code < 500, response.status_code


@pytest.mark.parametrize(
    "evidence, message",
    [
        ([BIG], "the integer 9223372036854775808 is beyond the 64-bit range"),
        ([1.5e308], "evidence must be events, not 1.5e+308"),
        ([-(BIG + 1)], "beyond the 64-bit range"),
        ([2.5], "evidence must be events, not 2.5"),
    ],
)
@pytest.mark.parametrize("endpoint", ["annotation:draft", "annotation:submit"])
def test_evidence_beyond_the_integer_range_is_a_4xx_naming_it(
    world, evidence, message, endpoint
):
    client = client_for(world, "physician")
    payload = {
        "status": "stable",
        "status_evidence": evidence,
        "acute_problems": [{"text": "Shock", "evidence": evidence}],
    }
    response = client.post(
        reverse(endpoint, args=[world["ids"]["assignment_id"]]),
        {"payload": json.dumps(payload), "base_version": "0"},
    )
    assert response.status_code == 400, response.content
    assert message in response.content.decode()


@pytest.mark.parametrize(
    "path",
    [
        "/stays/9223372036854775808/windows/1/",
        "/stays/{stay_id}/windows/9223372036854775808/",
        "/stays/9223372036854775807/windows/1/",
        "/annotate/999999999999999999999999999999/",
        "/api/v1/releases/9223372036854775808/",
    ],
)
def test_an_id_beyond_the_range_in_a_url_is_a_404(world, path):
    client = client_for(world, "admin")
    assert client.get(path.format(**world["ids"])).status_code == 404


def test_a_30_digit_cohort_or_physician_on_the_campaign_form_is_its_error(world):
    client = client_for(world, "admin")
    for field, value in (("cohort", "9" * 30), ("physicians", str(BIG))):
        response = client.post(
            reverse("annotation:campaign_new"),
            {"name": "c", "annotators_per_window": "2", field: value},
        )
        assert response.status_code == 200
        assert field in response.context["form"].errors


def test_30_digit_campaigns_on_the_calibration_draw_name_no_campaign(world):
    client = client_for(world, "admin")
    response = client.post(
        reverse("annotation:calibration_draw"),
        {
            "name": "s",
            "per_stratum": "10",
            "band": "0.05",
            "campaigns": ["9" * 30, str(BIG)],
            "judges": ["9" * 30],
            "seed": "9" * 30,
        },
        follow=True,
    )
    assert response.status_code == 200
    assert "The seed must be a whole number" in response.content.decode()


# Forms of the site ------------------------------------------------------------


class _Forms(HTMLParser):
    """The forms of a page: (action, method) -> field names, and the values
    the page offers for each field (options, hidden and checkbox values)."""

    def __init__(self):
        super().__init__()
        self.forms: dict[tuple[str, str], set[str]] = {}
        self.values: dict[str, set[str]] = {}
        self._form: tuple[str, str] | None = None
        self._select: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            post = a.get("hx-post")
            method = "post" if post else (a.get("method") or "get").lower()
            self._form = (post or a.get("action") or "", method)
            self.forms.setdefault(self._form, set())
        elif tag in ("input", "select", "textarea", "button") and a.get("name"):
            name = a["name"]
            if name == "csrfmiddlewaretoken":
                return
            if self._form is not None:
                self.forms[self._form].add(name)
            if a.get("value"):
                self.values.setdefault(name, set()).add(a["value"])
            if tag == "select":
                self._select = name
        elif tag == "option" and self._select and a.get("value"):
            self.values.setdefault(self._select, set()).add(a["value"])

    def handle_endtag(self, tag):
        if tag == "form":
            self._form = None
        elif tag == "select":
            self._select = None


def _route_name(path: str) -> str | None:
    try:
        match = resolve(urlparse(path).path)
    except Resolver404:
        return None
    return match.view_name


Form = tuple[str, str]  # (URL name, method)


def _forms_of_the_templates() -> dict[Form, set[str]]:
    """(URL name, method) -> field names of every form in the templates whose
    action (or hx-post) names its URL, whatever state shows it."""
    found: dict[Form, set[str]] = {}
    for template in (ROOT / "templates").rglob("*.html"):
        text = template.read_text()
        for block in re.findall(r"<form\b.*?</form>", text, flags=re.S):
            head = block[: block.index(">")]
            named = re.search(r"""(?:action|hx-post)="\{% url '([^']+)'""", head)
            if named:
                method = "get" if 'method="get"' in head else "post"
                names = set(re.findall(r'\bname="([a-z_][a-z0-9_-]*)"', block))
                found.setdefault((named.group(1), method), set()).update(
                    names - {"csrfmiddlewaretoken"}
                )
    return found


# The annotation page's form is posted by script (static/js/annotate.js).
SCRIPT_FORMS = {
    ("annotation:draft", "post"): {"payload", "base_version", "active_seconds"},
    ("annotation:submit", "post"): {
        "payload",
        "base_version",
        "active_seconds",
        "submission_id",
    },
}


def _site_forms(world) -> tuple[dict[Form, set[str]], dict[str, set[str]]]:
    """(URL name, method) -> field names of the site's forms, and field ->
    values the pages offer, from the pages each role sees in the world and
    from the templates."""
    forms = {form: set(fields) for form, fields in SCRIPT_FORMS.items()}
    for form, fields in _forms_of_the_templates().items():
        forms.setdefault(form, set()).update(fields)
    values: dict[str, set[str]] = {}
    for role in ("physician", "researcher", "admin"):
        client = client_for(world, role)
        for route in site_routes():
            if route.name == "logout":
                continue
            page_url = url_of(route, world["ids"])
            response = client.get(page_url)
            if response.status_code != 200 or "html" not in response.get(
                "Content-Type", ""
            ):
                continue
            parser = _Forms()
            parser.feed(response.content.decode(errors="replace"))
            for (action, method), fields in parser.forms.items():
                name = _route_name(action or page_url)
                if name:
                    forms.setdefault((name, method), set()).update(fields)
            for field, offered in parser.values.items():
                values.setdefault(field, set()).update(offered)
    return forms, values


# Values ------------------------------------------------------------------------

HOSTILE = [
    "",
    "0",
    "-1",
    "1.5",
    "1e400",
    "nan",
    "inf",
    "²",
    "\x00",
    "1\x00",
    str(BIG - 1),
    str(BIG),
    str(2**31),
    "9" * 30,
    "9" * 5000,
    "x" * 5000,
    "[" * 5000,
    "<script>alert(1)</script>",
    "../../../../etc/passwd",
    '{"status": "stable"}',
]


def _json_number():
    return st.one_of(
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([BIG, BIG - 1, 1.5e308, -(BIG + 1), 0, -1]),
        st.text(max_size=8),
        st.booleans(),
        st.none(),
    )


def _payloads():
    """A label's JSON as the annotation page posts it, with any numbers and
    texts where its ids and items go."""
    evidence = st.one_of(st.lists(_json_number(), max_size=4), _json_number())
    item = st.fixed_dictionaries(
        {"text": st.one_of(st.text(max_size=30), _json_number()), "evidence": evidence}
    )
    rating = st.fixed_dictionaries(
        {
            "event_id": _json_number(),
            "rating": st.sampled_from(["best_practice", "acceptable", "", "x", 3]),
            "evidence": evidence,
        }
    )
    body = st.fixed_dictionaries(
        {
            "status": st.sampled_from(["stable", "improving", "", "x", None, 1]),
            "status_evidence": evidence,
            "acute_problems": st.lists(item, max_size=3),
            "red_flags": st.lists(item, max_size=2),
            "action_ratings": st.lists(rating, max_size=2),
        }
    )
    return st.one_of(
        body.map(lambda b: json.dumps(b, allow_nan=True)),
        st.sampled_from(["{", "[]", "null", '{"status": "\\u0000"}']),
    )


def _upload(content: bytes) -> io.BytesIO:
    handle = io.BytesIO(content)
    handle.name = "predictions.jsonl"
    return handle


def _usual_value_for(field: str, offered: dict[str, set[str]]):
    """What the page would post: one of the values it offers, else a word."""
    if field == "payload":
        return _payloads()
    if field == "file":
        return st.sampled_from([b'{"window_id": 1}\n', b""]).map(_upload)
    if offered.get(field):
        choices = sorted(offered[field])
        return st.one_of(
            st.sampled_from(choices),
            st.lists(st.sampled_from(choices), min_size=1, max_size=3, unique=True),
        )
    return st.sampled_from(["a name", "1", "0.5", "stable", "on"])


def _value_for(field: str, offered: dict[str, set[str]], ids: list[str]):
    choices = sorted(offered.get(field, ())) + ids
    plain = st.one_of(
        st.sampled_from(HOSTILE),
        st.text(max_size=40),
        st.text(max_size=10).map(lambda text: text + "\x00"),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        *([st.sampled_from(choices)] if choices else []),
    )
    if field == "payload":
        return st.one_of(_payloads(), plain)
    if field == "file":
        return st.one_of(
            st.binary(max_size=300), st.sampled_from([b"[" * 5000, b"\x00\xff"])
        ).map(_upload)
    return st.one_of(plain, st.lists(plain, min_size=2, max_size=3))


def _problems_of(client: Client, method: str, url: str, data=None) -> str | None:
    try:
        if method == "get":
            response = client.get(url, data or {})
        else:
            response = client.post(url, data or {})
    except Exception:  # what the server would have answered with a 500
        return (
            f"{method.upper()} {url} {data!r:.300}: exception\n"
            f"{traceback.format_exc(limit=-8)}"
        )
    if response.status_code >= 500:
        return f"{method.upper()} {url} {data!r:.300}: {response.status_code}"
    return None


EXAMPLES_PER_FORM = 20
EXAMPLES_PER_ROUTE = 8
HYPOTHESIS = {
    "deadline": None,
    "database": None,
    "suppress_health_check": list(HealthCheck),
}


def test_every_url_parameter_answers_without_a_5xx(world):
    routes = [r for r in site_routes() if r.params and r.name != "logout"]
    clients = {role: client_for(world, role) for role in ROLES}
    found: list[str] = []
    segment = st.one_of(
        st.integers(min_value=0, max_value=2**70).map(str),
        st.sampled_from(HOSTILE),
        st.text(min_size=1, max_size=20),
        st.text(max_size=10).map(lambda text: text + "\x00"),
    )

    def examples_of(route):
        @hsettings(max_examples=EXAMPLES_PER_ROUTE, **HYPOTHESIS)
        @given(
            role=st.sampled_from(ROLES),
            method=st.sampled_from(["get", "post"]),
            param=st.sampled_from(route.params),
            value=segment,
        )
        def run(role, method, param, value):
            cache.clear()
            # The route with the world's ids, one of them replaced by the value.
            marker = "8642097531864209753"  # fits every converter, names no row
            url = url_of(route, {**world["ids"], param: marker})
            url = url.replace(marker, quote(value, safe="") or "0", 1)
            problem = _problems_of(clients[role], method, url)
            if problem:
                found.append(f"{role} {problem}")

        return run

    for route in routes:  # each route its share of the examples
        examples_of(route)()
    assert not found, "\n".join(found[:10])


def test_every_form_answers_any_values_without_a_5xx(world, settings):
    # The Oracle's and the agents' forms reach LLM servers: nothing listens
    # here, and a refused connection is the service's clear error, not a 5xx.
    forms, offered = _site_forms(world)
    names = {r.name for r in site_routes()}
    posted = sorted(form for form in forms if form[0] in names)
    assert {
        ("annotation:campaign_new", "post"),
        ("annotation:calibration_draw", "post"),
        ("annotation:draft", "post"),
        ("exports:release_build_start", "post"),
        ("exports:release_new", "get"),
        ("exports:submission_upload", "post"),
        ("oracle:backbone_new", "post"),
        ("windows:import_start", "post"),
        ("windows:stay_list", "get"),
    } <= set(posted), posted
    routes = {r.name: r for r in site_routes()}
    clients = {role: client_for(world, role) for role in ROLES}
    ids = sorted({str(v) for v in world["ids"].values() if isinstance(v, int)})
    found: list[str] = []

    @st.composite
    def submissions(draw, fields: list[str]):
        """A form as the page would post it, most of its fields filled in
        with what the page offers, then one to three of them forged."""
        data = {
            f: draw(_usual_value_for(f, offered))
            for f in fields
            if draw(st.integers(0, 4))  # each field left out one time in five
        }
        forged = draw(
            st.lists(st.sampled_from(fields), unique=True, min_size=1, max_size=3)
        )
        for f in forged:
            data[f] = draw(_value_for(f, offered, ids))
        return data

    def owners_of(url: str, method: str) -> list[str]:
        owners = []
        for role in ("admin", "physician", "researcher"):
            response = getattr(clients[role], method)(url)
            login = response.status_code == 302 and "/login/" in response["Location"]
            if response.status_code not in (401, 403) and not login:
                owners.append(role)
        return owners

    def examples_of(name: str, method: str):
        url = url_of(routes[name], world["ids"])

        # Mostly as the roles the form is for, so that examples get past the
        # access check; one in four as any role.
        users = owners_of(url, method) or list(ROLES)

        @hsettings(max_examples=EXAMPLES_PER_FORM, **HYPOTHESIS)
        @given(
            data=submissions(sorted(forms[name, method]) or ["id"]),
            role=st.sampled_from(users * 3 + list(ROLES)),
        )
        def run(data, role):
            cache.clear()  # the upload throttle would answer most examples
            problem = _problems_of(clients[role], method, url, data)
            if problem:
                found.append(f"{role} {problem}")

        return run

    for name, method in posted:  # each form its share of the examples
        examples_of(name, method)()
    assert not found, "\n".join(found[:10])
