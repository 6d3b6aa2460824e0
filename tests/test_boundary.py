"""The re-check's boundary (resumable_core/course/grading/recheck/boundary.py): a learner's function reaches the
checker's world only through the named operations of its stand-ins, and gets copies of handed paths."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

import resumable_core as rc
from resumable_core.course.checks.support import CountingToolbox, die, fresh_toolbox, handed
from resumable_core.course.grading.recheck import boundary, rpc


def _pair(ns: dict[str, Any], tmp_path: Path) -> tuple[boundary.Learner, threading.Thread]:
    """A checker's Learner talking to a learner's session serving ``ns``, on a thread, over a Unix socket."""
    from resumable_core.course.grading.inside import learner_server

    address = str(tmp_path / "learner.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(1)

    def serve_one(conn: socket.socket) -> None:
        stand = boundary.Stand()
        session = rpc.Session(conn, boundary.codec(stand), learner_server.ops(ns, []), peer="the checker")
        stand.session = session
        session.serve_forever()

    def serve() -> None:
        while True:  # one thread per connection, as the learner's process forks one per connection
            conn, _ = listener.accept()
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    shared = tmp_path / "shared"
    shared.mkdir()
    return boundary.Learner(address, shared), thread


def reconcile(cp: rc.Checkpoint, tools: Any) -> rc.Checkpoint:
    """An honest reconcile, written against the stand-in's named operations."""
    p = cp.pending_tool_use
    if p is None:
        return cp
    if p.name in tools and tools.is_read_only(p.name):
        return rc.answer_pending(cp, tools.execute(p.name, p.input))
    return rc.answer_pending(cp, rc.STATUS_UNKNOWN, is_error=True)


def snoop(tools: Any) -> list[str]:
    """What a hostile function finds on the stand-in it was given."""
    found = [type(tools).__name__, repr(tools)]
    for name in ("world", "_tools", "ledger", "fence", "_handles"):
        try:
            found.append(f"{name}={type(getattr(tools, name)).__name__}")
        except AttributeError:
            found.append(f"{name}: none")
    return found


def test_a_reconcile_runs_through_the_toolbox_operations_and_the_spy_counts(tmp_path):
    """The learner's reconcile executes read_file through the stand-in: the checker's spy counts one call."""
    learner, _ = _pair({"reconcile": reconcile}, tmp_path)
    box = fresh_toolbox()
    cp = rc.Checkpoint(
        task="t",
        run_id="r",
        messages=[
            {"role": "user", "content": "t"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_01x", "name": "list_dir", "input": {"path": "."}}],
            },
        ],
        pending_tool_uses=[rc.PendingToolUse(id="toolu_01x", name="list_dir", input={"path": "."})],
    )
    out = learner.lookup("reconcile")(cp, box)
    assert type(out) is rc.Checkpoint and out.pending_tool_use is None
    assert box.executed == [("list_dir", {"path": "."})]


def test_the_stand_in_holds_no_reference_to_the_checkers_objects(tmp_path):
    """The toolbox a learner's function gets has no world, no tools table and no handle table worth walking."""
    learner, _ = _pair({"snoop": snoop}, tmp_path)
    found = learner.lookup("snoop")(fresh_toolbox())
    assert found[0] == "ToolboxHandle" and found[1] == "<the grader's toolbox>"
    assert "world: none" in found and "_tools: none" in found and "ledger=NoneType" in found
    assert "_handles=Stand" in found  # the learner's own side's table: numbers, and a session to send ops on


def test_a_guessed_handle_is_a_protocol_error(tmp_path):
    """A handle the checker never issued resolves to nothing: the call fails, with the reason."""
    issued = boundary.Issued()
    with pytest.raises(rpc.ProtocolError, match="never issued"):
        issued.resolve("toolbox", 12345)
    box = fresh_toolbox()
    _, number = issued.export(box) or ("", 0)
    assert issued.resolve("toolbox", number) is box
    with pytest.raises(rpc.ProtocolError, match="never issued"):
        issued.resolve("client", number)  # the same number as another kind


def test_an_object_that_is_not_data_fails_the_call_with_a_reason(tmp_path):
    """A function returning an object with its own __eq__ raises NotDataError on the checker's side, named."""

    class Always:
        def __eq__(self, other: object) -> bool:
            return True

    learner, _ = _pair({"forge": lambda: Always()}, tmp_path)
    with pytest.raises(Exception, match="is not data") as e:
        learner.lookup("forge")()
    assert type(e.value).__name__ == "NotDataError"


def test_a_value_that_is_not_data_cannot_be_looked_up(tmp_path):
    """A notebook name bound to an object (not data, not callable) is refused by name."""
    learner, _ = _pair({"RESUME_ACTION": type("X", (), {})()}, tmp_path)
    with pytest.raises(Exception, match="is not data"):
        learner.lookup("RESUME_ACTION")


def test_the_client_takes_only_the_arguments_of_the_table():
    """messages.create on the checker's client refuses a keyword outside CLIENT_ARGUMENTS (stream, extra_headers)."""
    client = rc.make_client(live=False)
    with pytest.raises(TypeError, match="stream"):
        boundary.CHECKER_OPS["client.messages.create"](client, model="m", max_tokens=1, messages=[], stream=True)


def save(state: dict, path: str) -> str:
    """A learner's save: writes beside the path and returns where it was told to write."""
    Path(path).write_text(repr(state))
    Path(path).with_name("left-over").write_text("x")
    return path


