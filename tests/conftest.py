"""Shared fixtures. Tests run on PostgreSQL (DATABASE_URL, set by `make test`)."""
import pytest


@pytest.fixture(scope="session")
def clif_demo_dir():
    from windows.importers.clif import clif_demo_directory

    return clif_demo_directory()
