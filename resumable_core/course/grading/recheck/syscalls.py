"""What a learner's ``save_state`` did to the file system, as strace saw it from outside the sandbox.

The grader starts the learner's process under :func:`tracer_argv` (strace on the host, in front of
``bwrap``), with each checked call told to write in a fresh folder of its own. :func:`read_events`
reads the trace back as the :class:`Event` s that touch that folder (the checker reads it as it
grows, each line once: :class:`Trace`); :func:`atomic_problem` and :func:`durable_problem` judge
them. Nothing measured inside the learner's process is believed: the tracer and its output are out
of the sandbox's reach, every string is printed in hex (``-xx``) so no file name can forge a line,
and fd paths are the kernel's own (``-y``). What cannot be read or resolved counts as touching the
folder (fail closed). The folder's old content must be put there before the traced process starts
(from the host), or the setup's own writes are judged too.
Stdlib only: this module is also imported inside the sandbox.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import os
import posixpath
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..isolation import owned

STRACE = "strace"
TRACED = (
    # "?": a name this architecture lacks (aarch64 has no open, rename, ...) is skipped, not an error
    *("?open", "openat", "openat2", "?creat", "open_by_handle_at"),
    *("write", "pwrite64", "writev", "pwritev", "pwritev2", "?truncate", "ftruncate", "fallocate"),
    *("?rename", "renameat", "renameat2", "?link", "linkat", "?symlink", "symlinkat"),
    *("?unlink", "unlinkat", "?rmdir", "?mkdir", "mkdirat", "?mknod", "mknodat"),
    *("fsync", "fdatasync", "sync_file_range", "syncfs", "sync"),
    *("mmap", "copy_file_range", "sendfile", "splice", "ioctl"),
    # where a plain write lands: what moves an fd's position, or shares it with another fd
    *("lseek", "?_llseek", "read", "readv", "preadv2", "dup", "?dup2", "dup3", "fcntl"),
    *("io_uring_setup", "io_uring_enter", "io_uring_register", "io_setup", "io_submit"),
    # where relative paths point: the working folder, and who inherits it
    *("chdir", "fchdir", "chroot", "pivot_root", "clone", "clone3", "?fork", "?vfork"),
)
"""The system calls traced: every way to change, sync or alias a file, and what relative paths depend on.
``ioctl`` is here for ``FICLONE`` (a reflink copy into a file) and the like."""
DELETED = " (deleted)"
"""What the kernel appends to the path of an fd whose file was unlinked."""


@dataclass(frozen=True)
class Event:
    """One traced system call that may touch the folder, as strace printed it."""

    line: int
    """Line of the trace where the call started (1-based); events come in this order."""
    pid: int | None
    syscall: str
    """The call's name ("" when its line could not be read)."""
    paths: tuple[str | None, ...] = ()
    """Its path arguments made absolute (with the dirfd's or the cwd's path); None: not resolvable."""
    fds: tuple[str | None, ...] = ()
    """The kernel's paths of its fd arguments, in order (``write(3</a/b>, ...)``); None: none shown."""
    fd_numbers: tuple[int | None, ...] = ()
    """The numbers of its fd arguments, in the order of :attr:`fds` (``AT_FDCWD``: None)."""
    flags: tuple[str, ...] = ()
    """Its symbolic flags: open flags, mmap's prot and flags, rename and link flags, an ioctl's request."""
    result: int | None = None
    """Its return value; None when unknown (killed in the call, or strace printed ``?``)."""
    offset: int | None = None
    """Its offset or length argument (pwrite64's offset, ftruncate's length); None when it has none or it cannot be read."""
    error: str | None = None
    """The errno name when it failed (``ENOENT``)."""
    returned: str | None = None
    """The kernel's path of a returned fd (``openat(...) = 3</a/b>``)."""
    end: int | None = None
    """Line where its result was printed; None when it never returned."""
    unparsed: bool = False
    """The line could not be read as a call; ``raw`` holds it."""
    raw: str = ""
    at: float | None = None
    """When the call began, by the host's clock (strace's ``-ttt``); None when the line shows no time."""

    @property
    def failed(self) -> bool:
        """True when the kernel refused the call, so it changed nothing."""
        return self.error is not None and self.result is not None


SH = "/bin/sh"
LOG = ".log"
"""What :func:`tracer_argv` adds to the trace's path for strace's own messages."""
_APART = 'exec 3>&2 2>>"$1" && shift && exec "$@"'
"""Run by the first shell: the command's stderr kept on fd 3, strace's own on the log ($1)."""
_BACK = 'exec 2>&3 3>&- && exec "$@"'
"""Run by the second shell, strace's child: fd 3 back as the command's stderr."""
FULL = 64 << 10
"""Free bytes of the trace's folder under which it counts as full: strace may have lost lines since (:func:`cut_off`)."""


def tracer_argv(output: Path) -> list[str]:
    """The strace prefix to put before a command: it writes its trace to ``output``, its own messages beside it.

    Follows forks (``-f``); decodes fds to the kernel's paths (``-y``); strings in hex (``-xx``), no
    written data (``-s 0``); the host's clock (``-ttt``: the checker bounds a call by its reply);
    stops only at :data:`TRACED` calls. strace's own messages go to :data:`LOG`, never to the job's
    capped stderr (docs/architecture.md: a full trace folder's flood once killed the learner's
    process): the first shell keeps the command's stderr on fd 3, the second gives it back.
    """
    # strace reads "-o |cmd" as a pipe to a command: an absolute path never starts with "|" or "!"
    out = os.path.abspath(output)
    follow = [STRACE, "-f", "--seccomp-bpf", "-qq", "-e", "signal=none"]
    show = ["-y", "-xx", "-s", "0", "-ttt", "-e", f"trace={','.join(TRACED)}"]
    return [SH, "-c", _APART, SH, out + LOG, *follow, *show, "-o", out, "--", SH, "-c", _BACK, SH]


def cut_off(trace: Path | str) -> str | None:
    """Why the trace may have lost lines (its folder is full, so strace writes no more), or None.

    strace only appends, so a full folder cuts the trace at one place: the mark of a call after it
    is lost too (:func:`until_returned` refuses the call), but what followed a mark may be.
    """
    st = os.statvfs(os.path.dirname(os.path.abspath(trace)))
    if st.f_bavail * st.f_frsize >= FULL:
        return None
    return "the grader's trace of the learner's process filled its folder, so it cannot judge the call: the notebook makes too many file system calls"


@functools.cache
def available() -> str | None:
    """None when strace traces here as :func:`tracer_argv` needs, else why not (one line)."""
    if shutil.which(STRACE) is None:
        return "strace is not installed (apt-get install strace)"
    with tempfile.TemporaryDirectory(prefix=owned("resumable-strace-probe-")) as tmp:  # a kill mid-probe: swept
        folder = os.path.join(os.path.realpath(tmp), "probe")
        os.mkdir(folder)
        trace = Path(tmp, "trace")
        argv = [*tracer_argv(trace), SH, "-c", ': > "$1"', SH, f"{folder}/probe.json"]
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.SubprocessError) as e:
            return f"strace could not start: {e}"
        if proc.returncode != 0:
            log = Path(f"{trace}{LOG}")
            said = log.read_text(errors="replace") if log.exists() else ""
            last = ((said + proc.stderr.decode(errors="replace")).strip().splitlines() or ["no message"])[-1]
            hint = " (ptrace is refused: a container without CAP_SYS_PTRACE, or yama ptrace_scope)"
            return f"strace failed (exit code {proc.returncode}): {last[:200]}" + (hint if "ptrace" in last else "")
        seen = [e.returned for e in read_events(trace, folder) if e.syscall in _OPENS]
    if f"{folder}/probe.json" not in seen:
        return "strace ran but did not show the kernel's path of an opened file (-y); install strace 5.3 or newer"
    return None


