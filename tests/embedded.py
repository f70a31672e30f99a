"""The embedded default (`make run`: SQLite and the filesystem broker under
REALICU_VAR_DIR, no server configured) in tests that start its processes; the
session's bootstrapped folder is the fixture ``embedded_bootstrap``
(tests/conftest.py)."""

import os
import shutil

# The demo accounts' password in the embedded default's tests.
EMBEDDED_PASSWORD = "embedded-test-Password-1"


def embedded_env(var) -> dict:
    """The environment of the embedded default (`make run`) in the folder ``var``:
    no database, broker or cache configured, so SQLite and the filesystem broker
    under REALICU_VAR_DIR."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DATABASE_URL",
            "CELERY_BROKER_URL",
            "CACHE_URL",
            "DJANGO_SETTINGS_MODULE",
        )
    }
    env.update(
        REALICU_VAR_DIR=str(var),
        REALICU_ADMIN_PASSWORD=EMBEDDED_PASSWORD,
        REALICU_PHYSICIAN_PASSWORD=EMBEDDED_PASSWORD,
        REALICU_RESEARCHER_PASSWORD=EMBEDDED_PASSWORD,
    )
    return env


class EmbeddedBootstrap:
    """A folder on which `manage.py bootstrap` ran (the CLIF demo imported, its
    windows, concept tracks and cohort, the demo accounts), and its output."""

    def __init__(self, folder, stdout: str):
        self.folder = folder
        self.stdout = stdout

    def copy(self, tmp_path_factory, name: str):
        """A folder of its own holding the bootstrapped database and files."""
        var = tmp_path_factory.mktemp(name)
        shutil.copytree(self.folder, var, dirs_exist_ok=True)
        return var
