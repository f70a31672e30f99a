"""The one access policy (accounts.access): anonymous users sign in first, a
wrong role is a 403 that says who may open the page, and an object outside the
user's scope is a 404 that does not tell "not yours" from "none"."""

import pytest
from django.urls import reverse

from accounts.roles import Role
from annotation.models import Assignment
from tests.annotation.conftest import (  # noqa: F401 - fixtures
    campaign,
    clinical,
    gold_windows,
    make_role_user,
    physicians,
    stay,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("url_name", "role", "says"),
    [
        ("annotation:campaign_list", Role.PHYSICIAN, "for admins"),
        ("oracle:run_list", Role.RESEARCHER, "for admins"),
        ("windows:import_list", Role.PHYSICIAN, "for admins"),
        ("annotation:queue", Role.RESEARCHER, "Only physicians label windows"),
        ("windows:stay_list", Role.RESEARCHER, "Researchers reach the benchmark"),
        ("exports:release_list", Role.PHYSICIAN, "Releases are for researchers"),
    ],
)
def test_a_wrong_role_is_a_403_that_names_who_may(client, url_name, role, says):
    url = reverse(url_name)
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    client.force_login(make_role_user(role))
    response = client.get(url)
    assert response.status_code == 403
    assert says in response.content.decode()


def test_an_assignment_of_someone_else_is_a_404_like_one_that_does_not_exist(
    client, campaign
):
    theirs = Assignment.objects.filter(campaign=campaign).first()
    me = make_role_user(Role.PHYSICIAN)
    client.force_login(me)
    url = reverse("annotation:annotate", args=[theirs.pk])
    missing = reverse("annotation:annotate", args=[theirs.pk + 10_000])
    assert client.get(url).status_code == 404
    assert client.get(missing).status_code == 404
