"""Where each role lands, at "/" and after signing in: a physician on the queue
of windows to label, an admin (also one who labels) on the stays, a researcher
on the releases; a ``next`` on this site is still followed, one to another
site never."""

import pytest
from django.urls import reverse

from accounts.roles import Role, roles_ensure
from tests.factories import make_user

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
QUEUE = reverse("annotation:queue")
STAYS = reverse("windows:stay_list")
RELEASES = reverse("exports:release_list")


def _user(*roles: str):
    user = make_user(staff=Role.ADMIN in roles, password=PASSWORD)
    groups = roles_ensure()
    for role in roles:
        user.groups.add(groups[role])
    return user


def _sign_in(client, user, next_url: str | None = None):
    url = reverse("login") + (f"?next={next_url}" if next_url is not None else "")
    data = {"username": user.username, "password": PASSWORD}
    if next_url is not None:
        data["next"] = next_url
    return client.post(url, data)


def _landing(client, response) -> str:
    """Where a redirect chain from ``response`` ends."""
    assert response.status_code == 302, response.status_code
    url = response.url
    for _ in range(5):
        followed = client.get(url)
        if followed.status_code != 302:
            return url
        url = followed.url
    raise AssertionError(f"too many redirects from {response.url}")


@pytest.mark.parametrize(
    ("roles", "landing"),
    [
        ((Role.PHYSICIAN,), QUEUE),
        ((Role.ADMIN,), STAYS),
        ((Role.PHYSICIAN, Role.ADMIN), STAYS),  # the admin's landing
        ((Role.RESEARCHER,), RELEASES),
    ],
)
def test_each_role_lands_where_its_work_is_after_signing_in_and_at_root(
    client, roles, landing
):
    user = _user(*roles)
    assert _landing(client, _sign_in(client, user)) == landing
    assert _landing(client, client.get("/")) == landing
    assert client.get(landing).status_code == 200


def test_a_physicians_queue_is_the_page_they_land_on(client):
    user = _user(Role.PHYSICIAN)
    response = client.get(_landing(client, _sign_in(client, user)))
    assert response.status_code == 200
    assert response.resolver_match.view_name == "annotation:queue"


def test_root_sends_an_anonymous_visitor_to_sign_in_then_to_their_landing(client):
    response = client.get("/")
    assert response.status_code == 302 and response.url == reverse("login")
    physician = _user(Role.PHYSICIAN)
    assert _landing(client, _sign_in(client, physician)) == QUEUE


def test_next_on_this_site_is_still_followed(client):
    physician = _user(Role.PHYSICIAN)
    target = reverse("windows:stay_list") + "?q=x"
    assert _sign_in(client, physician, next_url=target).url == target


@pytest.mark.parametrize(
    "outside",
    ["https://evil.example/queue", "//evil.example/", "http:///evil.example"],
)
def test_next_to_another_site_is_ignored_for_the_roles_landing(client, outside):
    physician = _user(Role.PHYSICIAN)
    response = _sign_in(client, physician, next_url=outside)
    assert "evil.example" not in response.url
    assert _landing(client, response) == QUEUE


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_physician_signing_in_in_the_browser_sees_their_queue(live_server):
    from tests.browser import chromium

    physician = _user(Role.PHYSICIAN)
    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
        page.goto(f"{live_server.url}/")
        page.wait_for_url("**/accounts/login/**")
        page.fill("input[name=username]", physician.username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}{QUEUE}")
        current = page.locator(".mainnav [aria-current=page]")
        assert current.inner_text() == "My queue"