# -- reading strace's lines ------------------------------------------------------------------

_OPENS = frozenset({"open", "openat", "openat2", "creat", "open_by_handle_at"})
_RENAMES = frozenset({"rename", "renameat", "renameat2"})
_LINKS = frozenset({"link", "linkat"})
_SYMLINKS = frozenset({"symlink", "symlinkat"})
_UNLINKS = frozenset({"unlink", "unlinkat", "rmdir"})
_MAKES = frozenset({"mkdir", "mkdirat", "mknod", "mknodat"})
_ASYNC = frozenset({"io_uring_setup", "io_uring_enter", "io_uring_register", "io_setup", "io_submit"})
_SYNCS = frozenset({"fsync", "fdatasync"})
_NAMING = _RENAMES | _LINKS | _SYMLINKS | _UNLINKS
"""Calls that move or remove names: one naming a folder above ours moves ours too."""
_WRITTEN_FD = {"write": 0, "pwrite64": 0, "writev": 0, "pwritev": 0, "pwritev2": 0, "ftruncate": 0}
_WRITTEN_FD |= {"fallocate": 0, "copy_file_range": 1, "sendfile": 0, "splice": 1}
"""Calls that change a file's bytes, and which of their fds (:attr:`Event.fds`) they write."""
_COPY_READS = {"copy_file_range": 0, "sendfile": 1, "splice": 0}
"""Calls that also read from a file, and which of their fds they read: with a NULL offset they move its position."""

# Each argument's role. D: a dirfd for the next P; P: a path; S: a symlink's content; f: an fd;
# n: a dup's new fd (no path shown: it was not open, so it names no file); F: flags; H: a struct
# holding flags=; o: an offset or length (:attr:`Event.offset`); .: skipped. Missing arguments (a cut line) stay unresolved.
_ARGS = {
    "open": "PF",
    "creat": "P",
    "openat": "DPF",
    "openat2": "DPH",
    "open_by_handle_at": "f.F",
    "rename": "PP",
    "renameat": "DPDP",
    "renameat2": "DPDPF",
    "link": "PP",
    "linkat": "DPDPF",
    "symlink": "SP",
    "symlinkat": "SDP",
    "unlink": "P",
    "unlinkat": "DPF",
    "rmdir": "P",
    "mkdir": "P",
    "mkdirat": "DP",
    "mknod": "P",
    "mknodat": "DP",
    "mmap": "..FFf",
    "copy_file_range": "f.f",
    "sendfile": "ff",
    "splice": "f.f",
    "ioctl": "fF",
    "fallocate": "fF",
    "chdir": "P",
    "fchdir": "f",
    "chroot": "P",
    "pivot_root": "PP",
    "clone": "",
    "clone3": "",
    "fork": "",
    "vfork": "",
    "sync": "",
    "io_uring_setup": "",
    "io_setup": "",
}
_ARGS |= dict.fromkeys(["write", "writev", "read", "readv", "lseek", "_llseek", "dup"], "f")
_ARGS |= {"pwrite64": "f..o", "pwritev": "f..o", "pwritev2": "f..oF", "preadv2": "f..o", "ftruncate": "fo"}
_ARGS |= {"dup2": "fn", "dup3": "fn", "fcntl": "fF", "truncate": "Po"}
_NOT_OPEN = "(not open)"
"""The path of a dup's new fd that was not open before the call: no file (never absolute, so in no folder)."""
_ARGS |= dict.fromkeys(["fsync", "fdatasync", "syncfs", "sync_file_range"], "f")
_ARGS |= dict.fromkeys(["io_uring_enter", "io_uring_register", "io_submit"], "f")

_PREFIX = re.compile(r"\s*(?:\[pid\s+(\d{1,10})\]|(\d{1,10}))?\s*(?:(\d{1,12}\.\d{1,9})\s+)?")
_CALL = re.compile(r"([a-z_][a-z0-9_]*)\(")
_RESUMED = re.compile(r"<\.\.\. ([a-z_][a-z0-9_]*) resumed>")
_UNFINISHED = " <unfinished ...>"
_RETURN = re.compile(r"\s*=\s*(\?|-?\d+|0x[0-9a-fA-F]+)")
_ERRNO = re.compile(r"\s+([A-Z][A-Z0-9_]+)\b")
_FD = re.compile(r"(-?\d+|AT_FDCWD)(?:<(.*)>)?", re.DOTALL)
_STRING = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"', re.DOTALL)
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)|[^\\]+", re.DOTALL)
_ALL_HEX = re.compile(r"(?:\\x[0-9a-fA-F]{2})*")
_C_ESCAPES = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "a": 7, "b": 8, "e": 27}
_MAGIC = re.compile(r"/proc/(?:[^/]+/(?:task/[^/]+/)?(?:cwd|root|fd|map_files)|thread-self)(?:/|$)|/dev/(?:fd|std)")
"""Paths through /proc's links lead anywhere (``/proc/self/cwd/state.json``): never resolved."""


def _unescape(text: str) -> str:
    """A C string body as strace escapes it (``\\x2f``, ``\\n``, ``\\"``, octal), as the file name it names."""
    if _ALL_HEX.fullmatch(text):  # what -xx prints: one C-speed conversion, not a match per byte
        return bytes.fromhex(text.replace("\\x", "")).decode("utf-8", "surrogateescape")
    out = bytearray()
    for m in _ESCAPE.finditer(text):
        esc = m.group(1)
        if esc is None:
            out += m.group(0).encode("utf-8", "surrogatepass")
        elif esc[0] == "x":
            out.append(int(esc[1:], 16))
        elif esc[0] in "01234567":
            out.append(int(esc, 8) & 0xFF)
        else:
            out += bytes([_C_ESCAPES[esc]]) if esc in _C_ESCAPES else esc.encode("utf-8", "surrogatepass")
    return out.decode("utf-8", "surrogateescape")


_QUOTED = {c: re.compile(rf"[^{c}\\]*(?:\\.[^{c}\\]*)*", re.DOTALL) for c in '">'}


def _skip(text: str, i: int, close: str) -> int:
    """Index of the ``close`` that ends a quoted part opened just before ``text[i]`` (backslash escapes)."""
    m = _QUOTED[close].match(text, i)
    return m.end() if m else len(text)


def _split_args(text: str, i: int) -> tuple[list[str], str] | None:
    """The top-level arguments of the call whose ``(`` is before ``text[i]``, and what follows its ``)``."""
    args: list[str] = []
    depth, start, n = 0, i, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i = _skip(text, i + 1, '"')
        elif c == "<" and i > 0 and text[i - 1].isalnum():  # an fd's path: 3</a/b>, AT_FDCWD</a>
            i = _skip(text, i + 1, ">")
        elif c in "([{":
            depth += 1
        elif c in ")]}" and depth:
            depth -= 1
        elif c == ")":
            args.append(text[start:i].strip())
            return ([] if args == [""] else args), text[i + 1 :]
        elif c == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    return None


