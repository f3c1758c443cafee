#!/usr/bin/env python3
"""How steady db_bench is alone: the noise any interference figure of `lab --app rocksdb`
has to exceed, and what changes it.

The database is the one `fragkit lab --app rocksdb --keep` built (LAB_OUT: its --out
directory). Every run gets a fresh clone of it (`fragkit scratch clone`) under the
ceiling that lab ran under (its report's io_limit; cgroup v1 blkio throttle), caches
dropped, then db_bench readrandom with O_DIRECT reads, as the lab runs it, for SECONDS
(default 30), under each PREFIX in turn (e.g. "" and "taskset -c 1"), ROUNDS times
alternating. Per run: db_bench's operations in each second, its mean rate, and its rate
over 0.1 s windows (every 0.1 s from 4 s on) over its rate in the 3 s before each window
(10th-90th percentile, median): the lab's during ÷ before with nothing running.

Usage (root): LAB_OUT=DIR bench/app-steadiness.py ROUNDS [SECONDS] -- PREFIX...
              (FRAGKIT: the fragkit that clones, default target/release/fragkit)
Timing: flock /work/bench.lock nice -n -15 ionice -c1 bench/app-steadiness.py ...
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from progress import ops_at, throttle  # bench/progress.py

LINE = re.compile(r"\((\d+),(\d+)\) ops and .* in \(([\d.]+),([\d.]+)\) seconds")


def die(msg):
    print(f"bench/app-steadiness.py: {msg}", file=sys.stderr)
    sys.exit(2)


def run(fk, base, keys, ceiling, prefix, seconds):
    d = tempfile.mkdtemp(dir="/dev/shm", prefix="app-steadiness.")
    c = json.loads(subprocess.check_output(
        [fk, "scratch", "clone", base, "--dir", d, "--format", "json"]))
    mp = c["mountpoint"]
    st = os.stat(mp)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    db = os.path.join(mp, "db")
    throttle(dev, ceiling, True)
    try:
        subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=True)
        out = subprocess.run(
            prefix.split() + ["db_bench", f"--db={db}", f"--wal_dir={db}", "--use_existing_db=1",
                              "--benchmarks=readrandom", "--use_direct_reads=1",
                              "--disable_auto_compactions=1", f"--num={keys}", "--seed=7",
                              f"--duration={seconds}", "--stats_interval=220"],
            capture_output=True, text=True)
    finally:
        throttle(dev, ceiling, False)
        subprocess.run([fk, "scratch", "destroy", mp], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)
    pts = [(float(m.group(4)), int(m.group(2))) for m in LINE.finditer(out.stdout + out.stderr)]
    if len(pts) < 10:
        die(f"db_bench printed {len(pts)} progress lines (exit {out.returncode}): "
            f"{out.stderr.strip()[-300:]}")
    per_s = []
    for t in range(int(pts[-1][0])):
        a, b = ops_at(pts, t), ops_at(pts, t + 1)
        if a is not None and b is not None:
            per_s.append(b - a)
    ratios = []
    t = 4.0
    while t + 0.1 <= pts[-1][0]:
        b0, b1, a = ops_at(pts, t - 3), ops_at(pts, t), ops_at(pts, t + 0.1)
        if None not in (b0, b1, a) and b1 > b0:
            ratios.append((a - b1) / 0.1 / ((b1 - b0) / 3))
        t += 0.1
    ratios.sort()
    rate = (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])
    return per_s, rate, ratios


def main():
    if os.geteuid() != 0:
        die("needs root (scratch clones, blkio, drop_caches)")
    args = sys.argv[1:]
    if "--" not in args or not args[0].isdigit():
        die("usage: LAB_OUT=DIR bench/app-steadiness.py ROUNDS [SECONDS] -- PREFIX...")
    split = args.index("--")
    rounds = int(args[0])
    seconds = int(args[1]) if split > 1 else 30
    prefixes = args[split + 1:] or [""]
    lab = os.environ.get("LAB_OUT") or die("LAB_OUT: the --out of `fragkit lab --app rocksdb --keep`")
    try:
        rep = json.load(open(os.path.join(lab, "report.json")))
        base = rep["variables"]["BASE"]
        keys = rep["keys"]
    except (OSError, ValueError, KeyError) as e:
        die(f"LAB_OUT={lab}: not the --out of `fragkit lab --app rocksdb --keep` ({e})")
    if not os.path.ismount(base):
        die(f"{base}: the lab's base is not mounted (run the lab with --keep)")
    fk = os.environ.get("FRAGKIT") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "..", "target", "release", "fragkit")
    ceiling = rep.get("io_limit")
    print(f"db_bench alone on clones of {base} ({keys} keys), {seconds} s per run, ceiling "
          f"{(ceiling or {}).get('name', 'none')}, fragkit {fk}", flush=True)
    for k in range(rounds):
        for prefix in prefixes:
            per_s, rate, r = run(fk, base, keys, ceiling, prefix, seconds)
            n = len(r)
            print(f"  {prefix or 'unpinned':<14} run {k + 1}: {rate:.0f} ops/s; each second (k ops/s): "
                  + " ".join(f"{x / 1000:.1f}" for x in per_s), flush=True)
            if n >= 10:
                print(f"  {'':<14}        0.1 s windows over the 3 s before: "
                      f"{r[n // 10]:.3f}-{r[9 * n // 10]:.3f} (10th-90th), median {r[n // 2]:.3f}, n={n}",
                      flush=True)


if __name__ == "__main__":
    main()
