"""checkpoint.py: the checkpoint type, atomic durable save, and a load that refuses bad files."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import resumable_core as rc
from resumable_core import lab
from resumable_core.crash import kill_self, run_in_child


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
        (b'{"version": 2, "task": "t", "messages": []}', rc.CheckpointVersionError, "version 2"),
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
        (_mutated("B", lambda d: d.update(pending_tool_use=None)), "pending_tool_use is null"),
        (_mutated("B", lambda d: d["pending_tool_use"].update(id="toolu_other")), "is not the last message's tool_use"),
        (_mutated("B", lambda d: d["pending_tool_use"].update(input={"path": "x"})), "differs from the tool_use block"),
        (
            _mutated("A", lambda d: d.update(pending_tool_use={"id": "toolu_x", "name": "read_file", "input": {}})),
            "not the assistant's tool_use",
        ),
        (_mutated("A", lambda d: d["messages"].pop(2)), "in a row"),
        (
            _mutated("A", lambda d: d["messages"][2]["content"][0].update(tool_use_id="toolu_nobody")),
            "has no tool_result",
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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=10,
    )
)
def test_arbitrary_json_is_loaded_or_refused_with_checkpoint_error(tmp_path, value):
    """Any JSON value at all is either a valid checkpoint or refused with a CheckpointError."""
    path = tmp_path / "cp.json"
    path.write_text(json.dumps(value))
    try:
        rc.load_checkpoint(path)
    except rc.CheckpointError:
        pass


def test_folder_is_fsynced_after_rename(tmp_path, monkeypatch):
    """The save fsyncs the data and then the folder, so the rename itself survives power loss."""
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.path.isdir(f"/proc/self/fd/{fd}")), real(fd)))
    rc.save_checkpoint(_finished_cp(), tmp_path / "cp.json")
    assert synced == [False, True]
