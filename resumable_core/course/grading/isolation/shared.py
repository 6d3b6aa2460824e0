"""What every sandbox of a run sees read-only (the system, the interpreter, the venv, the library): kept unmarked.

Two covert channels run through those files: a lock (``flock``, ``fcntl``), which lives on the
inode and is still held by a frozen process, and the page cache, whose pages a job drops
(``posix_fadvise`` DONTNEED) or reads in for another job to probe (``mincore``, ``preadv2(RWF_NOWAIT)``, a timed
read); what a job did to it stays after it is frozen or gone. So:

- *Locks, separated.* Each sandbox sees those trees through read-only overlays of its own, mounted
  over them in a mount namespace the child makes before ``exec bwrap`` (:func:`enter`), which ends
  with the sandbox: another superblock, so other inodes and other locks. Its device nodes come
  from an overlay of ``/dev`` too.
- *The page cache, erased.* An overlay reads through to the real file's pages, so that stays
  shared. The overlays of a settled job (``Job.settled``: one a later job must learn nothing from)
  report every file it opens to the grader (fanotify ``FAN_OPEN``: a job can touch a file's pages
  only through a file it opened); before a job that must learn nothing from those now frozen or
  ended starts, :func:`settle` reads back every page of those files that is not cached
  (``cachestat``), so every probe finds every page, whatever they did. Other jobs report nothing.

Measured (2026-12-04, 2 busy cores): nothing for ``python -c pass``; 0.3 s more (7%) for a process
importing the kit, nbformat and anthropic (4,500 files opened), most of it reading their events;
:func:`settle` 0.05 s over those files (0.1 s the first time), and they stay cached (101 MiB).
Reading a settled job's events as it ends: 0.07 to 0.2 s, 1.1 to 1.5 s a process's first (each
file looked up once); an unsettled job reads none (2026-12-04, load 5 on 2 cores).

Root only: mounting needs ``CAP_SYS_ADMIN``. Why: ``docs/architecture.md``, "The sandbox".
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import struct
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
"""bwrap's ``--dev`` nodes, bound again from the sandbox's own overlay of ``/dev``."""

_CLONE_NEWNS = 0x20000
_MS_RDONLY, _MS_REC, _MS_SLAVE = 1, 0x4000, 1 << 19
_FAN_CLOEXEC, _FAN_NONBLOCK = 1, 2
_FAN_MARK_ADD, _FAN_MARK_FILESYSTEM = 1, 0x100
_FAN_OPEN, _FAN_OPEN_EXEC, _FAN_Q_OVERFLOW = 0x20, 0x1000, 0x4000
_EVENT = struct.Struct("IBBHQii")
"""``struct fanotify_event_metadata``: length, version, reserved, metadata length, mask, fd, pid."""
_CACHESTAT = 451
"""The ``cachestat`` system call (Linux 6.5), the same number on every architecture."""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("cache", "dirty", "writeback", "evicted", "recently_evicted")]


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


_CAP_SYS_ADMIN = 21


def available() -> bool:
    """Whether the grader may mount overlays and watch them: it holds ``CAP_SYS_ADMIN`` (root, outside a container)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    effective = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("CapEff:")), 0)
    return bool(effective >> _CAP_SYS_ADMIN & 1)


def trees(system: Iterable[Path], library: Path | None) -> list[Path]:
    """The folders to see through overlays: ``system``'s and the library, outer ones first."""
    found = {p for p in (*system, *([library] if library else [])) if p.is_dir() and not p.is_symlink()}
    return sorted(found, key=lambda p: len(p.parts))