def _norm(path: str) -> str:
    path = posixpath.normpath(path)
    return "/" + path.lstrip("/") if path.startswith("//") else path


def _fd_path(arg: str) -> tuple[bool, str | None]:
    """(is it an fd, its kernel path): ``3</a/b>`` is (True, "/a/b"); ``3`` is (True, None)."""
    m = _FD.fullmatch(arg)
    if m is None:
        return False, None
    if m.group(2) is None:
        return True, None
    path = _unescape(m.group(2))
    return True, _norm(path) if path.startswith("/") else path


_INTEGER = re.compile(r"-?\d{1,20}")


def _fd_number(arg: str | None) -> int | None:
    """The number of an fd argument (``3</a/b>`` is 3); None for ``AT_FDCWD`` or what is no fd."""
    m = _FD.fullmatch(arg) if arg is not None else None
    return int(m.group(1)) if m is not None and m.group(1) != "AT_FDCWD" else None


def _string(arg: str | None) -> str | None:
    """The decoded string of a complete ``"..."`` argument; None for a cut one, a pointer or NULL."""
    if arg is None or len(arg) < 2 or arg[0] != '"' or arg[-1] != '"':
        return None
    m = _STRING.fullmatch(arg)
    return _unescape(m.group(1)) if m else None


def _flags(arg: str | None) -> tuple[str, ...]:
    return tuple(t.strip() for t in arg.split("|")) if arg else ()


@dataclass
class _Call:
    """A call's text gathered across an ``<unfinished ...>`` and its ``<... resumed>``."""

    pid: int | None
    text: str
    line: int
    at: float | None = None


@dataclass
class _Reader:
    """Turns strace's lines into events, keeping each process's working folder where it is known."""

    folder: str
    cwd: dict[int | None, str | None] = field(default_factory=dict)
    pending: dict[int | None, _Call] = field(default_factory=dict)
    links: set[str] = field(default_factory=set)
    """Symlinks the trace made: a path through one of them leads anywhere, so it is not resolved."""

    def resolve(self, base: str | None, path: str | None, *, follows: bool = True, magic: bool = False) -> str | None:
        """``path`` made absolute against the folder ``base``, or None when that cannot be known: no
        base, a symlink the trace made on the way (or at its end, for a call that ``follows`` it), or
        /proc's links (unless ``magic``: a symlink's content is only text until it is followed)."""
        if path is None:
            return None
        if not path.startswith("/"):
            if base is None or not base.startswith("/") or base.endswith(DELETED):
                return None
            path = f"{base}/{path}"
        names = [name for name in path.split("/") if name not in ("", ".")]
        parts: list[str] = []
        for i, name in enumerate(names):
            if name == "..":  # lexically: had a symlink the trace made come before, it was refused already
                parts = parts[:-1]
            else:
                parts.append(name)
            if (follows or i < len(names) - 1) and "/" + "/".join(parts) in self.links:
                return None
        resolved = "/" + "/".join(parts)
        return None if _MAGIC.match(resolved) and not magic else resolved

    def lines(self, lines: Iterable[str]) -> Iterator[Event]:
        yield from self.feed(lines)
        yield from self.flush()

    def feed(self, lines: Iterable[str], first: int = 1) -> Iterator[Event]:
        """The events of ``lines`` (numbered from ``first``); a call still unfinished stays pending."""
        for number, line in enumerate(lines, first):
            try:
                yield from self._line(line.rstrip("\r\n"), number)
            except Exception:  # noqa: BLE001 - no trace, however odd, may stop the grading
                yield Event(number, None, "", unparsed=True, raw=line)

    def flush(self) -> Iterator[Event]:
        """The calls still pending, as calls that never returned."""
        for call in self.pending.values():  # killed in the call: it may have taken effect
            try:
                yield self._event(call, None)
            except Exception:  # noqa: BLE001 - as above
                yield Event(call.line, call.pid, "", unparsed=True, raw=call.text)
        self.pending.clear()

    def _line(self, line: str, number: int) -> Iterator[Event]:
        m = _PREFIX.match(line)  # every part is optional: it matches any line
        digits = (m.group(1) or m.group(2)) if m else None
        pid = int(digits) if digits else None
        at = float(m.group(3)) if m and m.group(3) else None
        body = line[m.end() :] if m else line
        if not body or body.startswith(("+++", "---", "strace: ")):
            if body.startswith("+++") and pid in self.pending:  # it exited or was killed in the call
                yield self._event(self.pending.pop(pid), None)
            return
        resumed = _RESUMED.match(body)
        if resumed:
            call = self.pending.pop(pid, None)
            if call is None or not call.text.startswith(resumed.group(1) + "("):
                yield Event(number, pid, resumed.group(1), unparsed=True, raw=line)
                return
            yield self._event(_Call(pid, call.text + body[resumed.end() :], call.line, call.at), number)
        elif body.endswith(_UNFINISHED) and _CALL.match(body):
            if pid in self.pending:
                yield self._event(self.pending.pop(pid), None)
            self.pending[pid] = _Call(pid, body[: -len(_UNFINISHED)], number, at)
        else:
            yield self._event(_Call(pid, body, number, at), number)

    def _event(self, call: _Call, end: int | None) -> Event:
        unread = Event(call.line, call.pid, "", end=end, unparsed=True, raw=call.text, at=call.at)
        m = _CALL.match(call.text)
        if m is None or m.group(1) not in _ARGS:
            return unread
        name = m.group(1)
        split = _split_args(call.text if end is not None else call.text + ")", m.end())
        if split is None:
            return unread
        args, rest = split
        ret = _RETURN.match(rest)
        if end is not None and ret is None:
            return unread
        result, error, returned = None, None, None
        if end is not None and ret is not None:
            value = ret.group(1)
            result = None if value == "?" else int(value, 16) if value.startswith("0x") else int(value)
            tail = rest[ret.end() :]
            if tail.startswith("<"):
                close = _skip(tail, 1, ">")
                returned = _fd_path(f"0{tail[: close + 1]}")[1]
                tail = tail[close + 1 :]
            err = _ERRNO.match(tail)
            error = err.group(1) if err and (result is None or result < 0) else None
        paths, fds, numbers, flags, offset = self._arguments(name, args, call.pid)
        ev = Event(
            call.line, call.pid, name, paths, fds, numbers, flags, result, offset, error, returned, end, at=call.at
        )
        self._remember(ev)
        return ev

    def _arguments(
        self, name: str, args: list[str], pid: int | None
    ) -> tuple[tuple[str | None, ...], tuple[str | None, ...], tuple[int | None, ...], tuple[str, ...], int | None]:
        paths: list[str | None] = []
        fds: list[str | None] = []
        numbers: list[int | None] = []
        flags: list[str] = []
        offset: int | None = None
        base: str | None = self.cwd.get(pid)
        content: str | None = None
        roles = _ARGS[name]
        for i, role in enumerate(roles):
            arg = args[i] if i < len(args) else None
            if role == "D":
                is_fd, where = _fd_path(arg) if arg is not None else (False, None)
                if arg is not None and arg.startswith("AT_FDCWD") and where is not None:
                    self.cwd[pid] = where  # the kernel's word on this process's working folder
                base = where if is_fd and where is not None else (self.cwd.get(pid) if arg == "AT_FDCWD" else None)
            elif role == "P":
                path = _string(arg)
                if path == "" and "AT_EMPTY_PATH" in (args[-1] if args else ""):
                    paths.append(base)  # linkat(fd, "", ..., AT_EMPTY_PATH) links the fd's file itself
                else:
                    paths.append(self.resolve(base, path, follows=name not in _NAMING | _MAKES))
                base = self.cwd.get(pid)
            elif role == "S":
                content = _string(arg)
            elif role == "f" or role == "n":
                where = _fd_path(arg)[1] if arg is not None else None
                fds.append(_NOT_OPEN if role == "n" and arg is not None and where is None else where)
                numbers.append(_fd_number(arg))
            elif role == "o" and arg is not None and _INTEGER.fullmatch(arg):
                offset = int(arg)
            elif role == "F":
                flags += _flags(arg)
            elif role == "H" and arg is not None:
                found = re.search(r"flags=([^,}]*)", arg)
                flags += _flags(found.group(1)) if found else ("?",)
        if name == "creat":
            flags += ("O_CREAT", "O_WRONLY", "O_TRUNC")
        if name == "mmap" and "MAP_ANONYMOUS" in flags:
            fds.clear()
            numbers.clear()
        if roles.startswith("S"):  # a symlink's content is read from the folder the link is in
            link = paths[0] if paths else None
            paths.insert(0, self.resolve(posixpath.dirname(link) if link else None, content, magic=True))
        return tuple(paths), tuple(fds), tuple(numbers), tuple(flags), offset

    def _remember(self, ev: Event) -> None:
        """Keep what later paths depend on: the symlinks made, and each process's working folder."""
        if ev.failed:
            return
        old, new = (*ev.paths, None, None)[:2]
        if ev.syscall in _SYMLINKS and new is not None:
            self.links.add(new)
        elif ev.syscall in _LINKS and old in self.links and new is not None:
            self.links.add(new)  # a hard link to a symlink is one more symlink
        elif ev.syscall in _RENAMES and old is not None and new is not None:
            # a moved link, or a folder holding links, moves them (an exchange swaps them)
            olds = {link for link in self.links if link == old or link.startswith(old + "/")}
            news = {link for link in self.links if link == new or link.startswith(new + "/")}
            swapped = news if "RENAME_EXCHANGE" in ev.flags else set()
            self.links -= olds | news
            self.links |= {new + link[len(old) :] for link in olds} | {old + link[len(new) :] for link in swapped}
        elif ev.syscall in ("chdir", "fchdir"):
            # threads share their working folder: any other process's knowledge may now be stale
            new = (ev.paths or ev.fds or (None,))[0] if ev.result == 0 else None
            self.cwd = {ev.pid: new if new is None or new.startswith("/") else None}
        elif ev.syscall in ("chroot", "pivot_root"):
            self.cwd = {}
        elif ev.syscall in ("clone", "clone3", "fork", "vfork") and ev.result is not None and ev.result > 0:
            self.cwd.setdefault(ev.result, self.cwd.get(ev.pid))


