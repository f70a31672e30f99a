"""The PostgreSQL database a benchmark makes for itself and drops after: on
the server DATABASE_URL names (connecting to its ``postgres`` database to
create and drop it)."""

from __future__ import annotations

import os

ADMIN_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")


def database_name(suffix: str) -> str:
    """A benchmark's own database: DATABASE_URL's name with ``_<suffix>``."""
    name = ADMIN_URL.rpartition("/")[2].split("?", 1)[0] or "postgres"
    return f"{name}_{suffix}"


def database_url(name: str) -> str:
    """DATABASE_URL for the database ``name`` on the same server."""
    return f"{ADMIN_URL.rpartition('/')[0]}/{name}"


def _admin_conninfo() -> str:
    return database_url("postgres").replace("postgres://", "postgresql://", 1)


def database_create(name: str, *, template: str = "") -> str:
    """A new database ``name`` (an old one of that name dropped), empty or a
    copy of the database ``template``; its DATABASE_URL."""
    import psycopg

    with psycopg.connect(_admin_conninfo(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(
            f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else "")
        )
    return database_url(name)


def database_drop(name: str) -> None:
    import psycopg

    with psycopg.connect(_admin_conninfo(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def database_done(name: str, *, keep: bool = False) -> None:
    """The end of a benchmark that ran Django in this process: its connections
    closed, then the database ``name`` dropped unless ``keep``."""
    from django.db import connections

    connections.close_all()
    if not keep:
        database_drop(name)
