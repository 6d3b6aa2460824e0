"""checkpoint.py: the checkpoint type, atomic durable save, and a load that refuses bad files."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import signal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import resumable_core as rc
from resumable_core import checkpoint as rc_checkpoint
from resumable_core import lab
from resumable_core.crash import kill_self, run_in_child
from resumable_core.errors import CheckpointTooLargeError, CheckpointWriteError
from resumable_core.lab.exercise_checkpoints import FIXTURE_DIR


def _finished_cp() -> rc.Checkpoint:
    return lab.load_exercise_checkpoint("A")


def test_round_trip_keeps_every_field(tmp_path):
    """A saved checkpoint loads back equal, field for field."""
    cp = lab.load_exercise_checkpoint("B")
    rc.save_checkpoint(cp, tmp_path / "cp.json")
    assert rc.load_checkpoint(tmp_path / "cp.json") == cp


def test_missing_file_loads_as_none(tmp_path):
    """No file means a fresh start, not an error."""
    assert rc.load_checkpoint(tmp_path / "nothing.json") is None


def test_save_leaves_no_temp_file(tmp_path):
    """After a save only the checkpoint is in the folder."""
    rc.save_checkpoint(_finished_cp(), tmp_path / "cp.json")
    assert [p.name for p in tmp_path.iterdir()] == ["cp.json"]


def test_kill_during_save_keeps_the_last_good_checkpoint(tmp_path):
    """SIGKILL halfway through a save leaves the previous checkpoint intact and loadable."""
    path = tmp_path / "cp.json"
    old = lab.load_exercise_checkpoint("B")
    rc.save_checkpoint(old, path)
    new = lab.load_exercise_checkpoint("A")
    assert run_in_child(lambda: rc.save_checkpoint(new, path, midway=kill_self)) == "killed"
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers, "the kill should have left a half-written temp file behind"
    new_bytes = (json.dumps(new.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n").encode()
    assert leftovers[0].read_bytes() == new_bytes[: len(new_bytes) // 2]
    assert rc.load_checkpoint(path) == old


@pytest.mark.parametrize(
    "content, error, words",
    [
        (b"{not json", rc.CheckpointCorruptError, "not valid JSON"),
        (b"\xff\xfe", rc.CheckpointCorruptError, "not valid JSON"),
        (b"[1, 2]", rc.CheckpointForeignError, "expected a JSON object"),
        (b'{"checkpoint": {}, "channel_values": {}}', rc.CheckpointForeignError, "no 'version' field"),
        (b'{"version": 3, "task": "t", "messages": []}', rc.CheckpointVersionError, "version 3"),
        (b'{"version": 0, "task": "t", "messages": []}', rc.CheckpointVersionError, "version 0"),
        (b'{"version": true, "task": "t", "messages": []}', rc.CheckpointVersionError, "version True"),
        (
            b'{"version": 1, "task": "t", "turns": -1, "messages": [{"role": "user", "content": "t"}]}',
            rc.CheckpointCorruptError,
            "turns",
        ),
        (b'{"version": 1, "task": "t", "messages": [], "extra": 1}', rc.CheckpointCorruptError, "extra"),
        (b'{"version": 1, "task": "t", "messages": []}', rc.CheckpointInconsistentError, "messages is empty"),
    ],
)
def test_bad_files_are_refused_with_a_typed_error_and_left_as_they_were(tmp_path, content, error, words):
    """Corrupt, foreign, other-version or self-contradicting files raise a named error; the file is unchanged."""
    path = tmp_path / "cp.json"
    path.write_bytes(content)
    with pytest.raises(error) as info:
        rc.load_checkpoint(path)
    assert isinstance(info.value, rc.CheckpointError)
    assert info.value.path == path and words in info.value.reason
    assert path.read_bytes() == content


def test_version_error_carries_found_and_expected(tmp_path):
    """The version error says which version it found and which it reads."""
    path = tmp_path / "cp.json"
    path.write_text(json.dumps({"version": 7, "task": "t", "messages": []}))
    with pytest.raises(rc.CheckpointVersionError) as info:
        rc.load_checkpoint(path)
    assert (info.value.found, info.value.expected) == (7, rc.CHECKPOINT_VERSION)


def _mutated(name: str, fn) -> dict:
    data = json.loads(json.dumps(lab.load_exercise_checkpoint(name).model_dump(mode="json")))
    fn(data)
    return data


@pytest.mark.parametrize(
    "data, words",
    [
        (_mutated("B", lambda d: d.update(pending_tool_uses=[])), "pending_tool_uses is empty"),
        (
            _mutated("B", lambda d: d["pending_tool_uses"][0].update(id="toolu_other")),
            "are not the last message's tool_use ids",
        ),
        (
            _mutated("B", lambda d: d["pending_tool_uses"][0].update(input={"path": "x"})),
            "differs from the tool_use block",
        ),
        (
            _mutated("A", lambda d: d.update(pending_tool_uses=[{"id": "toolu_x", "name": "read_file", "input": {}}])),
            "not the assistant's tool_use",
        ),
        (
            _mutated("A", lambda d: d.update(recorded_results=[{"type": "tool_result", "tool_use_id": "toolu_x"}])),
            "not the assistant's tool_use",
        ),
        (_mutated("A", lambda d: d["messages"].pop(2)), "were found without `tool_result` blocks"),
        (
            _mutated("A", lambda d: d["messages"][2]["content"][0].update(tool_use_id="toolu_nobody")),
            "were found without `tool_result` blocks",
        ),
        (
            _mutated("A", lambda d: d["messages"].__setitem__(0, {"role": "assistant", "content": "hi"})),
            "first message",
        ),
    ],
)
def test_inconsistent_checkpoints_are_refused(tmp_path, data, words):
    """A checkpoint whose pending call, tool_use and tool_result pairs disagree is refused."""
    path = tmp_path / "cp.json"
    path.write_text(json.dumps(data))
    with pytest.raises(rc.CheckpointInconsistentError) as info:
        rc.load_checkpoint(path)
    assert words in info.value.reason


def _two_call_turn(recorded: int) -> dict:
    """Checkpoint B's data with its last turn asking for two tools, ``recorded`` of them answered."""
    data = _mutated("B", lambda d: None)
    first = data["pending_tool_uses"][0]
    second = {"id": "toolu_01second", "name": "send_email", "input": {"to": "a@b.c", "subject": "s", "body": "b"}}
    data["messages"][-1]["content"].append({"type": "tool_use", **second})
    results = [{"type": "tool_result", "tool_use_id": first["id"], "content": "text"}]
    data["pending_tool_uses"] = [first, second][recorded:]
    data["recorded_results"] = results[:recorded]
    return data