def _inside(path: str, folder: str) -> bool:
    return path in (folder, folder + DELETED) or path.startswith(folder + "/")


def _above(path: str, folder: str) -> bool:
    return path == "/" or folder.startswith(path.rstrip("/") + "/")


def _raw_could_touch(raw: str, folder: str) -> bool:
    """Whether an unreadable line might name the folder: it names the folder's own name (as text or
    strace's hex), or holds a relative or unterminated string."""
    leaf = posixpath.basename(folder) or folder
    if leaf in raw or "".join(f"\\x{b:02x}" for b in leaf.encode("utf-8", "surrogateescape")) in raw.lower():
        return True
    if raw.count('"') % 2:
        return True
    return any(not s.startswith("/") for s in map(_unescape, _STRING.findall(raw)) if s)


def _touches(ev: Event, folder: str) -> bool:
    if ev.unparsed:
        return _raw_could_touch(ev.raw, folder)
    if ev.syscall in _ASYNC:
        return True  # no path in sight, yet its queued writes may go anywhere
    near = ev.syscall in _NAMING
    # an opened fd's path is the kernel's word on which file it is: the path argument no longer matters
    named = (ev.returned,) if ev.returned is not None and ev.syscall in _OPENS else (*ev.paths, *ev.fds)
    for path in named:
        if path is None or (path.startswith("/") and (_inside(path, folder) or (near and _above(path, folder)))):
            return True
    return False


def _text_lines(trace: Path | str) -> Iterator[str]:
    if isinstance(trace, str):
        yield from trace.split("\n")
        return
    with open(trace, "rb") as f:
        for raw in f:
            yield raw.decode("utf-8", "replace")


def read_events(trace: Path | str, folder: str) -> list[Event]:
    """The events of ``trace`` that touch ``folder`` (an absolute path, as the traced process saw it), in order.

    ``trace`` is the strace output file (a :class:`~pathlib.Path`) or its text (a ``str``). Never
    raises on what the trace holds: a line it cannot read becomes an ``unparsed`` event, kept when
    it may touch the folder; a path it cannot resolve is kept as None.
    """
    if not folder.startswith("/"):
        raise ValueError(f"the folder must be an absolute path, not {folder!r}")
    folder = _norm(folder)
    events = _Reader(folder).lines(_text_lines(trace))
    return sorted((e for e in events if _touches(e, folder)), key=lambda e: e.line)


class Trace:
    """A trace that grows while the checker reads it: each line parsed once (strace only appends).

    It keeps the events that may touch a folder under ``root`` (every handed path's) and the calls'
    marks; :meth:`events` and :meth:`returned_mark` answer as :func:`read_events` and
    :func:`returned_mark` would on the whole file, without reading its start again at every call.
    """

    def __init__(self, path: Path, root: str) -> None:
        self.path, self.root = path, _norm(root)
        self._reader = _Reader(self.root)
        self._offset = self._lines = 0
        self._kept: list[Event] = []

    def _keeps(self, ev: Event) -> bool:
        # a folder under root is touched only by what touches root or above it (or an unreadable line)
        opened = ev.paths[0] if ev.syscall in _OPENS and ev.paths else None
        return ev.unparsed or _touches(ev, self.root) or (opened or "").startswith(RETURNED)

    def _read(self) -> list[Event]:
        """The kept events so far, in the order the reader gives them, the cut last line and the pending calls too."""
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        whole, cut = data[: data.rfind(b"\n") + 1], data[data.rfind(b"\n") + 1 :]
        lines = [raw.decode("utf-8", "replace") for raw in whole.split(b"\n")[:-1]]
        self._kept += filter(self._keeps, self._reader.feed(lines, self._lines + 1))
        self._offset, self._lines = self._offset + len(whole), self._lines + len(lines)
        rest = copy.deepcopy(self._reader)  # what the file's end gives now may change once strace goes on
        last = [cut.decode("utf-8", "replace")] if cut else []
        return [*self._kept, *filter(self._keeps, [*rest.feed(last, self._lines + 1), *rest.flush()])]

    def events(self, folder: str) -> list[Event]:
        """:func:`read_events` of the whole trace."""
        folder = _norm(folder)
        if folder != self.root and not folder.startswith(self.root + "/"):
            return read_events(self.path, folder)
        return sorted((e for e in self._read() if _touches(e, folder)), key=lambda e: e.line)

    def returned_mark(self, mark: str) -> Event | None:
        """:func:`returned_mark` of the whole trace."""
        path = RETURNED + mark
        return next((e for e in self._read() if e.syscall in _OPENS and e.paths[:1] == (path,)), None)


