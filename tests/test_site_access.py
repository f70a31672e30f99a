"""Who reaches what across the site: researchers see releases, not raw
trajectories; a forged session cookie is treated as no session."""

from datetime import timedelta

import pytest
from django.urls import reverse

from tests.factories import make_event, make_stay, make_user
from windows.windowing import windows_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def stay():
    stay = make_stay(hours=12)
    make_event(
        admission=stay.admission,
        time=stay.intime + timedelta(hours=1),
        name="Norepinephrine start",
    )
    windows_build(stay=stay, window_minutes=30, stride_hours=2)
    return stay


def clinical_urls(stay) -> list[str]:
    return [
        reverse("windows:stay_list"),
        reverse("windows:stay_detail", args=[stay.pk]),
        reverse("windows:window_detail", args=[stay.pk, 0]),
        reverse("windows:stay_tracks_json", args=[stay.pk]),
    ]


def test_a_researcher_signed_in_on_the_site_is_refused_every_stay_page(client, stay):
    client.force_login(make_user(role="researcher"))
    for url in clinical_urls(stay):
        response = client.get(url)
        assert response.status_code == 403, url
        assert b"Norepinephrine" not in response.content
        assert b"releases" in response.content


def test_a_user_without_a_role_is_refused_too(client, stay):
    client.force_login(make_user())
    assert client.get(reverse("windows:stay_list")).status_code == 403


def test_a_physician_and_an_admin_see_the_stays(client, stay):
    for user in (make_user(role="physician"), make_user(role="admin", staff=True)):
        client.force_login(user)
        for url in clinical_urls(stay):
            assert client.get(url).status_code == 200, url


def test_the_home_page_sends_each_role_to_its_work(client):
    client.force_login(make_user(role="researcher"))
    assert client.get("/")["Location"] == reverse("exports:release_list")
    client.force_login(make_user(role="physician"))
    assert client.get("/")["Location"] == reverse("annotation:queue")
    client.force_login(make_user(role="admin", staff=True))
    assert client.get("/")["Location"] == reverse("windows:stay_list")


def test_the_menu_of_a_researcher_has_no_stays_link(client):
    client.force_login(make_user(role="researcher"))
    page = client.get(reverse("exports:release_list")).content.decode()
    assert reverse("windows:stay_list") + '"' not in page
    assert "Releases" in page


@pytest.mark.parametrize("cookie", ["abc\x00def" * 4, "'; drop table x;--", "A" * 32])
def test_a_forged_session_cookie_is_treated_as_no_session(client, cookie):
    client.cookies["sessionid"] = cookie
    response = client.get(reverse("windows:stay_list"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
