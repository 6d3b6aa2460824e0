"""tools.py and world.py: effects declared at definition, real effects on a real world."""

from __future__ import annotations

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


def test_unknown_tools_are_never_read_only(sandbox):
    """A tool the toolbox does not know is not assumed safe to re-run."""
    assert sandbox.toolbox.is_read_only("read_file")
    assert not sandbox.toolbox.is_read_only("send_email")
    assert not sandbox.toolbox.is_read_only("drop_database")


def test_executing_an_unknown_tool_raises(sandbox):
    """execute() of an unknown tool raises UnknownToolError naming it."""
    with pytest.raises(rc.UnknownToolError, match="drop_database"):
        sandbox.toolbox.execute("drop_database", {})


def test_schemas_are_messages_api_tool_definitions(sandbox):
    """Every schema has a name, a description and an object input_schema."""
    for s in sandbox.toolbox.schemas():
        assert set(s) == {"name", "description", "input_schema"}
        assert s["input_schema"]["type"] == "object"


def test_read_tools_read_the_notes(sandbox):
    """list_dir, read_file and grep see the meeting notes."""
    box = sandbox.toolbox
    assert "meeting-08-25.md" in box.execute("list_dir", {"path": "."})
    assert "Retro" in box.execute("read_file", {"path": "meeting-08-25.md"})
    assert "meeting-08-21.md: - Decision" in box.execute("grep", {"pattern": "Decision", "path": "."})


def test_paths_outside_the_notes_are_refused(sandbox):
    """read_file cannot escape the notes folder."""
    with pytest.raises(rc.ToolError):
        sandbox.toolbox.execute("read_file", {"path": "../world.sqlite"})


def test_missing_file_is_an_ordinary_tool_error(sandbox):
    """A failed tool raises ToolError (the loop reports it with is_error)."""
    with pytest.raises(rc.ToolError, match="no such file"):
        sandbox.toolbox.execute("read_file", {"path": "nope.md"})


def test_every_send_is_a_real_row_in_the_outbox(sandbox):
    """Two sends are two emails: the outbox counts effects for real."""
    mail = {"to": "a@example.com", "subject": "s", "body": "b"}
    sandbox.toolbox.execute("send_email", mail)
    sandbox.toolbox.execute("send_email", mail)
    assert len(sandbox.world.sent_emails()) == 2
    assert "#2 to a@example.com: s" in sandbox.toolbox.execute("list_sent_emails", {})


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