# -- verdicts ---------------------------------------------------------------------------------

_HARMLESS_OPEN = frozenset(
    {"O_RDONLY", "O_CLOEXEC", "O_NOFOLLOW", "O_DIRECTORY", "O_NONBLOCK", "O_NDELAY", "O_NOCTTY", "O_LARGEFILE"}
    | {"O_PATH", "O_NOATIME", "O_DIRECT", "O_SYNC", "O_DSYNC", "O_RSYNC", "O_ASYNC", "O_EXCL"}
)
"""Open flags that cannot change a file; any other (O_WRONLY, O_TRUNC, an unknown bit) counts as writing."""
_READING_IOCTL = re.compile(r"TCGETS|TIOCG|FIONREAD|FIOCLEX|FIONCLEX|FIONBIO|FIGETBSZ|FIOQSIZE|FS_IOC_(FS)?GET")
_SHARED_MAP = frozenset({"MAP_SHARED", "MAP_SHARED_VALIDATE"})
"""A mapping whose memory writes reach the file, with no system call the trace could show."""
_FIX = "write a temp file in the same folder, fsync it and os.replace() it onto"


def _writing(ev: Event) -> bool:
    return any(flag not in _HARMLESS_OPEN for flag in ev.flags) or not ev.flags


def _written_fd(ev: Event) -> tuple[bool, str | None]:
    """(does the call change bytes through an fd, that fd's path)."""
    if ev.syscall == "ioctl":
        changes = not (ev.flags and _READING_IOCTL.match(ev.flags[0]))
        return changes, ev.fds[0] if ev.fds else None
    if ev.syscall in _WRITTEN_FD:
        i = _WRITTEN_FD[ev.syscall]
        return True, ev.fds[i] if i < len(ev.fds) else None
    return False, None


def _arg(items: tuple[str | None, ...], i: int) -> str | None:
    return items[i] if i < len(items) else None


def _is(path: str | None, target: str) -> bool:
    """Might ``path`` be the target? An unresolved path might be anything."""
    return path is None or path in (target, target + DELETED)


def _installs(ev: Event, target: str) -> bool:
    """A rename (or exchange) that put another file at ``target``, or may have."""
    if ev.syscall not in _RENAMES or ev.failed:
        return False
    old, new = _arg(ev.paths, 0), _arg(ev.paths, 1)
    return old != new and (new == target or ("RENAME_EXCHANGE" in ev.flags and old == target))


def _event_problem(ev: Event, target: str) -> str | None:
    """Why this one call may leave the target torn, missing or changed in place; None when it cannot."""
    name, folder = posixpath.basename(target), posixpath.dirname(target)
    if ev.unparsed:
        if not _raw_could_touch(ev.raw, folder):
            return None
        return f"the grader could not read a call that may touch the folder of {name} (trace line {ev.line}), so it cannot vouch for the save; use plain open, write, os.fsync and os.replace"
    if ev.failed or not _touches(ev, folder):
        return None
    call, in_place = ev.syscall, f"a crash mid-save leaves it torn; {_FIX} {name}"
    if call in _ASYNC:
        return f"save_state used {call} (io_uring or Linux AIO), whose writes the grader cannot see; {_FIX} {name} with plain writes"
    if call in _NAMING | _MAKES | {"truncate"} and None in ev.paths:
        return f"save_state called {call}() on a path the grader could not resolve (through a symlink it made, /proc, or an unknown working folder), so it may have changed {name}; use plain absolute paths in the folder of {name}"
    changes, fd = _written_fd(ev)
    opened = ev.returned if ev.returned is not None else _arg(ev.paths, 0)
    if call in _OPENS and _writing(ev) and _is(opened, target):
        if opened is None:
            return f"save_state opened a file for writing by a path the grader could not resolve (it may be {name}); use absolute paths in the folder of {name}"
        return f"save_state opened {name} for writing in place ({'|'.join(ev.flags)}): {in_place}"
    if (changes and _is(fd, target)) or (call == "truncate" and _is(_arg(ev.paths, 0), target)):
        if (fd if changes else _arg(ev.paths, 0)) is None:
            return f"save_state changed a file with {call}() through an fd or path the grader could not resolve (it may be {name}); {_FIX} {name}"
        return f"save_state changed {name} in place with {call}(): {in_place}"
    if call == "mmap" and _SHARED_MAP & set(ev.flags) and ev.fds:
        return f"save_state mapped {_shown(posixpath.basename(ev.fds[0] or '?'))} shared into memory, whose writes the grader cannot see; {_FIX} {name} with plain writes"
    if call in _UNLINKS and (_is(_arg(ev.paths, 0), target) or _above(_arg(ev.paths, 0) or "/", target)):
        return f"save_state deleted {name} (or its folder): a crash before the new file is in place leaves no state at all; {_FIX} {name} instead"
    if call in _RENAMES:
        return _rename_problem(ev, target)
    if call in _LINKS | _SYMLINKS:
        return f"save_state made a {'hard' if call in _LINKS else 'symbolic'} link in or to the folder of {name}, through which it can change {name} unseen; {_FIX} {name}"
    if call in _MAKES and _is(_arg(ev.paths, 0), target):
        return f"save_state created {name} with {call}(), not as a finished file; {_FIX} {name}"
    return None


def _rename_problem(ev: Event, target: str) -> str | None:
    name, folder = posixpath.basename(target), posixpath.dirname(target)
    old, new = _arg(ev.paths, 0), _arg(ev.paths, 1)
    if old is None or new is None:
        return f"save_state renamed a file by a path the grader could not resolve (it may be {name}); pass os.replace() the absolute paths of the temp file and {name}"
    exchange = "RENAME_EXCHANGE" in ev.flags
    if old == new:
        return None
    if (old == target and not exchange) or _above(old, target) or (exchange and _above(new, target)):
        return f"save_state renamed {name} (or its folder) away: a crash before the new file is in place leaves none; {_FIX} {name} directly"
    if _above(new, folder) or new == folder:
        return f"save_state renamed something onto the folder of {name}; {_FIX} {name}"
    return None


def atomic_problem(events: Iterable[Event], target: str) -> str | None:
    """Why a crash during the save could leave ``target`` neither its old nor its new content; None when it cannot.

    Fails if the target is opened for writing, truncated, written through an fd, unlinked,
    renamed away or mapped shared; if a link is made in or to its folder; if io_uring or AIO is
    used at all; or if a call that may touch the folder could not be read or resolved. The new
    content must arrive by a rename of another file onto the target; no such rename is "no save".
    """
    target = _norm(target)
    installed = False
    for ev in events:
        problem = _event_problem(ev, target)
        if problem:
            return problem
        installed = installed or _installs(ev, target)
    if not installed:
        name = posixpath.basename(target)
        return f"save_state never replaced {name}: no save happened; {_FIX} {name}"
    return None


@dataclass
class _File:
    """What the trace shows of one file of the folder, followed across renames."""

    outside: bool = False
    """It was moved into the folder from elsewhere, with a past the trace does not show."""
    writes: list[Event] = field(default_factory=list)
    syncs: list[Event] = field(default_factory=list)
    mapped: bool = False


