"""The visible checks of the ``resume_skeleton`` assignment: an atomic save, a version-checked load.

Its test cells call these as ``checks.check_*(save_state, load_state)``; the hidden ones live
with the instructor (:mod:`resumable_core.course.hidden.resume_skeleton`).
"""

from __future__ import annotations

import builtins
import copy
import io
import json
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ...crash import CrashError, kill_self, run_in_child
from ...errors import CheckpointError
from ...scenarios import NOTES_TASK
from .support import CheckFailed, handed, is_remote, require, same_data, scratch

Save = Callable[[dict[str, Any], str], None]
Load = Callable[[str], Any]


def sample_state(version: int = 1, *, size: int = 0, turns: int = 3) -> dict[str, Any]:
    """A state dict shaped like a checkpoint; ``size`` pads a message to about that many bytes."""
    text = "meeting notes " * (size // 14) if size else "Summary so far."
    return {
        "version": version,
        "task": NOTES_TASK,
        "turns": turns,
        "tokens_used": 1000 * turns,
        "messages": [{"role": "user", "content": NOTES_TASK}, {"role": "assistant", "content": text}],
        "pending_tool_use": None,
    }


def plain_state() -> dict[str, Any]:
    """A state that is no checkpoint: save_state writes any JSON object with a version."""
    return {"version": 1, "cursor": 7, "done": ["meeting-08-18.md"], "draft": {"lines": 2, "text": "Summary so far."}}


def load_or_fail(load: Load, path: Path, what: str) -> Any:
    """``load(path)``; an exception it raises becomes a :class:`CheckFailed` saying when."""
    try:
        return load(handed(path, folder=True))
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
        raise CheckFailed(f"{what}: load_state raised {type(e).__name__}: {e}") from None


def check_state_round_trip(save: Save, load: Load) -> None:
    """What save_state writes (a checkpoint's fields or any JSON object), load_state reads back equal; no temp file is left."""
    folder = scratch("state")
    path = folder / "state.json"
    state = sample_state()
    save(copy.deepcopy(state), handed(path, folder=True))
    require(
        same_data(load_or_fail(load, path, "after a save"), state), "load_state must return the state save_state wrote"
    )
    save(sample_state(turns=4), handed(path, folder=True))
    require(
        same_data(load_or_fail(load, path, "after a second save"), sample_state(turns=4)),
        "a second save must replace the first",
    )
    save(plain_state(), handed(path, folder=True))
    require(
        same_data(load_or_fail(load, path, "after saving a state that is no checkpoint"), plain_state()),
        "save_state must write any JSON object with a version, not only a checkpoint",
    )
    leftovers = sorted(p.name for p in folder.iterdir() if p.name != "state.json")
    require(not leftovers, f"a finished save leaves only the state file; found {leftovers}")


def check_state_missing(load: Load) -> None:
    """load_state returns None when there is no file (a fresh start), and creates none."""
    path = scratch("state") / "state.json"
    require(load_or_fail(load, path, "with no file") is None, "with no file, load_state must return None")
    require(not path.exists(), "load_state must not create the file")


def check_state_version_refused(load: Load, versions: Iterable[Any] = (2,)) -> None:
    """A file of another version is refused with a ValueError (or a CheckpointError) and left as it was."""
    for version in versions:
        path = scratch("state") / "state.json"
        path.write_text(json.dumps(sample_state(version=version)))
        before = path.read_bytes()
        try:
            got = load(handed(path, folder=True))
        except (ValueError, CheckpointError):
            pass
        except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
            raise CheckFailed(
                f"version {version!r}: raise a ValueError (subclass), not {type(e).__name__}: {e}"
            ) from None
        else:
            raise CheckFailed(
                f"a file of version {version!r} must be refused, load_state returned {type(got).__name__}"
            )
        require(path.read_bytes() == before, "load_state must never change the file, even one it refuses")
    path = scratch("state") / "state.json"  # and the right version, written by someone else, is read
    path.write_text(json.dumps(sample_state(turns=5)))
    require(
        same_data(
            load_or_fail(load, path, "a file of this version that save_state did not write"), sample_state(turns=5)
        ),
        "load_state must read a file of its own version whoever wrote it: refusing every file is no version check",
    )


class _DyingFile:
    """A file opened for writing whose first write puts half its data on disk, then dies of SIGKILL."""

    def __init__(self, f: Any) -> None:
        self._f = f

    def write(self, data: Any) -> int:
        self._f.write(data[: max(1, len(data) // 2)])
        self._f.flush()
        kill_self()
        return len(data)  # pragma: no cover - never reached

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __enter__(self) -> _DyingFile:
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._f.__exit__(*exc)

    def __iter__(self) -> Any:
        return iter(self._f)


def _die_on_first_write(namespace: dict[str, Any]) -> Callable[[], None]:
    """In the child: the first write of save_state (any file opened for writing, or os.write) dies half done.

    ``namespace`` is the save function's globals: IPython puts its own ``open`` there. Returns
    what puts the real functions back (for a save that ends without writing).
    """
    real_open, real_write = io.open, os.write

    def dying_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        f = real_open(file, mode, *args, **kwargs)
        return _DyingFile(f) if any(ch in mode for ch in "wax+") else f

    def dying_write(fd: int, data: bytes) -> int:
        real_write(fd, data[: max(1, len(data) // 2)])
        kill_self()
        return len(data)  # pragma: no cover - never reached

    builtins.open = io.open = dying_open  # only in the forked child, which never returns
    ns_open = namespace.get("open")
    if ns_open is not None:
        namespace["open"] = dying_open
    os.write = dying_write  # type: ignore[assignment]  # likewise

    def undo() -> None:
        builtins.open = io.open = real_open
        if ns_open is not None:
            namespace["open"] = ns_open
        os.write = real_write

    return undo


def kill_during_save(save: Save, path: str | Path, state: dict[str, Any], *, timeout: float = 30.0) -> str:
    """Run ``save(state, path)`` in a forked child that dies of SIGKILL once its first write is half done.

    Returns "killed mid-write", "finished" (the save never wrote through a file or os.write), or
    "failed in the child (...)" with the last line of why (save_state raised, or hung past ``timeout``).
    """

    def doomed_save() -> None:
        undo = _die_on_first_write(getattr(save, "__globals__", {}))
        try:
            save(state, str(path))
        finally:  # the child reports a raise through os.write: it must be the real one again
            undo()

    try:
        ended = run_in_child(doomed_save, timeout=timeout)
    except CrashError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        return f"failed in the child ({lines[-1] if lines else type(e).__name__})"
    return "killed mid-write" if ended == "killed" else "finished"


Event = tuple[str, Any]


def record_save(save: Save, path: Path) -> list[Event]:
    """In the learner's kernel only (a spy there is a hint, never believed by the re-check): run ``save(sample_state(), path)`` with spies on open-for-writing, fsync/fdatasync and replace/rename."""
    events: list[Event] = []
    real_open, real_fsync, real_fdatasync, real_replace, real_rename = (
        io.open,
        os.fsync,
        os.fdatasync,
        os.replace,
        os.rename,
    )

    def spy_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if any(ch in mode for ch in "wax+") and not isinstance(file, int):
            events.append(("open", Path(file).resolve()))
        return real_open(file, mode, *args, **kwargs)

    def spy_sync(real: Callable[[int], None]) -> Callable[[Any], None]:
        def sync(fd: Any) -> None:
            st = os.fstat(fd if isinstance(fd, int) else fd.fileno())
            events.append(("fsync", (stat.S_ISDIR(st.st_mode), st.st_dev, st.st_ino)))
            real(fd)

        return sync

    def spy_move(real: Callable[..., None]) -> Callable[..., None]:
        def move(src: Any, dst: Any, *a: Any, **k: Any) -> None:
            events.append(("replace", (Path(src).resolve(), Path(dst).resolve())))
            real(src, dst, *a, **k)

        return move

    namespace = getattr(save, "__globals__", {})  # IPython puts its own ``open`` in a notebook's globals
    ns_open = namespace.get("open")
    builtins.open = io.open = spy_open  # restored in the finally below
    if ns_open is not None:
        namespace["open"] = spy_open
    os.fsync, os.fdatasync = spy_sync(real_fsync), spy_sync(real_fdatasync)  # type: ignore[assignment]  # likewise
    os.replace, os.rename = spy_move(real_replace), spy_move(real_rename)
    try:
        save(sample_state(), str(path))
    finally:
        builtins.open = io.open = real_open
        if ns_open is not None:
            namespace["open"] = ns_open
        os.fsync, os.fdatasync, os.replace, os.rename = real_fsync, real_fdatasync, real_replace, real_rename
    return events


def observed_save(save: Save, path: Path, state: dict[str, Any]) -> Any:
    """``save(state, path)`` in the learner's process, its system calls traced from outside (the re-check only).

    Returns what the checker saw, whose ``atomic_problem()`` and ``durable_problem()`` are each None
    or the reason: nothing the learner's process says about its own writes is believed.
    """
    observe = getattr(type(save), "observe", None)  # on the type: nothing the learner made defines it there
    if observe is None:  # a bug of the caller: only a function of the learner's process is observed
        raise ValueError("observed_save needs a function of the learner's process")
    return observe(save, state, handed(path, folder=True))


def check_kill_during_save(save: Save, load: Load) -> None:
    """SIGKILL mid-write of a second save: load_state still returns the first, good state; saving works after.

    In the learner's kernel the child really dies halfway through its first write. In the isolated
    re-check the save runs under a tracer outside the learner's process, and a kill at any of its
    writes must leave the old or the new state whole (no write in place, a rename onto the file).
    """
    path = scratch("kill") / "state.json"
    good, new = sample_state(turns=3), sample_state(turns=4, size=2_000_000)
    save(copy.deepcopy(good), handed(path, folder=True))
    if is_remote(save):
        seen = observed_save(save, path, new)
        atomic = seen.atomic_problem()
        require(atomic is None, f"a kill in the middle of this save would lose the state: {atomic}")
        require(
            same_data(load_or_fail(load, path, "after the save"), new), "load_state must return the state just saved"
        )
        return
    how = kill_during_save(save, path, new)
    require(how == "killed mid-write", f"the save was expected to be killed while writing, but it {how}")
    got = load_or_fail(load, path, "after a kill in the middle of a save")
    require(
        same_data(got, good), "after a kill in the middle of a save, load_state must return the previous good state"
    )
    save(copy.deepcopy(new), handed(path, folder=True))
    require(
        same_data(load_or_fail(load, path, "saving again after the kill"), new),
        "a save after the crash must work and be read back",
    )
