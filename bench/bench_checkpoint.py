"""Checkpoint save cost: the kit's durable save against the floor and LangGraph's SQLite saver.

For conversations of 2 to 80 turns, each save is timed (``time.perf_counter_ns``) on the same
disk as the repository, the four ways interleaved rep by rep so drift in the disk hits all alike:

* kit        ``resumable_core.save_checkpoint(cp, path)``: serialize (pydantic + JSON), temp file,
             write, fsync, ``os.replace``, fsync of the folder.
* floor      the same bytes, already serialized: write + fsync + rename. The cheapest atomic
             replace; without a folder fsync the rename itself can still be lost on power loss.
* floor+dir  floor + fsync of the folder: the least a save can pay and be atomic *and* durable.
* langgraph  ``SqliteSaver.put`` of the same messages (one new row per save, history kept),
             journal_mode=WAL, synchronous=FULL: every commit fsyncs the WAL before returning.

Usage: ``python bench/bench_checkpoint.py [--quick] [--reps N] [--budget S] [--dir FOLDER]``
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SIZES = (2, 5, 10, 20, 40, 80)
QUICK_SIZES = (2, 5)

_NOTE_LINES = (
    "- Decision: ship the resume feature behind a flag; Mina owns the rollout.",
    "- Decision: save points A and B stay, and every save is fsynced before the tool runs.",
    "- Open: the retry budget for the outbox; Jun to bring numbers on Thursday.",
    "- Action: reconcile dangling calls by the tool's effect, never a blind re-run.",
    "- Risk: a crash after send_email but before save point B sends the email twice.",
    "- Action: add an idempotency ledger for side-effecting tools next sprint.",
    "- Note: checkpoints keep messages exactly as sent so a resume is invisible.",
    "- Decision: a finished run reports finished on resume and makes no model call.",
)


def _toolu_id(rng: random.Random) -> str:
    return "toolu_01" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(22))


def synthetic_messages(turns: int, seed: int = 0) -> tuple[str, list[dict[str, Any]]]:
    """The task and a conversation of ``turns`` tool-using model turns, in the kit's shape.

    Each turn: an assistant message (text + read_file tool_use with a unique ``toolu_`` id) and
    a user message with its tool_result (a meeting note of a few hundred bytes). The state is
    the one save point B leaves: the last tool result recorded, nothing pending.
    """
    rng = random.Random(seed)
    task = "Summarize this week's meeting notes into one page."
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for t in range(1, turns + 1):
        name = f"meeting-{(t % 28) + 1:02d}-{t:03d}.md"
        tid = _toolu_id(rng)
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Reading {name}."},
                    {"type": "tool_use", "id": tid, "name": "read_file", "input": {"path": name}},
                ],
            }
        )
        body = f"# Meeting {t}, Aug {(t % 28) + 1}\n" + "\n".join(rng.sample(_NOTE_LINES, 5)) + "\n"
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": body}]})
    return task, messages


def build_checkpoint(turns: int):
    """A validated, consistent ``resumable_core.Checkpoint`` of ``turns`` turns."""
    import resumable_core as rc

    task, messages = synthetic_messages(turns, seed=turns)
    cp = rc.Checkpoint(
        task=task, run_id=f"run_bench_{turns:03d}", turns=turns, tokens_used=turns * 700, messages=messages
    )
    problem = rc.consistency_problem(cp)
    if problem:  # the benchmark must save what the kit would really save
        raise SystemExit(f"synthetic checkpoint is inconsistent: {problem}")
    return cp


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def floor_save(data: bytes, path: Path, *, dir_fsync: bool) -> None:
    """Bare durable atomic write of bytes already serialized."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    if dir_fsync:
        _fsync_dir(path.parent)