def test_a_handed_path_is_a_copy_read_back_after_the_call(tmp_path):
    """The function writes a copy in the shared folder; the checker's file is what the copy was at the end."""
    learner, _ = _pair({"save": save}, tmp_path)
    own = tmp_path / "own"
    own.mkdir()
    (own / "world.sqlite").write_text("evidence")
    target = own / "state.json"
    given = learner.lookup("save")({"a": 1}, handed(target))
    assert Path(given).parent.parent == tmp_path / "shared" and not Path(given).parent.exists()
    assert target.read_text() == "{'a': 1}"
    assert sorted(p.name for p in own.iterdir()) == ["state.json", "world.sqlite"]  # only the handed file came back


def test_a_handed_folder_comes_back_whole(tmp_path):
    """With folder=True every file the function left is read back, so a check sees its leftovers."""
    learner, _ = _pair({"save": save}, tmp_path)
    own = tmp_path / "own"
    own.mkdir()
    learner.lookup("save")({"a": 1}, handed(own / "state.json", folder=True))
    assert sorted(p.name for p in own.iterdir()) == ["left-over", "state.json"]


def link_out(state: dict, path: str) -> None:
    """A hostile save: the handed file becomes a symlink to a file only the checker should read."""
    os.unlink(path)
    os.symlink("/etc/passwd", path)


def test_a_link_left_in_the_copy_is_never_followed(tmp_path):
    """A symlink where the file was fails the call, naming it; nothing is read through it, the checker's file goes."""
    learner, _ = _pair({"save": link_out}, tmp_path)
    target = tmp_path / "state.json"
    target.write_text("old")
    with pytest.raises(boundary.HandedFileError, match=r"state\.json: left as something other than a regular file"):
        learner.lookup("save")({}, handed(target))
    assert not target.exists()


def swap_folder(state: dict, path: str) -> None:
    """A hostile save: the copy's folder is moved away and a link to a secret folder put in its place."""
    folder = Path(path).parent
    secret = folder.parent.parent / "secret"
    os.rename(folder, folder.with_name("moved"))
    os.symlink(secret, folder)


def test_a_copy_folder_swapped_for_a_link_reads_back_the_real_folder(tmp_path):
    """The copy folder is held open by descriptor: a link put in its place is never followed, nothing secret comes back."""
    learner, _ = _pair({"save": swap_folder}, tmp_path)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "ANSWER_KEY").write_text("finished_no_call")
    own = tmp_path / "own"
    own.mkdir()
    (own / "state.json").write_text("old")
    learner.lookup("save")({}, handed(own / "state.json", folder=True))
    assert sorted(p.name for p in own.iterdir()) == ["state.json"] and (own / "state.json").read_text() == "old"


def killed(state: dict, path: str, tools: Any) -> None:
    """A save that writes, then asks the checker to run a tool (during which the check kills the call)."""
    Path(path).write_text("written before the kill")
    tools.execute("list_dir", {"path": "."})
    Path(path).write_text("written after the kill")  # pragma: no cover - never reached


class DyingBox(CountingToolbox):
    """A toolbox whose process dies once a tool ran (the checks' DyingToolbox, simplified)."""

    def execute(self, name: str, input: dict[str, Any], *, idempotency_key: str | None = None) -> str:
        super().execute(name, input, idempotency_key=idempotency_key)
        die()
        return ""  # pragma: no cover - never reached


def test_a_call_killed_by_the_check_leaves_what_was_written_before_the_kill(tmp_path):
    """support.die reads the handed copies back first: the checker's file holds the state at the kill."""
    from resumable_core.crash import run_in_child

    learner, _ = _pair({"killed": killed}, tmp_path)
    box = fresh_toolbox()
    target = tmp_path / "state.json"
    ended = run_in_child(lambda: learner.lookup("killed")({}, handed(target), DyingBox.wrap(box)))
    assert ended == "killed"
    assert target.read_text() == "written before the kill"


def test_a_restarted_call_takes_no_handed_path_and_needs_the_hosts_socket(tmp_path):
    """A freshly started process sees no shared folder, so a handed path is the check's bug; no restart socket, no call."""
    learner, _ = _pair({"save": save}, tmp_path)
    with pytest.raises(ValueError, match="data and handles only"):
        learner.call_fresh("save", {"a": 1}, handed(tmp_path / "state.json"))
    with pytest.raises(RuntimeError, match="no restart socket"):
        learner.call_fresh("save", {"a": 1}, "plain data")


LAZY_ANTHROPIC = """
import sys
from resumable_core.course.grading.inside.learner_server import preload
from resumable_core.course.grading.recheck import boundary, rpc
preload()
codec = boundary.codec(rpc.NoHandles())
assert codec.decode(codec.encode([1, "a", {"k": b"x"}])) == [1, "a", {"k": b"x"}]
assert type(codec.decode_exception(codec.encode_exception(ValueError("v")))).__mro__[1] is ValueError
assert "anthropic" not in sys.modules, "plain data imported anthropic"
raised = codec.decode_exception({"name": "Bad", "known": ["anthropic.BadRequestError"], "message": "m"})
import anthropic
assert isinstance(raised, anthropic.BadRequestError), type(raised).__mro__
message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
           "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
later = boundary.codec(rpc.NoHandles())  # made before anthropic's types are in its table
wire = later.encode(anthropic.types.Message.model_validate(message))
assert type(boundary.codec(rpc.NoHandles()).decode(wire)) is anthropic.types.Message
known = later.encode_exception(anthropic.APIConnectionError(request=__import__("httpx").Request("GET", "http://x")))
assert "anthropic.APIConnectionError" in known["known"], known
"""


def test_the_codec_imports_anthropic_only_for_a_value_of_its_own() -> None:
    """A learner's process and a checker that carry plain data never import anthropic (seconds of every process's
    start); its models and errors still cross both ways, the codec loading them on the first that needs them."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", LAZY_ANTHROPIC], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
