"""Fixtures of the windows tests."""

import pytest

from tests.factories import make_user


@pytest.fixture
def signed_in(client):
    """The test client, signed in as a physician."""
    client.force_login(make_user(role="physician"))
    return client