@pytest.mark.parametrize("recorded", [0, 1])
def test_a_turn_of_two_calls_loads_with_its_recorded_results_and_pending_calls(tmp_path, recorded):
    """Recorded results then pending calls, in block order, make a sound version-2 checkpoint."""
    path = tmp_path / "cp.json"
    path.write_text(json.dumps(_two_call_turn(recorded)))
    cp = rc.load_checkpoint(path)
    assert cp is not None
    assert [p.name for p in cp.pending_tool_uses] == ["read_file", "send_email"][recorded:]
    assert len(cp.recorded_results) == recorded and not cp.is_finished()


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda d: d["recorded_results"][0].update(tool_use_id=d["pending_tool_uses"][0]["id"]), "in block order"),
        (lambda d: d["pending_tool_uses"].pop(), "are not the last message's tool_use ids"),
        (lambda d: d.update(recorded_results=[*d["recorded_results"], d["recorded_results"][0]]), "in block order"),
        (lambda d: d["recorded_results"][0].update(type="text"), "does not match any of the expected tags"),
        (lambda d: d["recorded_results"][0].pop("tool_use_id"), "recorded_results.0.tool_result.tool_use_id"),
    ],
)
def test_a_two_call_turn_whose_lists_disagree_with_its_blocks_is_refused(tmp_path, change, words):
    """Results and pending calls that are not the turn's tool_use ids in block order are refused."""
    data = _two_call_turn(1)
    change(data)
    path = tmp_path / "cp.json"
    path.write_text(json.dumps(data))
    with pytest.raises(rc.CheckpointInconsistentError) as info:
        rc.load_checkpoint(path)
    assert words in info.value.reason


