"""The disk quota: a scratch folder, or a shared folder, on a size-capped tmpfs the grader mounts (as root)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ._names import owned

_MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MNT_DETACH = 2, 4, 32, 2
_FULL = 64 << 10
"""Free bytes under which the scratch tmpfs counts as full (the disk limit hit)."""


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(target: Path, flags: int, options: str) -> None:
    if _libc().mount(b"tmpfs", os.fsencode(target), b"tmpfs", flags, options.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(target))


def umount(target: Path) -> None:
    if _libc().umount2(os.fsencode(target), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(target))


def _copy_file(src: str, dest: Path, left: int) -> int:
    """Copy ``src`` if it is a regular file of at most ``left`` bytes; the bytes written.

    A symlink, fifo, socket or device (even one swapped in) is skipped, and so is a file too big
    for what is left: its size is what a copy writes, holes and all (a sparse file of 64 MiB takes
    no room in the tmpfs but 64 MiB on the disk it is copied to).
    """
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # a symlink (ELOOP), a fifo with no writer, or gone
        return 0
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > left:
            return 0
        with open(dest, "wb") as out:
            shutil.copyfileobj(f, out, 1 << 20)
            written = out.tell()
        os.chmod(dest, stat.S_IMODE(st.st_mode) & 0o777)
        return written


def copy_regular(src: Path, dest: Path, budget: int | None = None) -> None:
    """The folders and regular files under ``src`` into ``dest``, at most ``budget`` bytes; no link followed."""
    left = (1 << 62) if budget is None else budget
    todo = [(src, dest)]  # a loop, not recursion: a learner may nest folders thousands deep
    while todo:
        here, there = todo.pop()
        with os.scandir(here) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    (there / entry.name).mkdir(exist_ok=True)
                    todo.append((Path(entry.path), there / entry.name))
                elif entry.is_file(follow_symlinks=False):
                    left -= _copy_file(entry.path, there / entry.name, left)


def _empty(folder: Path) -> None:
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


class Disk:
    """The scratch folder on a tmpfs of its own for one run: what the sandbox writes there is capped.

    The choice: the host's scratch folder, bound as it is, is capped only by the host's disk
    (``RLIMIT_FSIZE`` caps each file, not their number), and a tmpfs made inside the sandbox is gone
    with the result file when the sandbox ends. So the grader (as root: mounting needs it) mounts a
    tmpfs on the host, copies the scratch folder in, remounts it at that size plus ``Limits.disk``
    (plus as many inodes as pages), binds it at :data:`SCRATCH`, and once the sandbox is dead puts its
    folders and regular files back into the scratch folder: never a symlink, fifo or device, so the
    grader reads nothing a learner points it at. Its pages count against the memory cgroup as well.
    """

    def __init__(self, scratch: Path, size: int) -> None:
        # Beside the scratch folder, never inside it (a TMPDIR under it): the copy in would copy itself.
        self.path = Path(tempfile.mkdtemp(prefix=owned("resumable-sandbox-disk-"), dir=scratch.parent))
        self.mounted = False
        self.capacity = size
        try:
            _mount_tmpfs(self.path, _MS_NOSUID | _MS_NODEV, "mode=0700")
            self.mounted = True
            copy_regular(scratch, self.path)
            used = os.statvfs(self.path)
            blocks, inodes = used.f_blocks - used.f_bfree, used.f_files - used.f_ffree
            self.capacity = blocks * used.f_frsize + size
            """Bytes it may hold: what was copied in, and the disk cap (all a copy back may write)."""
            options = f"size={self.capacity},nr_inodes={inodes + max(1024, size // 4096)}"
            _mount_tmpfs(self.path, _MS_REMOUNT | _MS_NOSUID | _MS_NODEV, options)
        except OSError:
            self.remove()
            raise

    def full(self) -> bool:
        """Whether the sandbox filled it: less than :data:`_FULL` bytes or no inode left."""
        free = os.statvfs(self.path)
        return free.f_bavail * free.f_frsize < _FULL or free.f_favail == 0

    def copy_back(self, scratch: Path) -> None:
        """Make ``scratch`` hold what the sandbox left (call only when every process of it is dead)."""
        _empty(scratch)
        copy_regular(self.path, scratch, self.capacity)

    def remove(self) -> None:
        if self.mounted:
            umount(self.path)
        self.mounted = False
        self.path.rmdir()


@contextlib.contextmanager
def capped_folder(size: int) -> Iterator[Path]:
    """A fresh folder to bind read-write (``rw=``) into sandboxes, on a tmpfs of ``size`` bytes.

    Where the grader may not mount (not root) it is a plain temporary folder, capped only by the
    disk. Removed, with all in it, at the end.
    """
    path = Path(tempfile.mkdtemp(prefix=owned("resumable-sandbox-shared-")))
    try:
        _mount_tmpfs(path, _MS_NOSUID | _MS_NODEV, f"size={size},nr_inodes={max(1024, size // 4096)},mode=0700")
    except PermissionError:
        mounted = False
    else:
        mounted = True
    try:
        yield path
    finally:
        if mounted:
            umount(path)  # detached: its files go with it
            path.rmdir()
        else:
            shutil.rmtree(path, ignore_errors=True)


def disk_for(scratch: Path, size: int) -> Disk | None:
    """The scratch folder's own tmpfs, or None where the grader may not mount one (not root): no quota."""
    try:
        return Disk(scratch, size)
    except PermissionError:
        return None
