"""A throwaway PostgreSQL cluster for the tests, from the Debian server binaries.

`initdb` into a temporary folder, `pg_ctl start` listening only on a unix socket in
that folder (no TCP port to collide with), stopped and deleted at exit. initdb
refuses to run as root, so as root the cluster belongs to `nobody` and its
binaries run through `setpriv`. Each test gets a schema of its own, named in the
URL's `search_path`, so tests never see each other's memories.

`why_not()` says why no cluster can be started here (tests skip with that reason).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

USER = "ragbudget"
DATABASE = "postgres"
_BINARIES = "/usr/lib/postgresql/*/bin"


def bin_dir() -> Path | None:
    """The newest installed server's binaries (Debian layout), or None."""
    found = sorted(
        glob.glob(f"{_BINARIES}/initdb"),
        key=lambda path: int(Path(path).parts[-3]),
    )
    return Path(found[-1]).parent if found else None


def why_not() -> str | None:
    """Why no cluster can be started here, or None when one can."""
    if importlib.util.find_spec("psycopg") is None:
        return "psycopg is not installed (pip install 'langchain-ragbudget[postgres]')"
    if bin_dir() is None:
        return f"no PostgreSQL server binaries ({_BINARIES}; apt install postgresql)"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "running as root, and setpriv (util-linux) is absent to drop to nobody"
    return None


def _as_owner(command: Sequence[str]) -> list[str]:
    """`command` run as the cluster's owner: this user, or `nobody` under root."""
    if os.geteuid() != 0:
        return list(command)
    nobody = pwd.getpwnam("nobody")
    return [
        "setpriv",
        f"--reuid={nobody.pw_uid}",
        f"--regid={nobody.pw_gid}",
        "--clear-groups",
        *command,
    ]


@contextmanager
def cluster(*, durable: bool = False) -> Iterator[str]:
    """A running cluster; yields its socket folder (the URL's `host`).

    Not `durable` (for tests): no fsync and no waiting for the WAL at commit.
    `durable`: the server's defaults, as a real deployment runs (benchmarks).
    """
    binaries = bin_dir()
    assert binaries is not None, why_not()
    folder = Path(tempfile.mkdtemp(prefix="ragbudget-pg-"))
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
    data = folder / "data"
    try:
        _run(
            folder,
            [
                f"{binaries}/initdb",
                "--pgdata",
                str(data),
                "--username",
                USER,
                "--auth",
                "trust",
                "--no-sync",
                "--no-instructions",
            ],
        )
        options = f"-c listen_addresses='' -c unix_socket_directories='{folder}'"
        if not durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        _run(
            folder,
            [
                f"{binaries}/pg_ctl",
                "--pgdata",
                str(data),
                "--log",
                str(folder / "server.log"),
                "--options",
                options,
                "--wait",
                "start",
            ],
        )
        yield str(folder)
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(
                _as_owner(
                    [
                        f"{binaries}/pg_ctl",
                        *("--pgdata", str(data), "--mode", "immediate"),
                        *("--wait", "stop"),
                    ]
                ),
                check=False,
                capture_output=True,
            )
        shutil.rmtree(folder, ignore_errors=True)


def _run(folder: Path, command: list[str]) -> None:
    """Run `command` as the cluster's owner; its output in the error if it fails."""
    done = subprocess.run(
        _as_owner(command), capture_output=True, text=True, cwd=folder, check=False
    )
    if done.returncode:
        raise RuntimeError(
            f"{command[0]} failed ({done.returncode}): {done.stdout}{done.stderr}"
        )


def url(host: str, schema: str | None = None) -> str:
    """A URL of the cluster; with `schema`, memories go into that schema."""
    base = f"postgresql://{USER}@/{DATABASE}?host={host}"
    return base if schema is None else f"{base}&options=-csearch_path%3D{schema}"


def new_schema(host: str) -> str:
    """A URL whose memories live in a new, empty schema."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url(host), autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    return url(host, schema)
