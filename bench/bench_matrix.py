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
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from typing import Any

FULL: dict[str, Any] = {"strategies": None, "scenarios": None, "crash_points": None}
"""run_matrix's defaults: the registry's matrix strategies, every scenario, every crash point."""
QUICK = {"strategies": ("by_effect",), "scenarios": ("send_email",), "crash_points": ("after_tool", "after_save_b")}

CELL_SCRIPT = """
import time
t0 = time.perf_counter()
import json, sys
from dataclasses import asdict
import anthropic, resumable_core.claude, resumable_core._scripted  # what run_cell would import on first use
from resumable_core.lab.matrix import run_cell
from resumable_core.run_folder import reference_turn
import resumable_core.course.hidden.strategies  # the instructor's answers: registers by_effect(_ledger)
t1 = time.perf_counter()
reference_turn(sys.argv[2])  # run_cell's first step anyway (cached per process); split out to time it
t2 = time.perf_counter()
row = run_cell(sys.argv[1], sys.argv[2], sys.argv[3]).row
t3 = time.perf_counter()
print(json.dumps({"row": asdict(row), "imports": t1 - t0, "reference": t2 - t1, "cell": t3 - t2}))
"""


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


def resolved(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan with run_matrix's defaults filled in from the registries (the answers registered too)."""
    import resumable_core.course.hidden.strategies  # noqa: F401 - registers by_effect and by_effect_ledger
    from resumable_core.crash import CRASH_POINTS
    from resumable_core.scenarios import one_call_scenarios
    from resumable_core.strategies import matrix_strategies

    return {
        "strategies": plan["strategies"] or matrix_strategies(),
        "scenarios": plan["scenarios"] or tuple(one_call_scenarios()),
        "crash_points": plan["crash_points"] or CRASH_POINTS,
    }


def cells(plan: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(crash_point, scenario, strategy) in run_matrix's order."""
    return [(pt, sc, s) for sc in plan["scenarios"] for pt in plan["crash_points"] for s in plan["strategies"]]


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def in_process(plan: dict[str, Any]) -> tuple[float, float, list[dict[str, Any]]]:
    """One run_matrix: wall seconds, CPU seconds (this process + its forked crash children), rows."""
    from resumable_core import lab

    c0 = _cpu(resource.RUSAGE_SELF) + _cpu(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter_ns()
    rows = lab.run_matrix(**plan)
    wall = (time.perf_counter_ns() - t0) / 1e9
    cpu = _cpu(resource.RUSAGE_SELF) + _cpu(resource.RUSAGE_CHILDREN) - c0
    return wall, cpu, [asdict(r) for r in rows]


def fresh(todo: list[tuple[str, str, str]]) -> tuple[float, float, list[dict[str, Any]], list[dict[str, Any]]]:
    """One interpreter per cell: wall seconds, CPU seconds (children and theirs), rows, phase timings."""
    rows, phases = [], []
    c0 = _cpu(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter_ns()
    for point, scenario, strategy in todo:
        took, out = _run_py(["-c", CELL_SCRIPT, point, scenario, strategy])
        data = json.loads(out)
        rows.append(data.pop("row"))
        data["wall"] = took
        phases.append(data)
    wall = (time.perf_counter_ns() - t0) / 1e9
    return wall, _cpu(resource.RUSAGE_CHILDREN) - c0, rows, phases


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _x(a: float, b: float) -> str:
    return f"{a / b:.2f}x"


def _measure(plan: dict[str, Any], runs: int) -> tuple[list[tuple[float, float]], tuple[float, float, list[Any]]]:
    """``runs`` in-process matrices (the first cold), then one fresh interpreter per cell; rows must agree."""
    results, rows_in = [], None
    for _ in range(runs):  # in-process first: the first run pays the imports and reference runs, as a shell's would
        wall, cpu, rows = in_process(plan)
        results.append((wall, cpu))
        if rows_in is not None and rows != rows_in:
            raise SystemExit("in-process runs disagree with each other")
        rows_in = rows
    todo = cells(plan)
    fresh_wall, fresh_cpu, rows_fresh, phases = fresh(todo)
    if rows_fresh != rows_in:
        bad = [f"  {c}: in-process {a} / fresh {b}" for c, a, b in zip(todo, rows_in or [], rows_fresh) if a != b]
        raise SystemExit("ROWS DIFFER between in-process and fresh-interpreter runs:\n" + "\n".join(bad))
    return results, (fresh_wall, fresh_cpu, phases)


def _main_table(results: list[tuple[float, float]], fresh_wall: float, fresh_cpu: float, n: int) -> str:
    first_wall, first_cpu = results[0]
    warm_wall = statistics.median(w for w, _ in results[1:])
    warm_cpu = statistics.median(c for _, c in results[1:])

    def row(name: str, wall: float, cpu: float) -> list[str]:
        ratios = [_x(wall, first_wall), _x(wall, warm_wall), _x(cpu, warm_cpu)]
        return [name, f"{wall:.2f}", _ms(wall / n), f"{cpu:.2f}", _ms(cpu / n), *ratios]

    return _table(
        ["way", "wall s", "wall ms/cell", "cpu s", "cpu ms/cell", "wall x first", "wall x warm", "cpu x warm"],
        [
            row("in-process, first run (imports + reference runs once)", first_wall, first_cpu),
            row(f"in-process, warm (median of {len(results) - 1})", warm_wall, warm_cpu),
            row("fresh interpreter per cell", fresh_wall, fresh_cpu),
        ],
    )


def _phases_table(phases: list[dict[str, Any]], warm_cell: float) -> str:
    def med(key: str) -> float:
        return statistics.median(p[key] for p in phases)

    startup = statistics.median(p["wall"] - p["imports"] - p["reference"] - p["cell"] for p in phases)
    return _table(
        ["phase of one fresh cell (median over cells)", "ms"],
        [
            ["interpreter start + exit, subprocess overhead", _ms(startup)],
            ["imports (anthropic, resumable_core)", _ms(med("imports"))],
            ["uncrashed reference run (cached in-process)", _ms(med("reference"))],
            ["the cell: fork + SIGKILL + resume + row", _ms(med("cell"))],
            ["whole fresh cell (wall, from the parent)", _ms(med("wall"))],
            ["for comparison: one in-process cell, warm (mean)", _ms(warm_cell)],
        ],
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--quick", action="store_true", help="two cells, two in-process runs (smoke test)")
    p.add_argument("--runs", type=int, default=None, help="in-process matrix runs, the first cold (default 3; quick 2)")
    args = p.parse_args(argv)
    os.environ.pop("RESUMABLE_LIVE", None)
    plan = resolved(QUICK if args.quick else FULL)
    runs = max(2, args.runs or (2 if args.quick else 3))
    started = time.perf_counter()
    results, (fresh_wall, fresh_cpu, phases) = _measure(plan, runs)
    n = len(cells(plan))
    n_strategies, n_scenarios = len(plan["strategies"]), len(plan["scenarios"])
    print(
        f"Crash matrix: {n} cells ({n_strategies} strategies x {n_scenarios} scenarios x "
        f"{n // (n_strategies * n_scenarios)} crash points), one after another; rows equal both ways: yes ({n}/{n})"
    )
    print(_main_table(results, fresh_wall, fresh_cpu, n))
    print()
    print("Where a fresh cell's time goes")
    print(_phases_table(phases, statistics.median(w for w, _ in results[1:]) / n))
    print("\ncpu = user + sys of the process and every child it waited for (the forked crash children too).")
    load = os.getloadavg()
    print(
        f"Load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores "
        "(wall times grow with load; cpu times much less)."
    )
    print(f"Python {sys.version.split()[0]}; benchmark took {time.perf_counter() - started:.1f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