def test_a_turn_whose_every_call_is_recorded_but_not_sent_is_refused(tmp_path):
    """Every result recorded and nothing pending: the results belong in a user message, not in the checkpoint."""
    data = _two_call_turn(1)
    second = data["pending_tool_uses"].pop()
    data["recorded_results"].append({"type": "tool_result", "tool_use_id": second["id"], "content": "sent"})
    path = tmp_path / "cp.json"
    path.write_text(json.dumps(data))
    with pytest.raises(rc.CheckpointInconsistentError, match="belong in one user message"):
        rc.load_checkpoint(path)


@pytest.mark.parametrize("name", list("ABCDEF"))
def test_a_committed_version_1_fixture_migrates_on_load(name):
    """Each committed exercise checkpoint is a version-1 file and loads as version 2, its one slot now a list."""
    raw = json.loads((FIXTURE_DIR / f"checkpoint_{name.lower()}.json").read_text())
    assert raw["version"] == 1 and "pending_tool_uses" not in raw
    cp = lab.load_exercise_checkpoint(name)
    assert cp.version == rc.CHECKPOINT_VERSION == 2 and cp.recorded_results == []
    pending = raw["pending_tool_use"]
    assert [p.model_dump() for p in cp.pending_tool_uses] == ([] if pending is None else [pending])
    assert cp.messages == raw["messages"] and (cp.run_id, cp.turns) == (raw["run_id"], raw["turns"])


def test_a_migrated_checkpoint_is_saved_as_version_2(tmp_path):
    """Loading a version-1 file never rewrites it; saving what was loaded writes version 2."""
    source = FIXTURE_DIR / "checkpoint_b.json"
    before = source.read_bytes()
    cp = lab.load_exercise_checkpoint("B")
    rc.save_checkpoint(cp, tmp_path / "cp.json")
    saved = json.loads((tmp_path / "cp.json").read_text())
    assert source.read_bytes() == before
    assert saved["version"] == 2 and "pending_tool_use" not in saved and len(saved["pending_tool_uses"]) == 1
    assert rc.load_checkpoint(tmp_path / "cp.json") == cp


def test_the_one_slot_reads_and_sets_the_first_pending_call():
    """``pending_tool_use`` (version 1's slot) reads the first pending call; None clears them all."""
    cp = lab.load_exercise_checkpoint("B")
    assert cp.pending_tool_use == cp.pending_tool_uses[0]
    cp.pending_tool_use = None
    assert cp.pending_tool_uses == [] and cp.pending_tool_use is None


