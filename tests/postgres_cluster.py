"""A private PostgreSQL cluster for the tests: ``initdb`` in a folder of its own, its own socket folder and port.

One implementation for both callers. ``.ci/run`` starts one before ``make test`` and stops it after,
however the tests end::

    python3 tests/postgres_cluster.py start FOLDER   # prints the cluster's URL (RESUMABLE_TEST_POSTGRES_URL)
    python3 tests/postgres_cluster.py stop FOLDER    # stops it and removes FOLDER

and ``tests/test_postgres_gradebook.py``'s fixture starts one the same way when that variable is not
set. Standard library only: ``.ci/run`` runs it before the venv exists.

The cluster listens on 127.0.0.1 at a free port and on a Unix socket in ``FOLDER/socket`` (not
the system's ``/var/run/postgresql``), so it meets no other server on the machine. Its superuser
logs in with a password made for it (scram-sha-256), never ``trust``: another user of the machine
can reach the port too. As root the binaries run as the ``postgres`` user (``initdb`` refuses
root), through ``runuser``, and ``FOLDER`` is handed to that user. It is thrown away after the
tests, so nothing is synced to disk (``fsync=off``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

URL_VARIABLE = "RESUMABLE_TEST_POSTGRES_URL"
"""Set by ``.ci/run``: the URL of a running cluster the tests use instead of starting their own."""
SUPERUSER = "resumable"
RUN_AS = "postgres"
"""The system user the binaries run as when the caller is root (Debian's ``postgresql`` package makes it)."""
BINARIES = Path("/usr/lib/postgresql")
"""Where Debian puts each major version's ``bin/`` (``initdb`` and ``pg_ctl`` are not on PATH there)."""
START_TRIES = 3
"""How many free ports to try: another process may take the one picked before the server binds it."""


def bin_folder() -> Path | None:
    """The newest ``/usr/lib/postgresql/<major>/bin`` holding ``initdb`` and ``pg_ctl``, or PATH's; None if neither."""
    found = [p for p in BINARIES.glob("*/bin") if (p / "initdb").is_file() and (p / "pg_ctl").is_file()]
    if found:
        return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    on_path = shutil.which("pg_ctl")
    return Path(on_path).resolve().parent if on_path and shutil.which("initdb") else None


def unavailable() -> str | None:
    """Why no cluster can be started here (one line naming what to install), or None if one can."""
    if bin_folder() is None:
        return f"no PostgreSQL server binaries ({BINARIES}/*/bin/initdb); .ci/run installs Debian's postgresql"
    if os.geteuid() == 0 and (shutil.which("runuser") is None or _uid(RUN_AS) is None):
        return f"running as root needs the {RUN_AS!r} user and runuser; .ci/run installs Debian's postgresql"
    return None


def _uid(user: str) -> tuple[int, int] | None:
    """(uid, gid) of ``user``, or None if there is no such user."""
    import pwd

    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


@dataclass(frozen=True)
class Cluster:
    """A running private cluster: its folder, port and superuser's password."""

    folder: Path
    port: int
    password: str

    @property
    def url(self) -> str:
        """Its SQLAlchemy URL, with psycopg2 (SQLAlchemy 2's bare ``postgresql://`` means psycopg 3)."""
        return f"postgresql+psycopg2://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/postgres"


def _run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    """Run one of the server's binaries (as ``postgres`` when we are root); raise with its output if it fails."""
    command = [str(a) for a in argv]
    if os.geteuid() == 0:
        command = ["runuser", "-u", RUN_AS, "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd="/")
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {(done.stdout + done.stderr).strip()}")
    return done


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(folder: str | Path) -> Cluster:
    """Make a cluster in ``folder`` (created if missing, empty) and start it; return it once it accepts connections."""
    why = unavailable()
    if why is not None:
        raise RuntimeError(why)
    bin_dir = bin_folder()
    assert bin_dir is not None  # unavailable() said so
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "socket").mkdir(mode=0o700)
    password = secrets.token_hex(16)
    pwfile = folder / "password"
    pwfile.write_text(password + "\n")
    pwfile.chmod(0o600)
    if os.geteuid() == 0:
        owner = _uid(RUN_AS)
        assert owner is not None  # unavailable() said so
        for path in (folder, folder / "socket", pwfile):
            os.chown(path, *owner)
    data = folder / "data"
    _run(bin_dir / "initdb", "-D", data, "-U", SUPERUSER, "--pwfile", pwfile, "--auth", "scram-sha-256",
         "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions")  # fmt: skip
    pwfile.unlink()
    settings = f"listen_addresses = '127.0.0.1'\nunix_socket_directories = '{folder / 'socket'}'\nfsync = off\n"
    for attempt in range(START_TRIES):
        port = _free_port()
        with open(data / "postgresql.conf", "a") as conf:  # the last setting of a name wins
            conf.write(settings + f"port = {port}\n")
        try:
            _run(bin_dir / "pg_ctl", "-D", data, "-l", folder / "server.log", "-w", "-t", "60", "start")
        except RuntimeError:
            if attempt == START_TRIES - 1 or "could not bind" not in _log(folder):
                raise
            continue
        return Cluster(folder, port, password)
    raise AssertionError("unreachable")


def _log(folder: Path) -> str:
    try:
        return (folder / "server.log").read_text(errors="replace")
    except OSError:
        return ""


def stop(folder: str | Path) -> None:
    """Stop the cluster in ``folder`` (if it runs) and remove ``folder``."""
    folder = Path(folder).resolve()
    bin_dir = bin_folder()
    data = folder / "data"
    if bin_dir is not None and (data / "postmaster.pid").exists():
        try:
            _run(bin_dir / "pg_ctl", "-D", data, "-m", "fast", "-w", "-t", "60", "stop")
        except RuntimeError:
            _run(bin_dir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
    shutil.rmtree(folder, ignore_errors=True)


def new_folder() -> Path:
    """A fresh folder for a cluster, outside pytest's ``tmp_path`` (whose 0700 parents ``postgres`` cannot enter)."""
    return Path(tempfile.mkdtemp(prefix="resumable-postgres-"))


def main(argv: list[str]) -> int:
    """``start FOLDER`` (prints the URL) or ``stop FOLDER``."""
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: postgres_cluster.py start|stop FOLDER", file=sys.stderr)
        return 2
    try:
        if argv[0] == "start":
            print(start(argv[1]).url)
        else:
            stop(argv[1])
    except RuntimeError as e:  # a binary failed or is missing: its one line, not a traceback
        print(f"postgres_cluster.py {argv[0]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