def open_langgraph(db: Path):
    """A SqliteSaver on ``db`` with WAL and synchronous=FULL, checked to have taken effect."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(db), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()  # creates the tables and sets journal_mode=WAL
    conn.execute("PRAGMA synchronous=FULL")
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    if mode.lower() != "wal" or sync != 2:
        raise SystemExit(f"SQLite durability not as stated: journal_mode={mode}, synchronous={sync}")
    return conn, saver


def langgraph_checkpoints(cp: Any, count: int) -> list[Any]:
    """``count`` successive LangGraph checkpoints whose channel values hold the same state."""
    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

    base = empty_checkpoint()
    base["channel_values"] = {
        "task": cp.task,
        "run_id": cp.run_id,
        "turns": cp.turns,
        "tokens_used": cp.tokens_used,
        "messages": cp.messages,
        "pending_tool_use": None,
    }
    base["channel_versions"] = dict.fromkeys(base["channel_values"], 1)
    return [create_checkpoint(base, None, step) for step in range(count)]


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]


def time_ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e6


def bench_size(turns: int, folder: Path, reps: int, warmup: int, budget: float, min_reps: int) -> dict[str, Any]:
    """Time every way of saving a ``turns``-turn checkpoint ``reps`` times; medians and p90s.

    Stops early, after at least ``min_reps``, once ``budget`` seconds are spent on this size (a
    disk shared with busy neighbours can make every fsync cost milliseconds).
    """
    import resumable_core as rc
    from resumable_core import checkpoint as ckmod

    cp = build_checkpoint(turns)
    data = ckmod._serialize(cp)  # the exact bytes save_checkpoint writes
    sub = folder / f"t{turns:03d}"
    sub.mkdir()
    kit_path, floor_path, floor_dir_path = sub / "kit.json", sub / "floor.json", sub / "floordir.json"
    conn, saver = open_langgraph(sub / "langgraph.sqlite")
    lg_cps = langgraph_checkpoints(cp, warmup + reps)
    deadline = time.perf_counter() + budget
    thread = {"configurable": {"thread_id": f"bench-{turns}", "checkpoint_ns": ""}}
    state: dict[str, Any] = {"config": thread, "i": 0}

    def lg_put() -> None:
        ck = lg_cps[state["i"]]
        state["i"] += 1
        state["config"] = saver.put(state["config"], ck, {"source": "loop", "step": state["i"]}, ck["channel_versions"])

    ways: dict[str, Callable[[], object]] = {
        "kit": lambda: rc.save_checkpoint(cp, kit_path),
        "floor": lambda: floor_save(data, floor_path, dir_fsync=False),
        "floor+dir": lambda: floor_save(data, floor_dir_path, dir_fsync=True),
        "langgraph": lg_put,
    }
    names = list(ways)
    times: dict[str, list[float]] = {n: [] for n in names}
    done = 0
    for i in range(warmup + reps):
        if i >= warmup + min_reps and time.perf_counter() > deadline:
            break
        done = i + 1
        order = names[i % len(names) :] + names[: i % len(names)]  # rotate: no way always goes first
        for n in order:
            ms = time_ms(ways[n])
            if i >= warmup:
                times[n].append(ms)

    # Where the time goes: serialization alone, outside any file work.
    ser_kit = [time_ms(lambda: ckmod._serialize(cp)) for _ in range(max(5, reps // 4))]
    lg_ck = lg_cps[-1]
    ser_lg = [time_ms(lambda: saver.serde.dumps_typed(lg_ck)) for _ in range(max(5, reps // 4))]
    lg_bytes = len(saver.serde.dumps_typed(lg_ck)[1])
    rows = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    conn.close()

    if rc.load_checkpoint(kit_path) != cp:
        raise SystemExit("the kit's saved checkpoint does not read back equal")
    if rows != done:
        raise SystemExit(f"langgraph stored {rows} rows, expected {done}")
    out: dict[str, Any] = {
        "turns": turns,
        "n": done - warmup,
        "messages": len(cp.messages),
        "kit_bytes": len(data),
        "lg_bytes": lg_bytes,
    }
    for n in names:
        out[n] = (statistics.median(times[n]), pct(times[n], 0.9))
    out["ser_kit"] = statistics.median(ser_kit)
    out["ser_lg"] = statistics.median(ser_lg)
    return out


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def format_report(results: list[dict[str, Any]]) -> str:
    f = lambda x: f"{x:.3f}"  # noqa: E731
    main = _table(
        [
            "turns",
            "saves",
            "kit med",
            "kit p90",
            "floor med",
            "floor p90",
            "floor+dir med",
            "floor+dir p90",
            "langgraph med",
            "langgraph p90",
            "kit/floor",
            "kit/floor+dir",
            "kit/langgraph",
        ],
        [
            [
                str(r["turns"]),
                str(r["n"]),
                f(r["kit"][0]),
                f(r["kit"][1]),
                f(r["floor"][0]),
                f(r["floor"][1]),
                f(r["floor+dir"][0]),
                f(r["floor+dir"][1]),
                f(r["langgraph"][0]),
                f(r["langgraph"][1]),
                f"{r['kit'][0] / r['floor'][0]:.2f}x",
                f"{r['kit'][0] / r['floor+dir'][0]:.2f}x",
                f"{r['kit'][0] / r['langgraph'][0]:.2f}x",
            ]
            for r in results
        ],
    )
    where = _table(
        [
            "turns",
            "messages",
            "kit bytes",
            "langgraph bytes",
            "kit serialize med",
            "langgraph serialize med",
            "kit - floor+dir med",
        ],
        [
            [
                str(r["turns"]),
                str(r["messages"]),
                str(r["kit_bytes"]),
                str(r["lg_bytes"]),
                f(r["ser_kit"]),
                f(r["ser_lg"]),
                f(r["kit"][0] - r["floor+dir"][0]),
            ]
            for r in results
        ],
    )
    return "\n".join(
        [
            "Checkpoint save cost, ms per save (median and p90 over `saves` saves of each way, interleaved)",
            main,
            "",
            "Durability: kit = temp file + fsync + os.replace + folder fsync (atomic, survives power loss);",
            "floor = same bytes, write + fsync + rename (atomic; the rename is not yet durable);",
            "floor+dir = floor + folder fsync (the minimum for atomic and durable);",
            "langgraph = SqliteSaver.put, journal_mode=WAL, synchronous=FULL (each commit fsyncs the WAL; one row per save).",
            "",
            "Where the time goes (ms, medians; serialize = building the bytes only, no file work)",
            where,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="two small sizes, a few reps (smoke test)")
    p.add_argument("--reps", type=int, default=None, help="most saves timed per way and size (default 1000; quick 5)")
    p.add_argument("--budget", type=float, default=15.0, help="seconds per size before stopping early (default 15)")
    p.add_argument("--dir", type=Path, default=None, help="parent folder for the temp files (default: the repo)")
    args = p.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else SIZES
    reps = args.reps or (5 if args.quick else 1000)
    warmup = 1 if args.quick else 20
    min_reps = min(reps, 200)
    parent = args.dir or REPO
    with tempfile.TemporaryDirectory(prefix=".bench-checkpoint-", dir=parent) as tmp:
        folder = Path(tmp)
        same = os.stat(folder).st_dev == os.stat(REPO).st_dev
        t0 = time.perf_counter()
        results = [bench_size(n, folder, reps, warmup, args.budget, min_reps) for n in sizes]
        took = time.perf_counter() - t0
    print(format_report(results))
    print(
        f"\nTemp folder under {parent} (same device as the repo: {'yes' if same else 'no'}); "
        f"Python {sys.version.split()[0]}; benchmark took {took:.1f} s."
    )
    load = os.getloadavg()
    print(f"Load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