def test_save_refuses_to_write_the_api_key(tmp_path, monkeypatch):
    """A state holding the API key is never written, and no file appears."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value-123")
    cp = rc.new_checkpoint("please use sk-ant-secret-value-123")
    with pytest.raises(rc.SecretInCheckpointError):
        rc.save_checkpoint(cp, tmp_path / "cp.json")
    assert list(tmp_path.iterdir()) == []


def test_is_finished_reads_the_last_message():
    """Only a last assistant reply with no tool_use and nothing pending is a finished run."""
    assert lab.load_exercise_checkpoint("A").is_finished()
    assert not lab.load_exercise_checkpoint("B").is_finished()
    assert not rc.new_checkpoint("t").is_finished()


_VALID = json.dumps(lab.load_exercise_checkpoint("B").model_dump(mode="json"), indent=2).encode()


@pytest.mark.slow
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cut=st.integers(min_value=0, max_value=len(_VALID)),
    flips=st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), max_size=4),
)
def test_corrupted_bytes_never_load_silently_wrong(tmp_path, cut, flips):
    """Truncated or byte-flipped checkpoints either load as a valid consistent checkpoint or raise CheckpointError."""
    data = bytearray(_VALID[:cut] if cut < len(_VALID) else _VALID)
    for pos, value in flips:
        if pos < len(data):
            data[pos] = value
    path = tmp_path / "cp.json"
    path.write_bytes(bytes(data))
    try:
        cp = rc.load_checkpoint(path)
    except rc.CheckpointError:
        pass
    else:
        assert cp is not None and rc.consistency_problem(cp) is None
    assert path.read_bytes() == bytes(data)


# Raw JSON texts, written by hand so they can hold what json.dumps never writes: duplicate keys,
# NaN and Infinity, numbers of thousands of digits, lone surrogates and very deep nesting.
_KEYS = st.sampled_from(["a", "b", "turns", "id"]) | st.text(max_size=4)
_RAW_SCALARS = st.one_of(
    st.sampled_from(["null", "true", "false", "NaN", "Infinity", "-Infinity", "1e999", "-0"]),
    st.integers(-(10**30), 10**30).map(str),
    st.integers(1, 6000).map(lambda digits: "7" * digits),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(st.characters(codec=None), max_size=6).map(json.dumps),  # may hold lone surrogates
    st.sampled_from(["\udc80", "\ud83d", "x\udfffy", "\ud83d\ude00"]).map(json.dumps),
)


def _raw_object(pairs: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in pairs) + "}"


def _raw_nest(depth_and_inner: tuple[int, str]) -> str:
    depth, inner = depth_and_inner
    return "[" * depth + inner + "]" * depth


_RAW_JSON = st.recursive(
    _RAW_SCALARS,
    lambda child: st.one_of(
        st.lists(child, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
        st.lists(st.tuples(_KEYS, child), max_size=3).map(_raw_object),
        st.tuples(st.integers(0, 1200), child).map(_raw_nest),
    ),
    max_leaves=8,
)


@pytest.mark.slow
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_RAW_JSON)
def test_arbitrary_json_is_loaded_or_refused_with_checkpoint_error(tmp_path, raw):
    """Any JSON-like text at all (deep, huge numbers, NaN, duplicates) loads or is refused with a CheckpointError."""
    path = tmp_path / "cp.json"
    path.write_bytes(raw.encode("utf-8", "surrogatepass"))
    with contextlib.suppress(rc.CheckpointError):
        rc.load_checkpoint(path)


_PLACEHOLDER = '"__raw_value__"'


def _checkpoint_text_with(raw: str, where: str = "input") -> str:
    """Checkpoint A's JSON with ``raw`` as a tool_use input's field, or as a reply's text."""
    data = json.loads(json.dumps(lab.load_exercise_checkpoint("A").model_dump(mode="json")))
    if where == "input":
        data["messages"][1]["content"][1]["input"]["extra"] = "__raw_value__"
    else:
        data["messages"][-1]["content"][0]["text"] = "__raw_value__"
    return json.dumps(data, indent=2, ensure_ascii=False).replace(_PLACEHOLDER, raw, 1)


@pytest.mark.slow
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=_RAW_JSON, where=st.sampled_from(["input", "text"]))
def test_a_checkpoint_that_loads_can_be_saved_and_loads_back_equal(tmp_path, raw, where):
    """Whatever a real checkpoint holds, if it loads then save_checkpoint writes it and it loads back the same."""
    path = tmp_path / "cp.json"
    path.write_bytes(_checkpoint_text_with(raw, where).encode("utf-8", "surrogatepass"))
    try:
        cp = rc.load_checkpoint(path)
    except rc.CheckpointError:
        return
    assert cp is not None
    rc.save_checkpoint(cp, tmp_path / "again.json")
    assert rc.load_checkpoint(tmp_path / "again.json") == cp


