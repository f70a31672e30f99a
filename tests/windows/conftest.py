"""Fixtures of the windows tests."""

import pytest

from tests.factories import make_user
from tests.windows.mimic_files import mimic_tables, write_mimic


@pytest.fixture
def signed_in(client):
    """The test client, signed in as a physician."""
    client.force_login(make_user(role="physician"))
    return client


@pytest.fixture
def mimic_dir(tmp_path):
    """The MIMIC-IV folder of tests/windows/mimic_files.py, as it is."""
    return write_mimic(tmp_path / "mimic", mimic_tables())
