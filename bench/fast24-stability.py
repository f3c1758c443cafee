#!/usr/bin/env python3
"""Run `fragkit bench fast24 --quick --format json` N times (default 5) and print, for each
of the 12 non-trivial ratios (fragmented/contiguous and approach/contiguous of the six
workloads): every run's modeled ratio, their median, the largest deviation of a run from
that median, and the paper's ratio beside it with the median's deviation from it.

Checks the two criteria the FAST'24 table is held to:
  stable:  every run within +-3% of its own median;
  paper:   the median within +-10% of the paper's ratio (fast24_ae README, section 6).
Exit status: 0 when both hold for all 12 ratios, 1 when any does not, 2 on an error.

Usage (root): bench/fast24-stability.py [RUNS] [FRAGKIT] [-- EXTRA bench fast24 ARGS]
e.g. bench/fast24-stability.py 5 target/release/fragkit
Each run's JSON is kept in $FAST24_RUNS_DIR (default: a new directory under /tmp).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile


def main() -> int:
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        i = args.index("--")
        args, extra = args[:i], args[i + 1:]
    try:
        runs = int(args[0]) if args else 5
    except ValueError:
        print(f"fast24-stability: RUNS: expected a number, got {args[0]!r}", file=sys.stderr)
        return 2
    if runs < 2:
        print(f"fast24-stability: RUNS {runs}: expected at least 2", file=sys.stderr)
        return 2
    fragkit = args[1] if len(args) > 1 else "target/release/fragkit"
    out_dir = os.environ.get("FAST24_RUNS_DIR") or tempfile.mkdtemp(prefix="fast24-runs-")
    os.makedirs(out_dir, exist_ok=True)
    ratios = {}  # (workload, state) -> [modeled ratio per run]
    paper = {}
    for n in range(runs):
        # Each run's recorded traces are kept beside its JSON: a run off its median can
        # be replayed and compared with the others afterwards.
        traces = os.path.join(out_dir, f"run{n + 1}-traces")
        cmd = [fragkit, "bench", "fast24", "--quick", "--format", "json",
               "--keep-traces", traces, *extra]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
            print(f"fast24-stability: run {n + 1}: {' '.join(cmd)} exited {p.returncode}: {last}",
                  file=sys.stderr)
            return 2
        with open(os.path.join(out_dir, f"run{n + 1}.json"), "w") as f:
            f.write(p.stdout)
        for row in json.loads(p.stdout)["rows"]:
            if row["state"] == "contiguous":
                continue
            key = (row["workload"], row["state"])
            ratios.setdefault(key, []).append(row["modeled_ratio"])
            paper[key] = row["paper_ratio"]
        print(f"run {n + 1}/{runs} done ({out_dir}/run{n + 1}.json)", file=sys.stderr)
    print(f"{'workload':<17} {'state':<10} {'runs':<{7 * runs}} {'median':>7} {'spread':>7} "
          f"{'paper':>6} {'off':>6}  verdict")
    failed = 0
    for (w, s), xs in ratios.items():
        med = statistics.median(xs)
        spread = max(abs(x / med - 1) for x in xs) if med > 0 else float("inf")
        off = med / paper[(w, s)] - 1
        stable, close = spread <= 0.03, abs(off) <= 0.10
        verdict = ", ".join([
            "stable" if stable else "NOT STABLE (>3%)",
            "within 10% of paper" if close else "NOT WITHIN 10% OF PAPER",
        ])
        failed += not (stable and close)
        shown = " ".join(f"{x:6.3f}" for x in xs)
        print(f"{w:<17} {s:<10} {shown:<{7 * runs}} {med:7.3f} {spread * 100:6.1f}% "
              f"{paper[(w, s)]:6.3f} {off * 100:+5.1f}%  {verdict}")
    print(f"\n{len(ratios) - failed} of {len(ratios)} ratios stable within 3% and within 10% of "
          f"the paper's, n={runs} runs of `{fragkit} bench fast24 --quick`; runs in {out_dir}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