def test_folder_is_fsynced_after_rename(tmp_path, monkeypatch):
    """The save fsyncs the data and then the folder, so the rename itself survives power loss."""
    synced: list[bool] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.path.isdir(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    rc.save_checkpoint(_finished_cp(), tmp_path / "cp.json")
    assert synced == [False, True]


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    "text, error, words",
    [
        (_checkpoint_text_with("7" * 5000), rc.CheckpointCorruptError, "a number of 5000 characters"),
        (_checkpoint_text_with("[" * 1100 + "]" * 1100), rc.CheckpointCorruptError, "nesting 1106 levels deep"),
        (_checkpoint_text_with("[" * 300 + "]" * 300), rc.CheckpointCorruptError, "nesting 306 levels deep"),
        (_checkpoint_text_with(json.dumps("\udc80"), "text"), rc.CheckpointCorruptError, "lone surrogate"),
        (_checkpoint_text_with("NaN"), rc.CheckpointCorruptError, "NaN or Infinity"),
        (_checkpoint_text_with("-Infinity"), rc.CheckpointCorruptError, "NaN or Infinity"),
        (_checkpoint_text_with("1e999"), rc.CheckpointCorruptError, "too large for a float"),
        (_checkpoint_text_with('{"path": ".", "path": "/etc"}'), rc.CheckpointCorruptError, "duplicate key 'path'"),
        (
            _checkpoint_text_with("1").replace('"turns": 5,', '"turns": 5, "turns": 1,'),
            rc.CheckpointCorruptError,
            "duplicate key 'turns'",
        ),
        (_checkpoint_text_with("1").replace('"turns": 5', '"turns": "3"'), rc.CheckpointCorruptError, "turns"),
        (_checkpoint_text_with("1").replace('"turns": 5', '"turns": true'), rc.CheckpointCorruptError, "turns"),
        (_checkpoint_text_with("1").replace('"version": 2', '"version": 2.0'), rc.CheckpointVersionError, "2.0"),
    ],
)
def test_files_the_save_could_not_write_back_are_refused(tmp_path, text, error, words):
    """Huge numbers, deep nesting, lone surrogates, NaN, duplicate keys and loose types are refused, file unchanged."""
    path = tmp_path / "cp.json"
    content = text.encode("utf-8", "surrogatepass")
    path.write_bytes(content)
    with pytest.raises(error) as info:
        rc.load_checkpoint(path)
    assert info.value.path == path and words in info.value.reason
    assert path.read_bytes() == content


def test_the_deepest_nesting_allowed_loads_and_saves(tmp_path):
    """Nesting up to MAX_JSON_DEPTH is a valid checkpoint that saves and loads back equal."""
    inner = rc_checkpoint.MAX_JSON_DEPTH - 6  # the document, messages, message, content, block, input
    path = tmp_path / "cp.json"
    path.write_text(_checkpoint_text_with("[" * inner + "]" * inner))
    cp = rc.load_checkpoint(path)
    assert cp is not None
    rc.save_checkpoint(cp, tmp_path / "again.json")
    assert rc.load_checkpoint(tmp_path / "again.json") == cp


def test_the_size_cap_is_checked_before_reading(tmp_path):
    """A file over max_bytes is refused with its size and the cap; one at the cap loads."""
    path = tmp_path / "cp.json"
    rc.save_checkpoint(_finished_cp(), path)
    size = path.stat().st_size
    assert rc.load_checkpoint(path, max_bytes=size) == _finished_cp()
    with pytest.raises(CheckpointTooLargeError) as info:
        rc.load_checkpoint(path, max_bytes=size - 1)
    assert (info.value.size, info.value.limit) == (size, size - 1)


@pytest.mark.parametrize(
    "value, words",
    [
        (float("nan"), "NaN or Infinity"),
        (float("inf"), "NaN or Infinity"),
        (10**150, "a number of 151 characters"),
        ("\udc80", "not writable as JSON"),
        (_nested(200), "nesting"),
        (_nested(300), "not writable as JSON"),
    ],
)
def test_save_refuses_a_state_the_loader_would_refuse(tmp_path, value, words):
    """NaN, huge numbers, lone surrogates and deep nesting are refused at save: nothing is written."""
    cp = _finished_cp()
    cp.messages[1]["content"][1]["input"]["extra"] = value
    with pytest.raises(CheckpointWriteError) as info:
        rc.save_checkpoint(cp, tmp_path / "cp.json")
    assert words in info.value.reason
    assert list(tmp_path.iterdir()) == []


