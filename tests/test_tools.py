"""tools.py and world.py: effects declared at definition, real effects on a real world."""
# mypy: disable-error-code="union-attr"
# (these tests read back what they just wrote; a None fails the test at once anyway)

from __future__ import annotations

import multiprocessing

import pytest

import resumable_core as rc


def test_each_tool_declares_its_effect():
    """Read-only and side-effecting tools are known from their definitions, not a name list."""
    effects = {t.name: t.effect for t in rc.DEFAULT_TOOLS}
    assert effects == {
        "list_dir": rc.Effect.READ_ONLY,
        "read_file": rc.Effect.READ_ONLY,
        "grep": rc.Effect.READ_ONLY,
        "send_email": rc.Effect.SIDE_EFFECT,
        "list_sent_emails": rc.Effect.READ_ONLY,
    }


def test_unknown_tools_are_never_read_only(run_folder):
    """A tool the toolbox does not know is not assumed safe to re-run."""
    assert run_folder.toolbox.is_read_only("read_file")
    assert not run_folder.toolbox.is_read_only("send_email")
    assert not run_folder.toolbox.is_read_only("drop_database")


def test_executing_an_unknown_tool_raises(run_folder):
    """execute() of an unknown tool raises UnknownToolError naming it."""
    with pytest.raises(rc.UnknownToolError, match="drop_database"):
        run_folder.toolbox.execute("drop_database", {})


def test_schemas_are_messages_api_tool_definitions(run_folder):
    """Every schema has a name, a description and an object input_schema."""
    for s in run_folder.toolbox.schemas():
        assert set(s) == {"name", "description", "input_schema"}
        assert s["input_schema"]["type"] == "object"


def test_read_tools_read_the_notes(run_folder):
    """list_dir, read_file and grep see the meeting notes."""
    box = run_folder.toolbox
    assert "meeting-08-25.md" in box.execute("list_dir", {"path": "."})
    assert "Retro" in box.execute("read_file", {"path": "meeting-08-25.md"})
    assert "meeting-08-21.md: - Decision" in box.execute("grep", {"pattern": "Decision", "path": "."})


def test_paths_outside_the_notes_are_refused(run_folder):
    """read_file cannot escape the notes folder."""
    with pytest.raises(rc.ToolError):
        run_folder.toolbox.execute("read_file", {"path": "../world.sqlite"})


def test_missing_file_is_an_ordinary_tool_error(run_folder):
    """A failed tool raises ToolError (the loop reports it with is_error)."""
    with pytest.raises(rc.ToolError, match="no such file"):
        run_folder.toolbox.execute("read_file", {"path": "nope.md"})


def test_every_send_is_a_real_row_in_the_outbox(run_folder):
    """Two sends are two emails: the outbox counts effects for real."""
    mail = {"to": "a@example.com", "subject": "s", "body": "b"}
    run_folder.toolbox.execute("send_email", mail)
    run_folder.toolbox.execute("send_email", mail)
    assert len(run_folder.world.sent_emails()) == 2
    assert "#2 to a@example.com: s" in run_folder.toolbox.execute("list_sent_emails", {})


def test_outbox_dedupes_on_the_idempotency_key(tmp_path):
    """The same key sends once, even without a ledger receipt."""
    world = rc.World.create(tmp_path)
    assert world.send_email("a@x", "s", "b", "k1") == (1, True)
    assert world.send_email("a@x", "s", "b", "k1") == (1, False)
    assert len(world.sent_emails()) == 1


def test_ledger_receipt_makes_the_side_effect_run_once(tmp_path):
    """With a ledger, executing the same key twice sends one email and returns the same result."""
    world = rc.World.create(tmp_path / "w")
    box = rc.Toolbox(world, ledger=rc.Ledger(tmp_path / "ledger.sqlite"))
    mail = {"to": "a@example.com", "subject": "s", "body": "b"}
    first = box.execute("send_email", mail, idempotency_key="run:toolu_1")
    second = box.execute("send_email", mail, idempotency_key="run:toolu_1")
    assert first == second and len(world.sent_emails()) == 1


