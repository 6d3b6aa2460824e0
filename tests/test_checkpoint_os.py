"""checkpoint.py against the operating system: what the path names decides, before any byte is parsed.

Every load runs in a forked child under a memory cap and a timeout, so a loader that hangs on a
FIFO or reads /dev/zero forever fails its test instead of taking the test run down with it.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

import resumable_core as rc
from resumable_core.crash import run_in_child
from resumable_core.errors import (
    CheckpointFolderMissingError,
    CheckpointNotAFileError,
    CheckpointTooLargeError,
    CheckpointUnreadableError,
)

_MEMORY_HEADROOM = 512 * 1024 * 1024
"""Bytes of address space a loading child may add to what it inherited."""
_HANG_GUARD_SECONDS = 60.0
"""A load still running after this long is killed and fails its test (it would hang forever)."""


def _cap_memory() -> None:
    with open("/proc/self/statm") as f:
        inherited = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = inherited + _MEMORY_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))


def _refused_in_child(path: Path, error: type[rc.CheckpointError], words: str) -> None:
    """Load ``path`` in a capped child; the child fails unless the load raises ``error`` with ``words``."""

    def body() -> None:
        _cap_memory()
        with pytest.raises(error) as info:
            rc.load_checkpoint(path)
        if info.value.path != path or words not in info.value.reason:
            raise AssertionError(f"refused, but as {info.value!r}")

    assert run_in_child(body, timeout=_HANG_GUARD_SECONDS) == "exited"


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "cp.json")  # nobody ever opens its write end
    return tmp / "cp.json"


def _symlink_to_dev_zero(tmp: Path) -> Path:
    (tmp / "cp.json").symlink_to("/dev/zero")
    return tmp / "cp.json"


def _directory(tmp: Path) -> Path:
    (tmp / "cp.json").mkdir()
    return tmp / "cp.json"


def _parent_is_a_file(tmp: Path) -> Path:
    (tmp / "runs").write_text("not a folder")
    return tmp / "runs" / "cp.json"


def _name_too_long(tmp: Path) -> Path:
    return tmp / ("c" * 300 + ".json")


def _missing_folder(tmp: Path) -> Path:
    return tmp / "unmounted-volume" / "cp.json"


def _dangling_symlink(tmp: Path) -> Path:
    (tmp / "cp.json").symlink_to(tmp / "unmounted-volume" / "cp.json")
    return tmp / "cp.json"


def _io_error(tmp: Path) -> Path:
    return Path("/proc/self/mem")  # a regular file whose first read fails with EIO


def _sparse_17_mib(tmp: Path) -> Path:
    with open(tmp / "cp.json", "wb") as f:
        f.truncate(17 * 1024 * 1024)  # sparse: no disk used, but 17 MiB of NULs to read
    return tmp / "cp.json"


@pytest.mark.parametrize(
    "make, error, words",
    [
        (_fifo, CheckpointNotAFileError, "a FIFO, not a regular file"),
        (_symlink_to_dev_zero, CheckpointNotAFileError, "a character device, not a regular file"),
        (_directory, CheckpointNotAFileError, "a directory, not a regular file"),
        (_parent_is_a_file, CheckpointUnreadableError, "a parent in the path is a file"),
        (_name_too_long, CheckpointUnreadableError, "name is too long"),
        (_missing_folder, CheckpointFolderMissingError, "unmounted-volume does not exist"),
        (_dangling_symlink, CheckpointFolderMissingError, "a symlink to the missing"),
        (_io_error, CheckpointUnreadableError, "an I/O error"),
        (_sparse_17_mib, CheckpointTooLargeError, "over the 16777216-byte cap"),
    ],
    ids=lambda v: v.__name__.strip("_") if callable(v) and not isinstance(v, type) else None,
)
def test_what_is_not_a_readable_regular_file_is_refused_at_once(
    tmp_path: Path, make: Callable[[Path], Path], error: type[rc.CheckpointError], words: str
) -> None:
    """FIFOs, devices, folders, OS errors, missing folders and oversize files: a CheckpointError, never a hang."""
    _refused_in_child(make(tmp_path), error, words)


def test_a_symlink_to_a_checkpoint_loads(tmp_path: Path) -> None:
    """A symlink to a regular checkpoint file is followed and loads like the file itself."""
    cp = rc.new_checkpoint("t")
    rc.save_checkpoint(cp, tmp_path / "real.json")
    (tmp_path / "cp.json").symlink_to(tmp_path / "real.json")
    assert rc.load_checkpoint(tmp_path / "cp.json") == cp


def test_a_file_without_read_permission_is_refused() -> None:
    """A file this user may not read is a CheckpointUnreadableError (as root, checked as user nobody)."""
    # pytest's tmp_path sits in a 0700 folder of root's; nobody needs a folder it may enter
    folder = Path(tempfile.mkdtemp(prefix="checkpoint-perm-"))
    try:
        folder.chmod(0o755)
        path = folder / "cp.json"
        rc.save_checkpoint(rc.new_checkpoint("t"), path)
        path.chmod(0)

        def body() -> None:
            if os.geteuid() == 0:  # root reads any file: drop to nobody so the mode bits count
                os.setgid(65534)
                os.setuid(65534)
            with pytest.raises(CheckpointUnreadableError, match="permission denied"):
                rc.load_checkpoint(path)

        assert run_in_child(body, timeout=_HANG_GUARD_SECONDS) == "exited"
    finally:
        shutil.rmtree(folder)
