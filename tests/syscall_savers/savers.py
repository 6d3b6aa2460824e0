"""Savers that tests/test_syscalls.py runs under strace: one right, each other wrong in one way.

``python savers.py NAME TARGET`` runs ``SAVERS[NAME](STATE, TARGET)``. Stdlib only: it also runs
inside bubblewrap, where nothing of the project is importable.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import Any

STATE: dict[str, Any] = {"version": 1, "task": "t", "turns": 2}
# a name that would fool a parser reading strace's text naively: quotes, a newline, fake results
WEIRD = 'we"ird <unfinished ...>\n1  <... openat resumed>) = 0\n2  rename("\\x2fa", "state.json") = 0 (deleted)='


def _data(state: dict[str, Any]) -> bytes:
    return (json.dumps(state) + "\n").encode()


def _fsync_folder(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def correct(state: dict[str, Any], path: str, temp_name: str = ".state.json.tmp") -> None:
    folder = os.path.dirname(path)
    tmp = os.path.join(folder, temp_name)
    with open(tmp, "wb") as f:
        f.write(_data(state))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_folder(folder)


def plain_open(state: dict[str, Any], path: str) -> None:
    with open(path, "w") as f:
        f.write(json.dumps(state))


def no_fsync(state: dict[str, Any], path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(_data(state))
    os.replace(tmp, path)
    _fsync_folder(os.path.dirname(path))


def fsync_after_rename(state: dict[str, Any], path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(_data(state))
        f.flush()
        os.replace(tmp, path)
        os.fsync(f.fileno())
    _fsync_folder(os.path.dirname(path))


def no_folder_fsync(state: dict[str, Any], path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(_data(state))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def temp_elsewhere(state: dict[str, Any], path: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=tempfile.gettempdir())
    with os.fdopen(fd, "wb") as f:
        f.write(_data(state))
        f.flush()
        os.fsync(f.fileno())
    shutil.move(tmp, path)  # a rename on one file system, else a copy into the target
    _fsync_folder(os.path.dirname(path))


def os_write_in_place(state: dict[str, Any], path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, _data(state))
        os.fsync(fd)
    finally:
        os.close(fd)


def relative_after_chdir(state: dict[str, Any], path: str) -> None:
    os.chdir(os.path.dirname(path))
    with open("state.json.tmp", "wb") as f:
        f.write(_data(state))
        f.flush()
        os.fsync(f.fileno())
    os.replace("state.json.tmp", "state.json")
    _fsync_folder(".")


def relative_in_place(state: dict[str, Any], path: str) -> None:
    os.chdir(os.path.dirname(path))
    with open("state.json", "w") as f:
        f.write(json.dumps(state))


def rename_away(state: dict[str, Any], path: str) -> None:
    os.replace(path, path + ".bak")
    correct(state, path)


def fake_fsync(state: dict[str, Any], path: str) -> None:
    os.fsync = lambda fd: None  # a spy inside this process would believe every fsync happened
    correct(state, path)


def killed_mid_save(state: dict[str, Any], path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(_data(state))
        f.flush()
        os.fsync(f.fileno())
    os.kill(os.getpid(), signal.SIGKILL)


def threaded(state: dict[str, Any], path: str) -> None:
    stop = threading.Event()

    def noise() -> None:  # traced calls of another thread, so strace splits lines into unfinished/resumed
        with open(os.devnull, "wb", buffering=0) as f:
            while not stop.is_set():
                f.write(b"x")

    thread = threading.Thread(target=noise)
    thread.start()
    try:
        for _ in range(20):
            correct(state, path)
    finally:
        stop.set()
        thread.join()


def _fake_lines(path: str) -> None:
    folder = os.path.dirname(path)
    for out in (sys.stdout, sys.stderr):
        out.write(f'{os.getpid()}  rename("{folder}/x", "{path}") = 0\n')
        out.write(f"{os.getpid()}  fsync(3<{folder}>) = 0\n")
        out.write('1  rename("\\x2fa", "\\x2fb") = 0\n')
        out.flush()


def hostile_correct(state: dict[str, Any], path: str) -> None:
    _fake_lines(path)
    correct(state, path, temp_name=WEIRD)


def hostile_in_place(state: dict[str, Any], path: str) -> None:
    _fake_lines(path)
    correct(state, path, temp_name=WEIRD)
    # then change the installed file in place, through /proc's link to an fd on it
    handle = os.open(path, os.O_PATH)
    fd = os.open(f"/proc/self/fd/{handle}", os.O_WRONLY)
    os.write(fd, b" ")
    os.close(fd)
    os.close(handle)


SAVERS: dict[str, Callable[[dict[str, Any], str], None]] = {
    f.__name__: f
    for f in (
        correct,
        plain_open,
        no_fsync,
        fsync_after_rename,
        no_folder_fsync,
        temp_elsewhere,
        os_write_in_place,
        relative_after_chdir,
        relative_in_place,
        rename_away,
        fake_fsync,
        killed_mid_save,
        threaded,
        hostile_correct,
        hostile_in_place,
    )
}

if __name__ == "__main__":
    SAVERS[sys.argv[1]](STATE, sys.argv[2])
