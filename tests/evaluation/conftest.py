"""The scoring library is pure: its tests need no database, cache or settings.

Overrides the session-wide cache reset of ``tests/conftest.py`` so that these
tests also run without Django (``pytest -p no:django``).
"""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _fresh_cache():
    yield
