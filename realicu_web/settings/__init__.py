"""Settings, read from the environment: base.py, then security.py."""

from .base import *  # noqa: F401,F403
from .security import *  # noqa: F401,F403
