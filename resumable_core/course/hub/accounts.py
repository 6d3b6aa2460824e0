"""The class's UNIX accounts: an instructor, a grader and students, made and removed by the kit only.

nbgrader's exchange tells students apart by their UIDs, so each person of the class is a real
account. Every name carries a prefix (``ra-`` by default) so none clashes with a real user, and every
account the kit makes carries :data:`MARK` in its GECOS field: :func:`remove` deletes only those,
never an account someone else made under the same name.
"""

from __future__ import annotations

import grp
import os
import pwd
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import CourseError

MARK = "resumable-agents class account"
"""The GECOS field of every account the kit makes: what :func:`remove` looks for."""
STUDENTS = 3
PROFILE_D = Path("/etc/profile.d")


class AccountError(CourseError, RuntimeError):
    """An account cannot be made or removed; carries the ``name`` and a one-line ``reason``."""

    def __init__(self, name: str, reason: str) -> None:
        self.name, self.reason = name, reason
        super().__init__(f"account {name}: {reason}")


@dataclass(frozen=True)
class Roster:
    """The class's account names, all under one ``prefix``."""

    prefix: str = "ra-"
    students_count: int = STUDENTS

    @property
    def instructor(self) -> str:
        return f"{self.prefix}instructor"

    @property
    def grader(self) -> str:
        return f"{self.prefix}grader"

    @property
    def students(self) -> tuple[str, ...]:
        return tuple(f"{self.prefix}student{i}" for i in range(1, self.students_count + 1))

    @property
    def staff(self) -> tuple[str, ...]:
        """Who grades: the instructor and the grader (formgrader's group)."""
        return (self.instructor, self.grader)

    @property
    def everyone(self) -> tuple[str, ...]:
        return (*self.staff, *self.students)

    @property
    def staff_group(self) -> str:
        """The UNIX group that may read the course folder and the staff's environment."""
        return f"{self.prefix}staff"


def _run(command: list[str], name: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AccountError(name, f"`{' '.join(command)}` failed: {done.stderr.strip() or done.returncode}")


def _exists(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def _group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def _require_root() -> None:
    if os.geteuid() != 0:
        raise AccountError("(any)", "making or removing the class's accounts needs root (run make hub as root)")


def ensure(roster: Roster) -> None:
    """Make every account of ``roster`` that is missing; an existing one is kept if the kit made it (idempotent)."""
    _require_root()
    if not _group_exists(roster.staff_group):
        _run(["groupadd", roster.staff_group], roster.staff_group)
    for name in roster.everyone:
        found = _exists(name)
        if found is not None and found.pw_gecos != MARK:
            raise AccountError(
                name, f"exists but was not made by the kit (no {MARK!r} in its GECOS); choose another prefix"
            )
        if found is None:
            _run(["useradd", "--create-home", "--shell", "/bin/bash", "--comment", MARK, name], name)
        home = Path(pwd.getpwnam(name).pw_dir)
        home.chmod(0o700)  # a student's work is no classmate's to read
    for name in roster.staff:
        _run(["usermod", "--append", "--groups", roster.staff_group, name], name)


def profile(prefix: str) -> Path:
    """The class's login-shell script: JupyterLab's terminal is ``bash -l``, whose ``/etc/profile`` resets PATH."""
    return PROFILE_D / f"resumable-class-{prefix.rstrip('-')}.sh"


def write_profile(roster: Roster, bins: dict[Path, tuple[str, ...]]) -> Path:
    """Put each ``bins`` folder first on PATH in its accounts' login shells (``python -m resumable_core check``)."""
    lines = [
        f"# Written by resumable_core.course.hub for the {roster.prefix} class; `hub remove` deletes it.",
        'case "$(id -un)" in',
    ]
    lines += [f'  {"|".join(names)}) PATH={shlex.quote(str(folder))}:"$PATH" ;;' for folder, names in bins.items()]
    lines.append("esac\n")
    path = profile(roster.prefix)
    path.write_text("\n".join(lines), encoding="utf-8")
    path.chmod(0o644)
    return path


def made_by_kit(prefix: str) -> list[str]:
    """The accounts under ``prefix`` that carry the kit's mark."""
    return sorted(p.pw_name for p in pwd.getpwall() if p.pw_name.startswith(prefix) and p.pw_gecos == MARK)


def remove(prefix: str = "ra-") -> list[str]:
    """Delete every account under ``prefix`` that the kit made, their homes and the staff group; return their names."""
    _require_root()
    removed = made_by_kit(prefix)
    for name in removed:
        _run(["userdel", "--remove", name], name)
    profile(prefix).unlink(missing_ok=True)
    group = Roster(prefix).staff_group
    if _group_exists(group) and not grp.getgrnam(group).gr_mem:
        _run(["groupdel", group], group)
    return removed
