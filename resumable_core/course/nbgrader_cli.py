"""The one way the course wing runs the nbgrader command line (release, check, grading alike).

nbgrader runs as ``python -m nbgrader`` with this interpreter, in the course folder, with the
interpreter's bin folder first on PATH (nbgrader shells out to ``alembic`` to make a gradebook) and
without ``RESUMABLE_LIVE`` (grading and release always run against the scripted Claude).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from .errors import CourseError

__all__ = ["NbgraderError", "env", "nbgrader"]

STDERR_TAIL = 3000
"""How much of a failed command's stderr its error keeps (nbgrader logs a lot before the cause)."""


class NbgraderError(CourseError, RuntimeError):
    """An nbgrader command exited non-zero; ``.command``, ``.returncode`` and ``.stderr`` say how."""

    def __init__(self, command: list[str], returncode: int, stderr: str) -> None:
        self.command, self.returncode, self.stderr = command, returncode, stderr
        last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "no output on stderr")
        super().__init__(
            f"`nbgrader {' '.join(command)}` failed with exit code {returncode}: {last} (see .stderr for its log)"
        )


def env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment nbgrader (and everything it starts) runs in, from ``base`` or ``os.environ``."""
    out = dict(os.environ if base is None else base)
    out["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), out.get("PATH", "")])
    out.pop("RESUMABLE_LIVE", None)  # grading and release never call the real API,
    out.pop("ANTHROPIC_API_KEY", None)  # so no process they start holds the key
    out.setdefault("PYTHONUNBUFFERED", "1")
    out.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # debugpy's warning would land on stderr
    out.setdefault("MPLBACKEND", "Agg")  # kernels and workers draw without a display
    return out


def nbgrader(
    args: Iterable[str], root: str | Path, *, check: bool = True, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """Run ``nbgrader <args> --CourseDirectory.root=<root>`` from the course root (where its config is read).

    Raises :class:`NbgraderError` on a non-zero exit when ``check`` (else the caller reads the result).
    """
    root = Path(root).resolve()
    command = [*args, f"--CourseDirectory.root={root}"]
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", *command],
        cwd=root,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise NbgraderError(command, proc.returncode, proc.stderr[-STDERR_TAIL:])
    return proc
