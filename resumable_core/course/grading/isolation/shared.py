"""What every sandbox of a run sees read-only (the system, the interpreter, the venv, the library): kept unmarked.

Two covert channels run through those files: a lock (``flock``, ``fcntl``), which lives on the
inode and is still held by a frozen process, and the page cache, whose pages a job drops
(``posix_fadvise`` DONTNEED) or reads in for another job to probe (``mincore``, ``preadv2(RWF_NOWAIT)``, a timed
read); what a job did to it stays after it is frozen or gone. So:

- *Locks, separated.* Each sandbox sees those trees through read-only overlays of its own, mounted
  over them in a mount namespace the child makes before ``exec bwrap`` (:func:`enter`), which ends
  with the sandbox: another superblock, so other inodes and other locks. Its device nodes come
  from an overlay of ``/dev`` too.
- *The page cache, settled.* An overlay reads through to the real file's pages, so that stays
  shared. A settled job (``Job.settled``: one that must learn nothing of what other jobs did to
  it) has its overlays ask the grader before each open (``FAN_OPEN_PERM``, :class:`_Settler`),
  which reads the file's uncached pages first: every file it can probe (each probe needs a file
  it opened; an ``O_PATH`` fd is refused by all of them) is wholly cached, whatever others did.
  Other jobs are not watched and pay nothing.

Measured (2026-12-05, load 4 on 2 cores): an import of anthropic, nbformat and IPython 3.8 s
unsettled, 4.7 s settled (each of its thousands of opens waits for the grader's thread).

Root only: mounting needs ``CAP_SYS_ADMIN``. Why: ``docs/architecture.md``, "The sandbox".
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import select
import stat
import struct
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
"""bwrap's ``--dev`` nodes, bound again from the sandbox's own overlay of ``/dev``."""

_CLONE_NEWNS = 0x20000
_MS_RDONLY, _MS_REC, _MS_SLAVE = 1, 0x4000, 1 << 19
_FAN_CLOEXEC, _FAN_NONBLOCK = 1, 2
_FAN_MARK_ADD, _FAN_MARK_FILESYSTEM = 1, 0x100
_FAN_CLASS_CONTENT, _FAN_UNLIMITED_QUEUE, _FAN_OPEN_PERM = 4, 0x10, 0x10000
_FAN_ALLOW, _FAN_DENY = 1, 2
_EVENT = struct.Struct("IBBHQii")
"""``struct fanotify_event_metadata``: length, version, reserved, metadata length, mask, fd, pid."""
_RESPONSE = struct.Struct("iI")
"""``struct fanotify_response``: the event's fd, allow or deny."""
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
_OPEN_TREE, _MOVE_MOUNT, _MOUNT_SETATTR = 428, 429, 442
"""System call numbers, the same on every architecture."""
_OPEN_TREE_CLONE, _AT_RECURSIVE, _AT_EMPTY_PATH, _MOVE_MOUNT_F_EMPTY_PATH = 1, 0x8000, 0x1000, 4
_MOUNT_ATTR_IDMAP = 0x100000


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("set", ctypes.c_uint64),
        ("clear", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns", ctypes.c_uint64),
    ]


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


