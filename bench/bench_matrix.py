"""The crash matrix in one process against a fresh interpreter per cell.

* in-process   ``resumable_core.run_matrix()``: for every cell, fork a child, SIGKILL it at the
               crash point, resume in the parent. Imports and the two uncrashed reference runs
               are paid once per process (the first run shows that; later runs are warm).
* fresh        one ``python -c`` per cell that imports the kit, runs ``run_cell`` (which itself
               forks and kills a child) and prints the row as JSON, as a cell run from a shell
               or a fresh worker would.

Both run the cells one after another (no parallelism) and must produce equal rows. Everything
is offline: the scripted Claude behind the real anthropic SDK.

Usage: ``python bench/bench_matrix.py [--quick] [--runs N]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from typing import Any

FULL = {
    "strategies": ("delete", "rerun", "by_effect", "by_effect_ledger"),
    "tools": ("read_file", "send_email"),
    "crash_points": None,  # all of resumable_core.CRASH_POINTS
}
QUICK = {"strategies": ("by_effect",), "tools": ("send_email",), "crash_points": ("after_tool", "after_save_b")}

CELL_SCRIPT = """
import json, sys
from dataclasses import asdict
from resumable_core.simulation import run_cell
print(json.dumps(asdict(run_cell(sys.argv[1], sys.argv[2], sys.argv[3]).row)))
"""
IMPORT_SCRIPT = "import anthropic, resumable_core.simulation, resumable_core.claude, resumable_core.scripted"
REFERENCE_SCRIPT = IMPORT_SCRIPT + "\nfrom resumable_core.simulation import reference_turn\nreference_turn(__import__('sys').argv[1])"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RESUMABLE_LIVE", None)  # offline: the scripted Claude
    return env


def _run_py(args: list[str]) -> tuple[float, str]:
    """Run ``python <args>`` in a fresh interpreter; seconds taken and its stdout."""
    t0 = time.perf_counter_ns()
    p = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=_env())
    took = (time.perf_counter_ns() - t0) / 1e9
    if p.returncode != 0 or p.stderr:
        raise SystemExit(f"fresh interpreter failed ({p.returncode}) for {args[-3:]}:\n{p.stderr}")
    return took, p.stdout


def cells(plan: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(crash_point, tool, strategy) in run_matrix's order."""
    from resumable_core.crash import CRASH_POINTS

    points = plan["crash_points"] or CRASH_POINTS
    return [(pt, tool, s) for tool in plan["tools"] for pt in points for s in plan["strategies"]]


def in_process(plan: dict[str, Any]) -> tuple[float, list[dict[str, Any]]]:
    import resumable_core as rc

    kw = {k: v for k, v in plan.items() if v is not None}
    t0 = time.perf_counter_ns()
    rows = rc.run_matrix(**kw)
    return (time.perf_counter_ns() - t0) / 1e9, [asdict(r) for r in rows]


def fresh(todo: list[tuple[str, str, str]]) -> tuple[float, list[float], list[dict[str, Any]]]:
    per_cell, rows = [], []
    t0 = time.perf_counter_ns()
    for point, tool, strategy in todo:
        took, out = _run_py(["-c", CELL_SCRIPT, point, tool, strategy])
        per_cell.append(took)
        rows.append(json.loads(out))
    return (time.perf_counter_ns() - t0) / 1e9, per_cell, rows


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = lambda cs: "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cs, widths)))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="two cells, one run each way (smoke test)")
    p.add_argument("--runs", type=int, default=None, help="in-process matrix runs (default 3; quick 2)")
    p.add_argument("--baseline-reps", type=int, default=None, help="fresh-interpreter baseline reps (default 3; quick 1)")
    args = p.parse_args(argv)
    os.environ.pop("RESUMABLE_LIVE", None)
    plan = QUICK if args.quick else FULL
    runs = max(2, args.runs or (2 if args.quick else 3))
    breps = args.baseline_reps or (1 if args.quick else 3)
    started = time.perf_counter()

    # In-process first: the first run pays the imports and reference runs, as `matrix` from a shell does.
    totals, rows_in = [], None
    for _ in range(runs):
        took, rows = in_process(plan)
        totals.append(took)
        if rows_in is not None and rows != rows_in:
            raise SystemExit("in-process runs disagree with each other")
        rows_in = rows
    todo = cells(plan)
    n = len(todo)
    fresh_total, fresh_cells, rows_fresh = fresh(todo)

    # Where a fresh cell's time goes.
    tool = plan["tools"][-1]
    start_only = statistics.median(_run_py(["-c", "pass"])[0] for _ in range(breps))
    imports = statistics.median(_run_py(["-c", IMPORT_SCRIPT])[0] for _ in range(breps))
    reference = statistics.median(_run_py(["-c", REFERENCE_SCRIPT, tool])[0] for _ in range(breps))

    if rows_fresh != rows_in:
        bad = [f"  {c}: in-process {a} / fresh {b}" for c, a, b in zip(todo, rows_in, rows_fresh) if a != b]
        print("ROWS DIFFER between in-process and fresh-interpreter runs:\n" + "\n".join(bad))
        return 1

    first, warm = totals[0], statistics.median(totals[1:])
    ms = lambda s: f"{s * 1000:.1f}"  # noqa: E731
    main_table = _table(
        ["way", "total s", "per cell ms", "x in-process first", "x in-process warm"],
        [
            ["in-process, first run (imports + reference runs once)", f"{first:.2f}", ms(first / n),
             "1.00x", f"{first / warm:.2f}x"],
            [f"in-process, warm (median of {runs - 1})", f"{warm:.2f}", ms(warm / n), f"{warm / first:.2f}x", "1.00x"],
            ["fresh interpreter per cell", f"{fresh_total:.2f}", ms(fresh_total / n),
             f"{fresh_total / first:.2f}x", f"{fresh_total / warm:.2f}x"],
        ],
    )
    where = _table(
        ["fresh interpreter, median ms", "ms"],
        [
            ["start only (python -c pass)", ms(start_only)],
            ["start + imports (anthropic, resumable_core)", ms(imports)],
            [f"start + imports + uncrashed reference run ({tool})", ms(reference)],
            ["one whole fresh cell (median over cells)", ms(statistics.median(fresh_cells))],
            ["one in-process cell, warm (mean)", ms(warm / n)],
        ],
    )
    print(f"Crash matrix: {n} cells ({len(plan['strategies'])} strategies x {len(plan['tools'])} tools x "
          f"{n // (len(plan['strategies']) * len(plan['tools']))} crash points), one after another; "
          f"rows equal both ways: yes ({n}/{n})")
    print(main_table)
    print()
    print("Where a fresh cell's time goes")
    print(where)
    print(f"\nPython {sys.version.split()[0]}, {os.cpu_count()} cores; benchmark took {time.perf_counter() - started:.1f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
