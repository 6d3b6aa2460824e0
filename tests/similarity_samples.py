"""A planted class for the similarity report: honest answers of varied shape, copies in disguise, forced answers.

Each honest student writes every function step by step, picking each step's shape (an early
return or a nested if, a loop or a comprehension, a dict literal or a helper) and their own names:
the choices are independent, as a class's are. Planted copies take another student's notebook and
disguise it: every name renamed, two-space indents, comments and blank lines, other strings and
numbers, a statement added. Students who only filled Level 1's dictionary (the same forced answer)
and students who handed in the release untouched are copies of nobody.
"""

from __future__ import annotations

import random
import re
import textwrap

import nbformat

STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
SIGNATURES = {
    "reconcile": "def reconcile(cp, tools):",
    "tool_names": "def tool_names(messages):",
    "with_retries": "def with_retries(call, attempts):",
}
LEVEL1 = 'RESUME_ACTION = {"A": "finished_no_call", "B": "rerun_tool", "C": "is_error_fallback"}'
RELEASE = {
    "level1_actions": 'RESUME_ACTION = {"A": None, "B": None, "C": None}\n' + STUB,
    **{gid: f"{sig}\n{textwrap.indent(STUB, '    ')}" for gid, sig in SIGNATURES.items()},
}

# Each function is a list of steps; each step has shapes an honest student may pick. {p}, {c}, {r}...
# are the student's own names.
STEPS: dict[str, list[list[str]]] = {
    "reconcile": [
        [
            "{p} = cp.pending_tool_use\nif {p} is None:\n    return cp",
            "if cp.pending_tool_use is None:\n    return cp\n{p} = cp.pending_tool_use",
            "{p} = cp.pending_tool_use\nif not {p}:\n    return cp",
            '{p} = getattr(cp, "pending_tool_use", None)\nif {p} is None:\n    return cp',
        ],
        [
            "{ro} = tools.is_read_only({p}.name)",
            '{ro} = tools.effect({p}.name) == "read"',
            "{ro} = {p}.name in tools.read_only_names()",
            "{ro} = tools.is_read_only({p}.name) and {p}.name in tools",
        ],
        [
            "if {ro}:\n    {c} = tools.execute({p}.name, {p}.input)\n    {e} = False\nelse:\n    {c} = rc.STATUS_UNKNOWN\n    {e} = True",
            "{c}, {e} = (tools.execute({p}.name, {p}.input), False) if {ro} else (rc.STATUS_UNKNOWN, True)",
            '{e} = not {ro}\n{c} = "status unknown: check before retrying" if {e} else tools.execute({p}.name, {p}.input)',
            "{c} = rc.STATUS_UNKNOWN\n{e} = True\nif {ro}:\n    {c} = tools.execute({p}.name, dict({p}.input))\n    {e} = False",
        ],
        [
            '{b} = {{"type": "tool_result", "tool_use_id": {p}.id, "content": {c}, "is_error": {e}}}',
            "{b} = rc.tool_result({p}.id, {c}, is_error={e})",
            '{b} = dict(type="tool_result", tool_use_id={p}.id, content={c})\nif {e}:\n    {b}["is_error"] = True',
            '{b} = {{"type": "tool_result", "tool_use_id": {p}.id, "content": str({c})}}\n{b}.update(is_error={e})',
        ],
        [
            'cp.messages.append({{"role": "user", "content": [{b}]}})',
            'cp.messages = cp.messages + [{{"role": "user", "content": [{b}]}}]',
            '{m} = {{"role": "user", "content": []}}\n{m}["content"].append({b})\ncp.messages.append({m})',
            'cp.messages.extend([dict(role="user", content=[{b}])])',
        ],
        [
            "cp.pending_tool_use = None\nreturn cp",
            'return cp.model_copy(update={{"pending_tool_use": None}})',
            'setattr(cp, "pending_tool_use", None)\nreturn cp',
            "cp.pending_tool_use = None\nassert not cp.pending_tool_use\nreturn cp",
        ],
    ],
    "tool_names": [
        [
            "",
            "if not messages:\n    return []",
            "messages = list(messages)",
            "if messages is None:\n    raise ValueError('no messages')",
        ],
        [
            "{r} = []\nfor {m} in messages:\n    for {b} in {m}['content']:\n        if {b}['type'] == 'tool_use':\n            {r}.append({b}['name'])",
            "{r} = [{b}['name'] for {m} in messages for {b} in {m}['content'] if {b}['type'] == 'tool_use']",
            "{r} = []\nfor {m} in messages:\n    if {m}['role'] != 'assistant' or isinstance({m}['content'], str):\n        continue\n    {r} += [{b}['name'] for {b} in {m}['content'] if {b}.get('type') == 'tool_use']",
            "{bs} = [{b} for {m} in messages if isinstance({m}.get('content'), list) for {b} in {m}['content']]\n{r} = list(map(lambda {b}: {b}['name'], filter(lambda {b}: {b}['type'] == 'tool_use', {bs})))",
            "{r} = []\n{i} = 0\nwhile {i} < len(messages):\n    {m} = messages[{i}]\n    {i} += 1\n    {r}.extend({b}['name'] for {b} in {m}['content'] if {b}['type'] == 'tool_use')",
            "{r} = sum(([{b}.get('name') for {b} in {m}.get('content', []) if {b}.get('type') == 'tool_use'] for {m} in messages), [])",
        ],
        [
            "return {r}",
            "return list({r})",
            "return [{n} for {n} in {r} if {n}]",
            "assert all(isinstance({n}, str) for {n} in {r})\nreturn {r}",
        ],
    ],
    "with_retries": [
        [
            "{last} = None",
            "{last}: Exception | None = None",
            "if attempts < 1:\n    raise ValueError('attempts must be at least 1')\n{last} = None",
            "{last} = None\n{delay} = 0.5",
        ],
        [
            "for {i} in range(attempts):",
            "for {i} in range(1, attempts + 1):",
            "{i} = 0\nwhile {i} < attempts:\n    {i} += 1",
            "for {i}, _ in enumerate(range(attempts)):",
        ],
        [
            "    try:\n        return call()",
            "    try:\n        {r} = call()\n        return {r}",
            "    try:\n        {r} = call()\n        if {r} is not None:\n            return {r}",
        ],
        [
            "    except Exception as {x}:\n        {last} = {x}",
            "    except (TimeoutError, ConnectionError) as {x}:\n        {last} = {x}",
            "    except OSError as {x}:\n        print(f'attempt {{{i}}} failed: {{{x}}}')\n        {last} = {x}",
            "    except Exception as {x}:  # anything the call raises\n        {last} = {x}\n        if isinstance({x}, KeyboardInterrupt):\n            raise",
        ],
        [
            "",
            "        time.sleep(2 ** {i})",
            "        time.sleep(min(30, 0.5 * 2 ** {i}))",
            "        logging.warning('retrying after %s', {last})",
        ],
        [
            "raise {last}",
            "raise RuntimeError(f'gave up after {{attempts}} attempts') from {last}",
            "assert {last} is not None\nraise {last}",
            "if {last} is None:\n    raise RuntimeError('no attempt made')\nraise {last}",
        ],
    ],
}
EXTRAS = {
    "reconcile": [
        "assert cp is not None",
        "log.debug('reconciling %s', cp)",
        "cp.messages = list(cp.messages)",
        "{n} = len(cp.messages)",
        "if not hasattr(cp, 'messages'):\n    raise TypeError('not a checkpoint')",
    ],
    "tool_names": ["messages = messages or []", "log.debug('%d messages', len(messages))"],
    "with_retries": ["assert callable(call)", "attempts = int(attempts)"],
}
"""Statements an honest student may add between two steps of a function (only top-level steps)."""
NAMES = {
    "p": ["p", "pending", "call", "tool_call", "dangling", "pend", "req"],
    "ro": ["ro", "read_only", "safe", "rerun", "is_ro", "can_retry"],
    "c": ["content", "out", "output", "res", "value", "payload"],
    "e": ["err", "is_err", "failed", "error", "unknown", "bad"],
    "b": ["block", "blk", "item", "part", "piece", "tr"],
    "m": ["msg", "message", "m", "entry", "turn"],
    "r": ["names", "result", "out", "found", "acc", "calls"],
    "bs": ["blocks", "parts", "items", "all_blocks"],
    "i": ["i", "n", "k", "attempt", "tries"],
    "x": ["e", "exc", "error", "problem", "ex"],
    "last": ["last", "last_error", "caught", "prev", "failure"],
    "delay": ["delay", "wait", "pause", "backoff"],
    "n": ["n", "count", "name", "x", "size"],
}


