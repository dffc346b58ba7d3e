"""Wall time of ``python -m codegen regenerate`` on specs of many operators.

The spec of N operators repeats the shipped ops.yaml's operators under new names (``l2norm_0000``,
``gate_0001``, ...) until there are N. Every run is a fresh interpreter, as a user's is:

- cold: the output folder does not exist, so every file is rendered, formatted and written;
- no-op: the same command again, nothing changed (the run must leave every mtime as it was);
- edit: one operator's doc changed in the spec, then the same command into that output folder
  (what a user's rerun after an edit does: the generator runs, and writes what changed);
- import torch: ``python -c "import torch"`` alone, the floor under every run (the generator
  parses schemas with torch's own parser).

Rounds interleave the commands (and the generators, with ``--baseline``) so machine noise hits
each alike; the table shows medians of wall time (``- torch`` subtracts the median of ``import
torch`` measured in the same rounds) and of CPU time (the run's and its ruff processes'), which a
busy machine disturbs less.

    python benchmarks/generator_speed.py [--ops 200 1000] [--rounds 5] [--baseline CHECKOUT]

``--baseline`` times another checkout's generator (its ``codegen`` package, imported from
there) on the same specs, and checks that both write the same bytes.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def many_ops_spec(n: int, base: str) -> str:
    """``base`` (a spec) with its operators repeated, renamed, until there are ``n``."""
    lines = base.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip() == "ops:")
    blocks: list[tuple[str, list[str]]] = []
    for line in lines[start + 1 :]:
        m = re.match(r"^  ([A-Za-z_]\w*):\s*$", line)
        if m:
            blocks.append((m.group(1), []))
        elif blocks:
            blocks[-1][1].append(line)
    out = ["".join(lines[: start + 1])]
    for k in range(n):
        name, body = blocks[k % len(blocks)]
        out.append(f"  {name}_{k:04d}:\n" + "".join(body).rstrip("\n") + "\n\n")
    return "".join(out)


def edited(spec: str) -> str:
    """``spec`` with one more line in its first operator's doc (a block scalar, ``doc: |``)."""
    at = spec.index("    doc: |\n") + len("    doc: |\n")
    return spec[:at] + "      Edited for the benchmark.\n\n" + spec[at:]


def _tree(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds, and CPU seconds of the command and everything it waited for (ruff)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--spec", type=Path, default=ROOT / "ops.yaml", help="operators to repeat")
    parser.add_argument("--baseline", type=Path, help="another checkout's generator to time too")
    args = parser.parse_args()

    generators = {"this": ROOT}
    if args.baseline is not None:
        generators = {"baseline": args.baseline.resolve(), "this": ROOT}
    base = args.spec.read_text(encoding="utf-8")
    times: dict[tuple, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="generator-speed-") as tmp:
        work = Path(tmp)
        specs = {}
        for n in args.ops:
            specs[n] = work / f"spec{n}" / "ops.yaml"
            specs[n].parent.mkdir()
            specs[n].write_text(many_ops_spec(n, base), encoding="utf-8")
        torch_cmd = [sys.executable, "-c", "import torch"]
        for r in range(args.rounds):
            times.setdefault(("import torch",), []).append(
                _timed(torch_cmd, work, dict(os.environ))
            )
            for n, spec in specs.items():
                trees = {}
                for name, checkout in generators.items():
                    # The spec's folder is the working directory, so ``codegen`` comes from
                    # PYTHONPATH: the checkout being timed.
                    env = {**os.environ, "PYTHONPATH": str(checkout)}
                    out = work / f"out-{name}-{n}"
                    shutil.rmtree(out, ignore_errors=True)
                    cmd = [sys.executable, "-m", "codegen", "regenerate", "--spec", str(spec)]
                    cmd += ["--out", str(out), "-q"]
                    times.setdefault((name, n, "cold"), []).append(_timed(cmd, spec.parent, env))
                    before = _tree(out)
                    times.setdefault((name, n, "no-op"), []).append(_timed(cmd, spec.parent, env))
                    after = _tree(out)
                    if after != before:
                        changed = [k for k in after if after[k] != before.get(k)]
                        raise SystemExit(f"{name}: the no-op rerun touched {changed[:5]}")
                    original = spec.read_text(encoding="utf-8")
                    spec.write_text(edited(original), encoding="utf-8")
                    try:
                        times.setdefault((name, n, "edit"), []).append(
                            _timed(cmd, spec.parent, env)
                        )
                    finally:
                        spec.write_text(original, encoding="utf-8")
                    # The output, without the caches' records (not output).
                    trees[name] = {
                        k: content
                        for k, (content, _) in _tree(out).items()
                        if not k.startswith(".codegen-cache/")
                    }
                if len(trees) == 2 and trees["baseline"] == trees["this"]:
                    print(f"N={n}: the same {len(trees['this'])} files as the baseline's")
                elif len(trees) == 2:
                    differ = [
                        k for k in trees["this"] if trees["this"][k] != trees["baseline"].get(k)
                    ]
                    missing = sorted(set(trees["baseline"]) ^ set(trees["this"]))
                    print(f"N={n}: output differs from the baseline's: {differ[:5]} {missing[:5]}")
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    def median(key: tuple, which: int) -> float:
        return statistics.median(t[which] for t in times[key])

    torch_wall, torch_cpu = median(("import torch",), 0), median(("import torch",), 1)
    print(
        f"\nmedians of {args.rounds} rounds, seconds; import torch alone: {torch_wall:.2f} wall, "
        f"{torch_cpu:.2f} CPU (a no-op run does not import torch)\n"
    )
    print(
        "| generator | N ops | cold wall | cold wall - torch | cold CPU | no-op wall | no-op CPU "
        "| edit wall | edit wall - torch | edit CPU |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in args.ops:
        for name in generators:
            cold, noop, edit = (name, n, "cold"), (name, n, "no-op"), (name, n, "edit")
            print(
                f"| {name} | {n} | {median(cold, 0):.2f} | {median(cold, 0) - torch_wall:.2f} "
                f"| {median(cold, 1):.2f} | {median(noop, 0):.2f} | {median(noop, 1):.2f} "
                f"| {median(edit, 0):.2f} | {median(edit, 0) - torch_wall:.2f} "
                f"| {median(edit, 1):.2f} |"
            )


if __name__ == "__main__":
    main()