class _Settler:
    """One settled job's fanotify group (``FAN_OPEN_PERM``) and the thread answering it; :meth:`close` ends both.

    Each open in the job's overlays waits for the answer: its host file's uncached pages (``cachestat``)
    are read first, then it is allowed; past ``budget`` bytes read, or a file not found on the host, it is
    denied (the open fails). The queue is unlimited: a permission event lost to an overflow would be allowed.
    """

    def __init__(self, seen: tuple[tuple[str, Path], ...], budget: int) -> None:
        flags = _FAN_CLOEXEC | _FAN_NONBLOCK | _FAN_CLASS_CONTENT | _FAN_UNLIMITED_QUEUE
        self.group = _libc.fanotify_init(flags, os.O_RDONLY | os.O_LARGEFILE | os.O_CLOEXEC)
        if self.group < 0:
            _check(-1, "fanotify_init")
        self.seen, self.left, self.read, self.events = seen, budget, 0, 0
        self._opened: set[str] = set()
        """The files this job opened already (as the events name them): allowed again without a look."""
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._answer, daemon=True, name="settler")
        self._thread.start()

    def close(self) -> None:
        """Once the job ended: stop the thread and close the group (an event still pending is allowed)."""
        os.write(self._stop_w, b"x")
        self._thread.join()
        for fd in (self.group, self._stop_r, self._stop_w):
            os.close(fd)

    def _answer(self) -> None:
        while select.select([self.group, self._stop_r], [], [])[0] != [self._stop_r]:
            try:
                data = os.read(self.group, 1 << 16)
            except BlockingIOError:
                continue
            for at in range(0, len(data), _EVENT.size):
                _, _, _, _, _, fd, _ = _EVENT.unpack_from(data, at)
                if fd < 0:
                    continue
                self.events += 1
                try:
                    allowed = self._settled(fd)
                except Exception:  # noqa: BLE001 - any failure denies: an open left unanswered waits,
                    allowed = False  # and bwrap's own exec is one (the grader's Popen would wait on it)
                try:
                    os.write(self.group, _RESPONSE.pack(fd, _FAN_ALLOW if allowed else _FAN_DENY))
                finally:
                    os.close(fd)

    def _settled(self, fd: int) -> bool:
        """Whether ``fd``'s host file is wholly cached now, read in within the budget (False: deny its open)."""
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return True  # a folder, a device: no page to probe
        link = os.readlink(f"/proc/self/fd/{fd}")
        if link in self._opened:
            return True
        paths = _found(self.seen, link)
        if not paths or not all(self._cache(p) for p in paths):
            return False
        self._opened.add(link)
        return True

    def _cache(self, path: Path) -> bool:
        page = os.sysconf("SC_PAGE_SIZE")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            pages = -(-os.fstat(fd).st_size // page)
            got = _Stat()
            if _libc.syscall(_CACHESTAT, fd, ctypes.byref(_Range(0, 0)), ctypes.byref(got), 0) != 0:
                got.cache = 0  # no cachestat: read it all
            missing = (pages - min(got.cache, pages)) * page
            if missing == 0:
                return True
            if missing > self.left:
                return False
            self.left -= missing
            self.read += missing
            buffer = bytearray(1 << 20)
            while os.readv(fd, [buffer]):  # reading is what caches
                pass
            return True
        finally:
            os.close(fd)


@functools.lru_cache(maxsize=1 << 16)
def _found(seen: tuple[tuple[str, Path], ...], link: str) -> list[Path]:
    """The host's files the sandbox's ``link`` may be (its path inside, as the event's fd names it)."""
    named = Path(link)
    found = {host / named.relative_to(inside) for inside, host in seen if named.is_relative_to(inside)}
    return sorted(p for p in found if p.is_file())


@contextlib.contextmanager
def settled(tree_list: list[Path], budget: int, moved: dict[str, Path]) -> Iterator[int]:
    """Around a settled job whose overlays :func:`enter` mounts: the group they ask before each open.

    The sandbox sees each tree where the host does, but those ``moved`` (where it sees them: the library).
    """
    seen = {str(t): t for t in tree_list} | {inside: t for inside, t in moved.items() if t in tree_list}
    settler = _Settler(tuple(seen.items()), budget)
    try:
        yield settler.group
    finally:
        settler.close()


def _escaped(folder: Path) -> str:
    """``folder`` as an overlay's option names it (``:`` and ``,`` separate options)."""
    return str(folder).replace("\\", "\\\\").replace(":", "\\:").replace(",", "\\,")


def enter(tree_list: list[Path], group: int, empty: Path, dev: Path) -> None:
    """In the child, before ``exec bwrap``: a mount namespace of its own with each tree behind a read-only overlay.

    The overlays ask ``group`` before each open (-1: nobody, a job that needs no settled page cache); ``empty`` is an empty folder (an
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
        marked = _libc.fanotify_mark(group, _FAN_MARK_ADD | _FAN_MARK_FILESYSTEM, _FAN_OPEN_PERM, -100, bytes(tree))
        _check(marked, f"fanotify_mark on {tree}")
    _check(
        _libc.mount(b"overlay", bytes(dev), b"overlay", _MS_RDONLY, f"lowerdir=/dev:{_escaped(empty)}".encode()), "/dev"
    )


def lend(sources: list[Path], folder: Path, idmap: int) -> None:
    """In the child, after :func:`enter`: each of ``sources`` at ``folder``/its index, owned by the sandbox's host uid.

    A sandbox's bwrap runs under a host uid of its own, which may reach none of the grader's folders
    (a temporary folder is its owner's alone). So each is cloned (``open_tree``), its owner, root,
    shown as that uid (an idmapped mount through ``idmap``, a user namespace mapping 0 to it: what the
    sandbox writes is root's on the host), and put where that uid reaches it: a tmpfs on ``folder``,
    in the child's mount namespace only. A file system without idmapped mounts lends it as it is.
    """
    _check(_libc.mount(b"tmpfs", bytes(folder), b"tmpfs", 0, b"mode=0755,size=1m"), f"tmpfs on {folder}")
    for i, source in enumerate(sources):
        if not source.exists():  # a device node the host lacks (bwrap's --dev-bind-try skips it)
            continue
        target = folder / str(i)
        if source.is_dir():
            target.mkdir()
        else:
            target.touch()
        tree = _libc.syscall(_OPEN_TREE, -100, bytes(source), _OPEN_TREE_CLONE | _AT_RECURSIVE | os.O_CLOEXEC)
        if tree < 0:
            _check(-1, f"open_tree {source}")
        try:
            attr = _MountAttr(_MOUNT_ATTR_IDMAP, 0, 0, idmap)
            _libc.syscall(_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH, ctypes.byref(attr), ctypes.sizeof(attr))
            moved = _libc.syscall(_MOVE_MOUNT, tree, b"", -100, bytes(target), _MOVE_MOUNT_F_EMPTY_PATH)
            _check(moved, f"move_mount {source}")
        finally:
            os.close(tree)