def _full_disk_after(first_bytes: int):
    """An os.write that writes ``first_bytes`` bytes once (a short write), then fails with ENOSPC."""
    real_write, calls = os.write, []

    def write(fd: int, data) -> int:
        calls.append(fd)
        if len(calls) == 1:
            return real_write(fd, bytes(data[:first_bytes]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return write


def test_a_full_disk_keeps_the_old_checkpoint_and_leaves_no_temp_file(tmp_path, monkeypatch):
    """ENOSPC midway through a save: CheckpointWriteError, the old checkpoint intact, no .tmp left."""
    path = tmp_path / "cp.json"
    old = lab.load_exercise_checkpoint("B")
    rc.save_checkpoint(old, path)
    monkeypatch.setattr(os, "write", _full_disk_after(100))
    with pytest.raises(CheckpointWriteError) as info:
        rc.save_checkpoint(_finished_cp(), path)
    monkeypatch.undo()
    assert info.value.path == path and "No space left on device" in info.value.reason
    assert [p.name for p in tmp_path.iterdir()] == ["cp.json"]
    assert rc.load_checkpoint(path) == old


def test_a_file_size_limit_from_the_kernel_keeps_the_old_checkpoint(tmp_path):
    """A real EFBIG (RLIMIT_FSIZE, in a child) is a CheckpointWriteError and leaves no temp file."""
    path = tmp_path / "cp.json"
    old = rc.new_checkpoint("t")
    rc.save_checkpoint(old, path)

    def body() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get the error instead of the signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))
        with pytest.raises(CheckpointWriteError, match="File too large"):
            rc.save_checkpoint(_finished_cp(), path)

    assert run_in_child(body) == "exited"
    assert [p.name for p in tmp_path.iterdir()] == ["cp.json"]
    assert rc.load_checkpoint(path) == old


def test_an_exception_midway_removes_the_temp_file(tmp_path):
    """A save interrupted by an exception (not a kill) removes its temp file and re-raises it."""

    def interrupt() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rc.save_checkpoint(_finished_cp(), tmp_path / "cp.json", midway=interrupt)
    assert list(tmp_path.iterdir()) == []


_PY_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**120), 10**120)
    | st.floats()  # NaN and the infinities included
    | st.text(st.characters(codec=None), max_size=6)  # lone surrogates included
    | st.integers(0, 300).map(_nested),
    lambda child: st.lists(child, max_size=3) | st.dictionaries(st.text(max_size=4), child, max_size=3),
    max_leaves=8,
)


@pytest.mark.slow
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_PY_VALUES)
def test_what_save_writes_loads_back_equal(tmp_path, value):
    """Any value in a tool input is either refused by save_checkpoint or written so that it loads back equal."""
    cp = _finished_cp()
    cp.messages[1]["content"][1]["input"]["extra"] = value
    path = tmp_path / "cp.json"
    path.unlink(missing_ok=True)  # hypothesis runs every example in the same tmp_path
    try:
        rc.save_checkpoint(cp, path)
    except CheckpointWriteError:
        assert not path.exists()
        return
    assert rc.load_checkpoint(path) == cp


def test_pending_calls_reads_both_versions_raw_json():
    """``pending_calls`` lists the pending calls of a file's raw JSON, version 2 or version 1, without validating it."""
    call = {"id": "toolu_01x", "name": "read_file", "input": {"path": "a.md"}}
    assert rc_checkpoint.pending_calls({"version": 2, "pending_tool_uses": [call, call]}) == [call, call]
    assert rc_checkpoint.pending_calls({"version": 1, "pending_tool_use": call}) == [call]
    assert rc_checkpoint.pending_calls({"version": 1, "pending_tool_use": None}) == []