def _history(events: Iterable[Event], target: str) -> tuple[list[tuple[Event, str, _File]], list[Event]]:
    """Each rename onto ``target`` with its source and that file's history, and the folder's fsyncs."""
    folder = posixpath.dirname(target)
    files: dict[str, _File] = {}
    installs: list[tuple[Event, str, _File]] = []
    folder_syncs: list[Event] = []
    for ev in events:
        if ev.unparsed or ev.failed:
            continue
        changes, fd = _written_fd(ev)
        opened = ev.returned if ev.syscall in _OPENS else None
        if opened is not None and {"O_TRUNC", "O_CREAT", "O_TMPFILE"} & set(ev.flags):
            files.setdefault(opened, _File()).writes.append(ev)
        elif changes and fd is not None:
            files.setdefault(fd, _File()).writes.append(ev)
        elif ev.syscall in _SYNCS and ev.fds and ev.fds[0] is not None:
            if ev.fds[0] == folder:
                folder_syncs.append(ev)
            else:
                files.setdefault(ev.fds[0], _File()).syncs.append(ev)
        elif ev.syscall == "mmap" and _SHARED_MAP & set(ev.flags) and ev.fds and ev.fds[0] is not None:
            files.setdefault(ev.fds[0], _File()).mapped = True
        elif ev.syscall in _RENAMES and len(ev.paths) > 1 and None not in ev.paths[:2]:
            old, new = str(ev.paths[0]), str(ev.paths[1])
            moved = files.pop(old) if old in files else _File(outside=not _inside(old, folder))
            if "RENAME_EXCHANGE" in ev.flags:  # both names stay, each on the other's file
                files[old] = files.pop(new) if new in files else _File(outside=not _inside(new, folder))
            files[new] = moved
            if _installs(ev, target):
                installs.append((ev, old if new == target else new, files[target]))
    return installs, folder_syncs


def _shown(name: str) -> str:
    """A file name as a message can show it: quoted when it holds a newline or another unprintable character."""
    return name if name.isprintable() else repr(name)


def _temp_problem(rename: Event, source: str, file: _File, target: str) -> str | None:
    """Why the file renamed onto ``target`` may not be on disk when its name is; None when it is."""
    name, temp = posixpath.basename(target), _shown(posixpath.basename(source))
    writes = [w for w in file.writes if w.line < rename.line]  # later ones change the target: atomic_problem's
    if posixpath.dirname(source) != posixpath.dirname(target) or file.outside:
        return f"the temp file {_shown(source)} is not created in the folder of {name}: create it beside {name} (a rename is atomic only within one file system, and fsyncing the folder covers only its own names)"
    if source.endswith(DELETED):
        return f"the temp file's name {temp} ends like the kernel's mark of a deleted file, so the grader cannot follow it; name it otherwise"
    if file.mapped:
        return f"save_state wrote the temp file {temp} through a shared memory map, whose writes cannot be ordered; write it with f.write()"
    if not writes:
        return f"save_state renamed {temp} onto {name} without writing it during the save; write the new state into a fresh temp file first"
    if any(w.end is None for w in writes):
        return f"a write to the temp file {temp} never returned before the rename; write, flush and fsync it before os.replace()"
    last = max(w.end or 0 for w in writes)
    synced = [s for s in file.syncs if s.result == 0 and s.line > last and s.end is not None and s.end < rename.line]
    if synced:
        return None
    if any(s.line > rename.line for s in file.syncs):
        return f"save_state fsynced the temp file only after the rename: fsync it before os.replace(), so its bytes are on disk before {name} points at them"
    if file.syncs:
        return f"save_state fsynced the temp file {temp} before its last write: call f.flush() and os.fsync(f.fileno()) after writing everything"
    return f"save_state never fsynced the temp file {temp}: call f.flush() and os.fsync(f.fileno()) before os.replace(), or a power cut can leave {name} empty"


def durable_problem(events: Iterable[Event], target: str) -> str | None:
    """Why ``target``'s new content may not survive a power cut; None when each step is on disk in order.

    The file renamed onto the target must be made in the target's folder during the save, and
    fsynced (fsync or fdatasync on its fd) after its last write and before the rename; after the
    last rename onto the target, an fd opened on the folder must be fsynced.
    """
    target = _norm(target)
    name = posixpath.basename(target)
    installs, folder_syncs = _history(events, target)
    if not installs:
        return f"save_state never renamed a file onto {name}; {_FIX} {name}"
    for rename, source, file in installs:
        problem = _temp_problem(rename, source, file, target)
        if problem:
            return problem
    last = installs[-1][0]
    after = last.end if last.end is not None else last.line
    if any(s.result == 0 and s.line > after for s in folder_syncs):
        return None
    if folder_syncs:
        return "save_state fsynced the folder only before the rename: fsync it after os.replace(), so the rename itself is on disk"
    return "save_state never fsynced the folder after the rename: open it with os.open(folder, os.O_RDONLY) and os.fsync() that fd, so the rename itself survives a power cut"


# -- an append, and what a kill in the middle of it leaves -------------------------------------


@dataclass(frozen=True)
class Append:
    """What one call did to an append-only file, as the trace and the file it left show it.

    ``states`` holds every content a SIGKILL at some moment of the call could leave in the file, in
    the order they occur (``None``: no file), the first being the file before the call and the last
    the file it left. The trace shows how many bytes each write put in, never which (``-s 0``): the
    bytes are read from the file the call left, at where each write landed: its offset (pwrite64), or
    its fd's position, followed from the open through every lseek, read and write (``O_APPEND``:
    the end). ``problem`` says why the calls cannot be read as an append (a rename, an unseen write, ...),
    and is None when they can.
    """

    states: tuple[bytes | None, ...]
    problem: str | None
    synced_after_last_write: bool
    """The file was fsynced (fsync or fdatasync on its fd) after its last write, before the call ended."""
    folder_synced_after_create: bool
    """The folder was fsynced after the call created the file (False when it did not create it)."""
    created: bool
    start: int | None = None
    """Where the call's writes began in the file it left (None when they cannot be read as an append)."""


def _could_touch(ev: Event, target: str) -> bool:
    """Whether a call that is no plain open, write, truncate or sync may change ``target`` or its name."""
    folder = posixpath.dirname(target)
    if ev.unparsed:
        return _raw_could_touch(ev.raw, folder)
    if ev.failed or not _touches(ev, folder):
        return False
    if ev.syscall in _ASYNC or ev.syscall in _LINKS | _SYMLINKS:
        return True
    if ev.syscall == "mmap":
        return bool(_SHARED_MAP & set(ev.flags)) and _is(_arg(ev.fds, 0), target)
    if ev.syscall in _RENAMES:
        old, new = _arg(ev.paths, 0), _arg(ev.paths, 1)
        return old != new and (_is(old, target) or _is(new, target) or _above(old or "/", target))
    if ev.syscall in _UNLINKS | _MAKES:
        return _is(_arg(ev.paths, 0), target) or _above(_arg(ev.paths, 0) or "/", target)
    return False