def test_tool_decorator_builds_a_custom_tool(tmp_path):
    """A tool defined with @tool carries its effect and runs against the world."""

    @rc.tool(rc.Effect.SIDE_EFFECT, "Shout.", word={"type": "string"})
    def shout(world, word):
        return word.upper()

    box = rc.Toolbox(rc.World.create(tmp_path), tools=[shout])
    assert box.execute("shout", {"word": "hi"}) == "HI"
    assert not box.is_read_only("shout") and box.names == ["shout"]
    assert box.schemas()[0]["input_schema"]["required"] == ["word"]


def test_same_key_with_another_email_is_a_conflict(tmp_path):
    """The outbox refuses a known key with another recipient or body, as the ledger does."""
    world = rc.World.create(tmp_path)
    world.send_email("a@x", "s", "b", "k1")
    for other in (("c@x", "s", "b"), ("a@x", "s", "other body")):
        with pytest.raises(rc.IdempotencyConflictError) as info:
            world.send_email(*other, "k1")
        assert info.value.key == "k1" and isinstance(info.value, rc.ToolError)
    assert len(world.sent_emails()) == 1


def test_a_tools_database_failure_is_a_tool_error(tmp_path):
    """A raw sqlite3 error inside a tool comes out of execute() as a ToolError."""
    box = rc.Toolbox(rc.World.create(tmp_path))
    box.world.db_path.write_bytes(b"not a database, " * 64)
    with pytest.raises(rc.ToolError, match="send_email failed"):
        box.execute("send_email", {"to": "a@x", "subject": "s", "body": "b"})


def _race(world_root, ledger_path, outcomes, start, rounds):
    """One sender: at each round, meet the other sender at the barrier, then send under the round's key."""
    box = rc.Toolbox(rc.World(world_root), ledger=rc.Ledger(ledger_path))
    mail = {"to": "a@example.com", "subject": "s", "body": "b"}
    for i in range(rounds):
        start.wait(60)
        try:
            box.execute("send_email", mail, idempotency_key=f"run:toolu_{i}")
            outcomes.put("ok")
        except rc.ToolError as e:
            outcomes.put(f"ToolError: {e}")
        except Exception as e:  # noqa: BLE001 - the point of the test is to see any other error
            outcomes.put(f"{type(e).__name__}: {e}")


@pytest.mark.slow
def test_two_senders_racing_with_one_key_send_once(tmp_path):
    """150 races of two processes sending under one key: one email each, and no raw IntegrityError."""
    rounds = 150
    world = rc.World.create(tmp_path / "w")
    rc.Ledger(tmp_path / "ledger.sqlite")
    ctx = multiprocessing.get_context("fork")
    outcomes, start = ctx.Queue(), ctx.Barrier(2)
    args = (world.root, tmp_path / "ledger.sqlite", outcomes, start, rounds)
    senders = [ctx.Process(target=_race, args=args) for _ in range(2)]
    for s in senders:
        s.start()
    results = [outcomes.get(timeout=300) for _ in range(2 * rounds)]
    for s in senders:
        s.join()
    assert [r for r in results if r != "ok"] == []
    keys = [e["idempotency_key"] for e in world.sent_emails()]
    assert len(keys) == rounds and len(set(keys)) == rounds


def test_a_failed_call_is_receipted_and_not_run_again(tmp_path):
    """A side-effecting call that fails under a key gets a failed receipt; the retry re-raises it unrun."""
    runs = []

    @rc.tool(rc.Effect.SIDE_EFFECT, "Fail.", word={"type": "string"})
    def fail(world, word):
        runs.append(word)
        raise rc.ToolError(f"cannot {word}")

    box = rc.Toolbox(rc.World.create(tmp_path / "w"), tools=[fail], ledger=rc.Ledger(tmp_path / "l.sqlite"))
    for _ in range(2):
        with pytest.raises(rc.ToolError, match="cannot go"):
            box.execute("fail", {"word": "go"}, idempotency_key="run:toolu_1")
    receipt = box.ledger.lookup("run:toolu_1")
    assert runs == ["go"] and receipt.status == "failed" and receipt.result == "cannot go"