class _Opened:
    """This process's record of the files its sandboxes opened in the overlaid trees (one fanotify group)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid = -1
        self.group = -1
        self.trees: set[Path] = set()
        self.files: set[Path] = set()
        self.links: set[str] = set()
        """What the events named, each looked up once: every sandbox opens much the same files."""
        self.live: set[int] = set()
        """The jobs running now (their numbers), and the ones running when events were lost."""
        self.lost: set[int] = set()
        self._numbers = iter(range(1, sys.maxsize))

    def fanotify(self) -> int:
        """The group's fd, made anew in a forked process (the parent's group is the parent's to read)."""
        if self.pid != os.getpid():
            fd = _libc.fanotify_init(_FAN_CLOEXEC | _FAN_NONBLOCK, os.O_RDONLY | os.O_LARGEFILE | os.O_CLOEXEC)
            if fd < 0:
                _check(-1, "fanotify_init")
            if self.group >= 0:
                os.close(self.group)
            self.pid, self.group, self.files, self.links, self.live, self.lost = (
                os.getpid(),
                fd,
                set(),
                set(),
                set(),
                set(),
            )
        return self.group

    @contextlib.contextmanager
    def job(self, tree_list: list[Path]) -> Iterator[int]:
        """While a job runs: its number and the group its overlays report to; its events read when it ends."""
        with self.lock:
            group = self.fanotify()
            self.trees.update(tree_list)
            number = next(self._numbers)
            self.live.add(number)
        try:
            yield group
        finally:
            with self.lock:
                self.read()
                self.live.discard(number)
                self.lost.discard(number)

    def _found(self, link: str) -> set[Path]:
        """The host's files an overlay's file may be: ``link`` names it from the host's root or from the overlay's."""
        named = Path(link)
        found = {t / link.lstrip("/") for t in self.trees} | {named for t in self.trees if named.is_relative_to(t)}
        return {p for p in found if p.is_file()}

    def read(self) -> None:
        """Record the files the queued events name (each as found in every tree); lost events mark the live jobs."""
        while True:
            try:
                data = os.read(self.group, 1 << 16)
            except BlockingIOError:
                return
            for at in range(0, len(data), _EVENT.size):
                _, _, _, _, mask, fd, _ = _EVENT.unpack_from(data, at)
                if mask & _FAN_Q_OVERFLOW:
                    self.lost |= self.live
                if fd < 0:
                    continue
                try:
                    link = os.readlink(f"/proc/self/fd/{fd}")
                    if link not in self.links and stat.S_ISREG(os.fstat(fd).st_mode):
                        self.links.add(link)
                        self.files.update(self._found(link))
                finally:
                    os.close(fd)


_OPENED = _Opened()


def job(tree_list: list[Path]) -> contextlib.AbstractContextManager[int]:
    """Around a job whose overlays :func:`enter` mounts: the fanotify group they report opens to."""
    return _OPENED.job(tree_list)


def _escaped(folder: Path) -> str:
    """``folder`` as an overlay's option names it (``:`` and ``,`` separate options)."""
    return str(folder).replace("\\", "\\\\").replace(":", "\\:").replace(",", "\\,")


def enter(tree_list: list[Path], group: int, empty: Path, dev: Path) -> None:
    """In the child, before ``exec bwrap``: a mount namespace of its own with each tree behind a read-only overlay.

    The overlays report opens to ``group`` (-1: to nobody, a job no settle() erases); ``empty`` is an empty folder (an
    overlay without an upper layer needs two lower ones); ``dev`` gets an overlay of ``/dev`` for the device nodes.
    Host mounts made later still reach the namespace (``MS_SLAVE``); its own never reach the host.
    """
    _check(_libc.unshare(_CLONE_NEWNS), "unshare")
    _check(_libc.mount(b"none", b"/", None, _MS_REC | _MS_SLAVE, None), "mount --make-rslave /")
    for tree in tree_list:
        lower = f"lowerdir={_escaped(tree)}:{_escaped(empty)}".encode()
        _check(_libc.mount(b"overlay", bytes(tree), b"overlay", _MS_RDONLY, lower), f"overlay on {tree}")
        if group < 0:
            continue
        marked = _libc.fanotify_mark(
            group, _FAN_MARK_ADD | _FAN_MARK_FILESYSTEM, _FAN_OPEN | _FAN_OPEN_EXEC, -100, bytes(tree)
        )
        _check(marked, f"fanotify_mark on {tree}")
    _check(
        _libc.mount(b"overlay", bytes(dev), b"overlay", _MS_RDONLY, f"lowerdir=/dev:{_escaped(empty)}".encode()), "/dev"
    )


def settle() -> None:
    """Every page of every file a sandbox of this process opened in the trees, cached again; OSError if unsure.

    Unsure: events were lost (the queue overflowed) while a job still running was running.
    """
    with _OPENED.lock:
        if _OPENED.pid != os.getpid():
            return  # no sandbox of this process has run
        _OPENED.read()
        if _OPENED.lost & _OPENED.live:
            raise OSError("the grader lost track of the files a running sandbox opened (too many opens)")
        files = list(_OPENED.files)
    buffer = bytearray(1 << 20)
    whole, got = _Range(0, 0), _Stat()
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # gone (a library copy removed): nothing left to probe
            continue
        try:
            size = os.fstat(fd).st_size
            pages = -(-size // os.sysconf("SC_PAGE_SIZE"))
            if _libc.syscall(_CACHESTAT, fd, ctypes.byref(whole), ctypes.byref(got), 0) == 0 and got.cache >= pages:
                continue
            while os.readv(fd, [buffer]):  # where cachestat is missing too: reading is what caches
                pass
        finally:
            os.close(fd)