@dataclass
class _AppendSteps:
    """The calls of one append that change the target, in order, and what else the trace showed."""

    steps: list[tuple[str, Event, int | None]] = field(default_factory=list)
    """("create" | "empty" | "trunc" | "write", event, where): a write's offset (None: at the file's end, as
    ``O_APPEND`` writes), a truncation's length."""
    synced_at: list[int] = field(default_factory=list)
    folder_synced_at: list[int] = field(default_factory=list)
    created_at: int | None = None
    problem: str | None = None

    def fail(self, why: str) -> None:
        self.problem = self.problem or why


@dataclass
class _Position:
    """Where the next plain write through one fd of the target lands."""

    at: int | None
    """Its offset; None when it cannot be known (after a write in append mode, where it does not matter)."""
    appends: bool
    """Opened with ``O_APPEND``: every write lands at the file's end, whatever the offset."""


_READS = frozenset({"read", "readv", "preadv2"})
_DUPS = frozenset({"dup", "dup2", "dup3"})
_MOVES = frozenset({"lseek", "_llseek", "fcntl"}) | _READS
_PLAIN_WRITES = frozenset({"write", "writev"})
_OFFSET_WRITES = frozenset({"pwrite64", "pwritev", "pwritev2"})


def _unseen_change(ev: Event, name: str) -> str:
    """Why a call that may change the target other than by a write rules the call out as an append."""
    if ev.unparsed:
        return f"the grader could not follow a call that may touch {name} (trace line {ev.line}); append with plain open, write and os.fsync"
    if ev.syscall in _RENAMES:
        return f"append_record renamed a file onto or away from {name}: that replaces the journal (a snapshot's os.replace()), an append only adds a line at its end"
    return f"append_record used {ev.syscall}(), which removes or changes {name} unseen: an append only adds bytes at its end with plain writes"


def _append_steps(events: Iterable[Event], target: str, before: bytes | None) -> _AppendSteps:
    name, seen = posixpath.basename(target), _AppendSteps()
    positions: dict[int, _Position] = {}
    """Each fd number open on the target, from its open on: where its writes land."""
    for ev in events:
        if _could_touch(ev, target):
            seen.fail(_unseen_change(ev, name))
        if ev.unparsed or ev.failed:
            continue
        changes, fd = _written_fd(ev)
        _copied_from(ev, target, positions)
        if ev.syscall in _OPENS:
            opened = ev.returned if ev.returned is not None else _arg(ev.paths, 0)
            if ev.result is not None:  # the number now names this file, whatever it named before
                positions.pop(ev.result, None)
            if opened is None and _writing(ev):
                seen.fail(
                    f"append_record opened a file for writing by a path the grader could not resolve (it may be {name}); use absolute paths"
                )
            elif opened == target and "O_CREAT" in ev.flags and before is None and seen.created_at is None:
                seen.created_at = ev.end or ev.line
                seen.steps.append(("create", ev, None))
            if opened == target and {"O_TRUNC", "O_TMPFILE"} & set(ev.flags):
                seen.steps.append(("empty", ev, None))
            if opened == target and ev.result is not None and ev.result >= 0:
                positions[ev.result] = _Position(0, "O_APPEND" in ev.flags)
        elif ev.syscall in _DUPS | _MOVES:
            _follow(ev, target, positions, seen)
        elif changes or ev.syscall == "truncate":
            where = fd if changes else _arg(ev.paths, 0)
            if where is None:
                seen.fail(
                    f"append_record changed a file with {ev.syscall}() through an fd the grader could not resolve (it may be {name})"
                )
            elif where != target:
                continue
            elif ev.syscall in ("ftruncate", "truncate"):
                if ev.offset is None or ev.offset < 0:
                    seen.fail(f"the grader could not read the length {name} was cut to (trace line {ev.line})")
                seen.steps.append(("trunc", ev, ev.offset))
            else:
                _write(ev, target, positions, seen)
        elif ev.syscall in _SYNCS and ev.result == 0 and ev.fds and ev.end is not None:
            if ev.fds[0] == target:
                seen.synced_at.append(ev.line)
            elif ev.fds[0] == posixpath.dirname(target):
                seen.folder_synced_at.append(ev.line)
    return seen


def _copied_from(ev: Event, target: str, positions: dict[int, _Position]) -> None:
    """A copy that read from the target moved its fd's position by a count the trace does not show: forget it."""
    if ev.syscall not in _COPY_READS or not _is(_arg(ev.fds, _COPY_READS[ev.syscall]), target):
        return
    read_fd = _number(ev.fd_numbers, _COPY_READS[ev.syscall])
    if read_fd is None:  # which fd it read is unknown: none of the target's positions is known now
        for position in positions.values():
            position.at = None
    elif read_fd in positions:
        positions[read_fd].at = None  # fail closed: a plain write through it can no longer be placed


def _write(ev: Event, target: str, positions: dict[int, _Position], seen: _AppendSteps) -> None:
    """Add a write to the target as a step, at where it lands; or say why it cannot be known."""
    name, number = posixpath.basename(target), _number(ev.fd_numbers, 0)
    unknown = f"append_record wrote to {name} through an fd whose position the grader could not follow"
    if ev.syscall not in _PLAIN_WRITES | _OFFSET_WRITES:
        seen.fail(f"append_record changed {name} with {ev.syscall}(): append with plain writes")
    elif ev.end is None or ev.result is None:
        seen.fail(f"a write to {name} never returned before the call ended")
    elif number not in positions:
        seen.fail(f"{unknown} (one it did not see opened): write through the fd open() gave")
    else:
        known, at = _landing(ev, positions[number])
        if not known:
            seen.fail(f"{unknown} (trace line {ev.line}); write at the end of the file, with open(path, 'ab')")
        seen.steps.append(("write", ev, at))


def _follow(ev: Event, target: str, positions: dict[int, _Position], seen: _AppendSteps) -> None:
    """Follow what a dup, fcntl, lseek or read does to the positions of the target's fds."""
    name, number, fd = posixpath.basename(target), _number(ev.fd_numbers, 0), _arg(ev.fds, 0)
    command = ev.flags[0] if ev.syscall == "fcntl" and ev.flags else ""
    if ev.syscall in _DUPS or ev.syscall == "fcntl":
        duplicates = ev.syscall in _DUPS or command.startswith("F_DUPFD")
        if (duplicates or command in ("F_SETFL", "")) and _is(fd, target):
            seen.fail(
                f"append_record used {ev.syscall}({command}) on the fd of {name}, so the grader cannot follow where its writes land: write through the one fd open() gave"
            )
        for gone in (*ev.fd_numbers[1:], ev.result) if duplicates else ():
            if gone is not None:  # the number now names another fd's file
                positions.pop(gone, None)
        return
    if ev.syscall == "preadv2" and ev.offset != -1:
        return  # read at its own offset: the position stays
    position = positions.get(number) if number is not None and _is(fd, target) else None
    if position is None:
        return
    if ev.syscall == "lseek" and fd == target and ev.result is not None and ev.result >= 0:
        position.at = ev.result  # lseek returns the new position
    elif ev.syscall in _READS and fd == target and position.at is not None and ev.result is not None:
        position.at += ev.result
    else:
        position.at = None


def _number(items: tuple[int | None, ...], i: int) -> int | None:
    return items[i] if i < len(items) else None