def honest(rng: random.Random, done: tuple[str, ...] = tuple(SIGNATURES)) -> dict[str, str]:
    """One honest student's answers: Level 1's dictionary and each function in ``done``, every step's shape their own."""
    names = {k: rng.choice(v) for k, v in NAMES.items()}
    answers = {"level1_actions": LEVEL1}
    for gid, steps in STEPS.items():
        if gid in done:
            lines = []
            for at, options in enumerate(steps):
                lines.append(rng.choice(options))
                last = at + 1 == len(steps)
                if rng.random() < 0.25 and not last and not any(o.startswith(" ") for o in steps[at + 1]):
                    lines.append(rng.choice(EXTRAS[gid]))
            body = "\n".join(line for line in lines if line).format(**names)
            answers[gid] = f"{SIGNATURES[gid]}\n{textwrap.indent(body, '    ')}"
    return answers


def disguised(
    answers: dict[str, str], rng: random.Random, cells: tuple[str, ...] = tuple(SIGNATURES)
) -> dict[str, str]:
    """A copy of ``cells`` of ``answers``: every local name renamed, two-space indents, comments and blank lines,
    other strings and numbers, and a print added at the top of each function."""
    out = dict(answers)
    words = sorted({w for pool in NAMES.values() for w in pool}, key=len, reverse=True)
    for gid in cells:
        code = re.sub(rf"(?<![.\w'\"])({'|'.join(words)})\b", r"\1_", answers[gid])  # not attributes, not keys
        code = re.sub(r"'[^']*'", lambda m: repr(m[0][1:-1].upper() + "!"), code)
        code = re.sub(r"\b\d+(\.\d+)?\b", lambda m: str(float(m[0]) + 1), code)
        lines = code.replace("    ", "  ").splitlines()
        lines.insert(1, f"  print('starting {gid}')  # debug")
        out[gid] = "\n\n".join(lines) + "\n# done\n"
    return out


def notebook(answers: dict[str, str]) -> nbformat.NotebookNode:
    """A notebook of the planted release's answer cells, holding ``answers`` (a missing one: the release's stub)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Reconcile, and two helpers")]
    for gid, stub in RELEASE.items():
        cell = nbformat.v4.new_code_cell(answers.get(gid, stub))
        cell.metadata["nbgrader"] = {
            "grade": False,
            "grade_id": gid,
            "locked": False,
            "schema_version": 3,
            "solution": True,
        }
        nb.cells.append(cell)
    return nb


def planted_class(honest_students: int = 24, seed: int = 30) -> tuple[dict[str, dict[str, str]], set[frozenset[str]]]:
    """{student: answers} and the pairs that are copies: ``honest_students`` honest ones (a fifth of them left one
    function undone), four Level-1-only and two untouched, and five planted copies of honest students."""
    rng = random.Random(seed)
    names = list(SIGNATURES)
    students: dict[str, dict[str, str]] = {}
    for n in range(honest_students):
        done = tuple(names) if n % 5 else tuple(g for g in names if g != names[n % 3])
        students[f"h{n:02d}"] = honest(rng, done)
    for n in range(4):
        students[f"level1_only{n}"] = {"level1_actions": LEVEL1}
    for n in range(2):
        students[f"untouched{n}"] = {}
    copies = {
        "copy_a": ("h01", tuple(names)),
        "copy_b": ("h02", tuple(names)),
        "copy_c": ("h03", ("reconcile", "tool_names")),  # copied two, wrote the third
        "copy_d": ("h06", ("reconcile",)),  # copied the biggest one only
        "copy_e": ("h01", tuple(names)),  # a second copy of h01's: copy_a and copy_e are a pair too
    }
    truth: set[frozenset[str]] = set()
    for copier, (source, cells) in copies.items():
        own = honest(rng)  # what the copier wrote themself, where they did not copy
        students[copier] = disguised({**own, **{g: students[source][g] for g in cells}}, rng, cells)
        truth.add(frozenset((copier, source)))
    truth.add(frozenset(("copy_a", "copy_e")))
    return students, truth