def _landing(ev: Event, position: _Position) -> tuple[bool, int | None]:
    """(is it known, where a write begins: None at the file's end), moving ``position`` past it."""
    n = ev.result or 0
    if position.appends or (ev.syscall == "pwritev2" and "RWF_APPEND" in ev.flags):
        position.at = None  # an append-mode write leaves the position at the end: never needed again
        return True, None
    if ev.syscall in _OFFSET_WRITES and not (ev.syscall == "pwritev2" and ev.offset == -1):
        return ev.offset is not None, ev.offset  # the fd's position stays where it was
    at = position.at
    position.at = None if at is None else at + n
    return at is not None, at


def append_states(events: Iterable[Event], target: str, before: bytes | None, after: bytes | None) -> Append:
    """What a kill at any moment of the call whose ``events`` these are could leave in ``target``.

    ``before`` and ``after`` are the file's bytes before and after the call (None: no file). Each
    write to the target gives the states before it, after it, and after each prefix of its bytes
    (a kill mid-write leaves any prefix); an open with ``O_TRUNC`` empties the file, and a
    truncation cuts it to its length. A write whose place cannot be known (an fd not seen opened,
    a dup'd one, an unread offset), one past the file's end, or one over bytes the call wrote is a
    ``problem``, as are a rename onto or away from the target, an unlink of it, a link, a shared
    map, io_uring or AIO, or a call that cannot be read or resolved: none of these is an append. So
    are writes the file left does not account for.
    """
    target = _norm(target)
    name = posixpath.basename(target)
    seen = _append_steps(events, target, before)
    writes = [ev for kind, ev, _ in seen.steps if kind == "write"]
    last_write = max((w.end or w.line for w in writes), default=None)
    created = seen.created_at
    result = functools.partial(
        Append,
        synced_after_last_write=last_write is not None and any(line > last_write for line in seen.synced_at),
        folder_synced_after_create=created is not None and any(line > created for line in seen.folder_synced_at),
        created=created is not None,
    )
    if seen.problem is not None:
        return result((before, after), seen.problem)
    data = after or b""
    total = sum(w.result or 0 for w in writes)
    states: list[bytes | None] = [before]
    current = before
    written: list[tuple[int, int]] = []
    """The spans of the file the call's writes filled: their bytes are read from the file it left."""
    for kind, ev, at in seen.steps:
        base = current or b""
        if kind == "create":
            current = base
        elif kind == "empty":
            current = b""
        elif kind == "trunc":
            length = at or 0
            if any(end > length for _, end in written):
                return result(
                    (before, after), f"append_record cut off bytes it had written to {name}: append only at the end"
                )
            current = base[:length] + bytes(max(0, length - len(base)))
        else:
            n, offset = ev.result or 0, len(base) if at is None else at
            if offset > len(base):  # the hole between reads as zero bytes: a complete line no reader can skip
                return result(
                    (before, after),
                    f"a write to {name} starts past its end (trace line {ev.line}): append at the end of the file, in order",
                )
            if offset + n > len(data):
                return result(
                    (before, after),
                    f"{name} holds fewer bytes than append_record wrote into it: it was cut after the writes",
                )
            if any(offset < end and start < offset + n for start, end in written):
                return result(
                    (before, after),
                    f"append_record wrote over bytes it had just written to {name}: write each byte of the line once",
                )
            chunk = data[offset : offset + n]
            states.extend(base[:offset] + chunk[:k] + base[offset + k :] for k in range(n + 1))
            current = base[:offset] + chunk + base[offset + n :]
            written.append((offset, offset + n))
        states.append(current)
    start = min((begin for begin, _ in written), default=len(data))
    if current != after:
        why = f"the file append_record left is not its old bytes with the written ones at the end ({len(data)} bytes, {total} of them written by the call)"
        return result((before, after), f"{why}: append only at the end, after cutting a torn last line")
    unique: list[bytes | None] = []
    for state in states:
        if not unique or unique[-1] != state:
            unique.append(state)
    return result(tuple(unique), None, start=start)


# -- where a call ended ----------------------------------------------------------------------

RETURNED = "/.resumable-call-returned-"
"""The path (never there) whose open marks in the trace that a call returned; its mark follows."""
_MARK = re.compile(r"[0-9a-f]{8,64}")
_STILL = frozenset({"lseek", "_llseek", "read", "readv", "preadv2", "fcntl", "dup", "dup2", "dup3"})
"""Calls that change no file: harmless after the call returned."""


def mark_returned(mark: object) -> None:
    """Mark in the trace that the call ``mark`` names returned: a traced open of a path that is never there."""
    if type(mark) is not str or not _MARK.fullmatch(mark):
        raise ValueError("a call's mark is 8 to 64 lowercase hex digits")
    with contextlib.suppress(OSError):  # ENOENT, as meant: the open itself is the mark
        os.close(os.open(RETURNED + mark, os.O_RDONLY | os.O_CLOEXEC))


def returned_mark(trace: Path | str, mark: str) -> Event | None:
    """The trace's event where the call ``mark`` names returned (:func:`mark_returned`): its line, and the
    thread that ran the call; None when the trace never shows it.

    A mark is made by the learner's process, so only its absence or its delay could help that
    process; a missing one is refused (:func:`until_returned`), and an early one only makes the call shorter.
    """
    reader, path = _Reader("/"), RETURNED + mark
    for ev in reader.lines(_text_lines(trace)):
        if ev.syscall in _OPENS and ev.paths[:1] == (path,):
            return ev
    return None


def until_returned(
    events: Iterable[Event], returned: Event | None, target: str, replied_at: float | None = None
) -> tuple[list[Event], str | None]:
    """The events of a call up to ``returned`` (its mark), and why the rest rules it out (None: nothing does).

    ``replied_at``: when the checker had the call's reply, by the host's clock. The mark is the
    learner's process's word; the checker's clock is not: a call that began after the reply is
    after the return whatever the mark says, and a mark later than the reply is a problem.

    A call in progress at the return (its result printed after the mark) is kept as one that
    never returned. A change in the folder by another thread or process than the one that ran
    the call, or after the return (a write, a sync, an open, a rename), is a problem: the call's
    own thread must do its work before it returns, or the file changes under the checker. So is
    any call on the folder by another thread or process before the return, a seek or a read too:
    it moves the position of an fd the call's own writes go through, which the call's events do
    not show. No mark at all is a problem too.
    """
    name = posixpath.basename(_norm(target))
    if returned is None:
        return (
            [],
            f"the grader saw no end of the call to the function writing {name} in the trace, so it cannot judge it",
        )
    if replied_at is not None and (returned.at is None or returned.at > replied_at):
        return (
            [],
            f"the trace marks the end of the call to the function writing {name} after the grader had its reply, so it cannot judge it",
        )
    during, late, line = [], None, returned.line
    for ev in events:
        after_reply = replied_at is not None and (ev.at is None or ev.at > replied_at)
        if ev.line < line and ev.pid == returned.pid and not after_reply:
            during.append(ev if ev.end is None or ev.end < line else dataclasses.replace(ev, end=None, result=None))
        # before the return even a seek or a read by another thread counts: it moves an fd the call writes through
        elif late is None and not ev.failed and (ev.unparsed or ev.syscall not in _STILL or ev.line < line):
            when = "after it returned" if ev.line > line or after_reply else "from another thread or process"
            late = f"the function writing {name} left its work to others: the trace shows {ev.syscall or 'a call'}() on the folder of {name} {when} (trace line {ev.line}); write, flush and fsync in the call itself before returning, not in a thread"
    return during, late
