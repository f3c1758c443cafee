#!/usr/bin/env python3
"""Two fragkit builds defragmenting a RocksDB database while db_bench reads it.

The database is the one `fragkit lab --app rocksdb --keep` built and traced (LAB_OUT: its
--out directory; made here with one round when not given): every run gets a fresh clone
of it (`fragkit scratch clone`), the device ceiling that lab ran under (its report's
io_limit, by default the Samsung 860 EVO data sheet's 550/520 MB/s, 98k/90k IOPS; cgroup
v1 blkio throttle), caches dropped, then
db_bench readrandom with O_DIRECT reads as the lab runs it; 4 s after its first progress
line the build's `defrag --mode MODE` (pick with the lab's traced profile) runs on the
database, and db_bench goes on 3.2 s after it ends. Builds alternate per round (A B, then
B A, ...).

Per run: the defrag's seconds and bytes moved, the device's bytes read and written during
it (/sys/block/DEV/stat; proof both builds did the same work), db_bench's rate during the
defrag over its rate in the 3 s before (on db_bench's own clock, as the lab measures it),
and where db_bench's reading thread was while the defrag ran (its state and kernel stack
sampled every 0.5 ms): waiting for the file's i_rwsem (in ext4_file_read_iter itself;
EXT4_IOC_MOVE_EXT holds it for each call), for the writeback of a page it reads
(folio_wait_writeback), for its read on the device (other D state), or on a CPU (running
or runnable). The same sampler reads the reading thread's read syscalls
(/proc/PID/task/TID/io syscr, one O_DIRECT read each) every 0.5 ms from 0.3 s before the
defrag: its reads during the defrag over its rate in those 0.3 s, and the milliseconds of
10 ms bins in which it read at under a quarter of that rate (stalled), at a resolution
db_bench's progress lines (every 220 operations, about 50 ms) do not have.

Usage (root): bench/app-interference.py FRAGKIT_A FRAGKIT_B [ROUNDS] [MODE]
              (ROUNDS default 7, MODE pick|bypass|full default pick; LAB_OUT=DIR;
              ARGS_A / ARGS_B: more defrag options for that build, PREFIX_A / PREFIX_B: a
              command it runs under, e.g. PREFIX_B="chrt -i 0"; {mp} in it is the clone's mount point;
              APP_PREFIX: the same for db_bench, in every run, e.g. APP_PREFIX="taskset -c 1")
Timing: flock /work/bench.lock nice -n -15 ionice -c1 bench/app-interference.py ...
"""
import bisect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from statistics import median

from progress import rate, throttle  # bench/progress.py

LINE = re.compile(r"\((\d+),(\d+)\) ops and .* in \(([\d.]+),([\d.]+)\) seconds")
BEFORE, WARM, AFTER = 3.0, 1.0, 3.2


def die(msg):
    print(f"bench/app-interference.py: {msg}", file=sys.stderr)
    sys.exit(2)


def device_stat(name):
    v = open(f"/sys/block/{name}/stat").read().split()
    return int(v[2]) * 512, int(v[6]) * 512  # sectors read, written


class Stacks:
    """db_bench's reading thread's kernel stack and its read syscalls so far
    (/proc/PID/task/TID/io syscr, one O_DIRECT read each), sampled until stopped; the stack
    kinds are counted from `count_from` (time.monotonic()) on."""

    KINDS = ("lock", "writeback", "device", "cpu")

    def __init__(self, pid):
        self.pid, self.stop, self.n = pid, False, 0
        self.count_from = float("inf")
        self.kinds = dict.fromkeys(self.KINDS, 0)
        self.reads = {}  # tid: [(time.monotonic(), syscr)]
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        path = f"/proc/{self.pid}/task"
        while not self.stop:
            for tid in os.listdir(path):
                try:
                    if open(f"{path}/{tid}/comm").read().strip() != "db_bench":
                        continue
                    state = open(f"{path}/{tid}/stat").read().rsplit(")", 1)[1].split()[0]
                    frames = [line.split()[-1].split("+")[0]
                              for line in open(f"{path}/{tid}/stack").read().splitlines()[:4]]
                    io = open(f"{path}/{tid}/io").read().split()
                    syscr = int(io[io.index("syscr:") + 1])
                except (OSError, IndexError, ValueError):
                    continue
                # The main thread waits for the reading thread in a futex throughout.
                if frames and frames[0].startswith("futex_"):
                    continue
                now = time.monotonic()
                self.reads.setdefault(tid, []).append((now, syscr))
                if now < self.count_from:
                    continue
                self.n += 1
                if frames and frames[0] == "ext4_file_read_iter":
                    kind = "lock"  # i_rwsem, taken shared by the O_DIRECT read
                elif "folio_wait_writeback" in frames:
                    kind = "writeback"  # a page it reads is being written back
                elif state == "D":
                    kind = "device"  # its read in flight
                else:
                    kind = "cpu"  # running or waiting for a CPU
                self.kinds[kind] += 1
            time.sleep(0.0005)

    def done(self):
        """Each kind's share of the samples."""
        self.stop = True
        self.thread.join()
        return {k: v / self.n if self.n else float("nan") for k, v in self.kinds.items()}

    def stalls(self, a, b, bin_s=0.01, before_s=0.3):
        """Reads in [a, b] over the rate of the `before_s` before a (the stack sampler's
        clock, 1 ms resolution, unlike db_bench's lines every 220 operations), and the
        milliseconds of `bin_s` bins in [a, b] in which db_bench read at under a quarter
        of that rate."""
        if not self.reads:
            return float("nan"), float("nan")
        # The reading thread: the one that read the most.
        reads = max(self.reads.values(), key=lambda v: v[-1][1] - v[0][1])
        ts = [t for t, _ in reads]

        def at(t):
            return reads[min(bisect.bisect_left(ts, t), len(ts) - 1)][1]
        rate = (at(a) - at(a - before_s)) / before_s
        if rate <= 0:
            return float("nan"), float("nan")
        n = max(1, round((b - a) / bin_s))
        stalled = sum(1 for k in range(n)
                      if at(a + (k + 1) * bin_s) - at(a + k * bin_s) < 0.25 * rate * bin_s)
        return (at(b) - at(a)) / (b - a) / rate, 1000 * stalled * bin_s


def run(fk, mode, base, profile, keys, ceiling, seed, prefix, extra):
    d = tempfile.mkdtemp(dir="/dev/shm", prefix="app-interference.")
    c = json.loads(subprocess.check_output(
        [fk, "scratch", "clone", base, "--dir", d, "--format", "json"]))
    mp, dev_name = c["mountpoint"], os.path.basename(c["loop_device"])
    st = os.stat(mp)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    db = os.path.join(mp, "db")
    prof = os.path.join(d, "profile.json")
    with open(prof, "w") as f:
        f.write(open(profile).read().replace(base, mp))
    throttle(dev, ceiling, True)
    app = None
    try:
        subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=True)
        app = subprocess.Popen(
            os.environ.get("APP_PREFIX", "").split() + ["db_bench", f"--db={db}", f"--wal_dir={db}", "--use_existing_db=1",
             "--benchmarks=readrandom", "--use_direct_reads=1", "--disable_auto_compactions=1",
             f"--num={keys}", f"--seed={seed}", "--duration=3600", "--stats_interval=220"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []  # (arrival, db_bench's own seconds, ops)

        def read():
            for line in app.stdout:
                m = LINE.search(line)
                if m:
                    lines.append((time.monotonic(), float(m.group(4)), int(m.group(2))))
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        t = time.monotonic()
        while not lines:
            if app.poll() is not None or time.monotonic() - t > 60:
                die(f"db_bench printed no progress on {db}")
            time.sleep(0.01)
        time.sleep(WARM + BEFORE)
        cmd = [x.replace("{mp}", mp) for x in prefix] + [fk, "defrag", "--mode", mode, "--io-size", "8K", "--format", "json"]
        if mode == "pick":
            cmd += ["--profile", prof]
        cmd += extra
        stacks = Stacks(app.pid)
        time.sleep(0.3)  # the reads' rate before the defrag, on the sampler's clock
        r0 = device_stat(dev_name)
        ds = time.monotonic()
        stacks.count_from = ds
        out = subprocess.run(cmd + [db], capture_output=True, text=True)
        de = time.monotonic()
        shares = stacks.done()
        reads_ratio, stalled_ms = stacks.stalls(ds, max(de, ds + 0.1))
        subprocess.run(["sync", "-f", db], check=True)
        r1 = device_stat(dev_name)
        if out.returncode not in (0, 1):
            die(f"{fk} defrag exited {out.returncode}: {out.stderr.strip()[-300:]}")
        try:
            moved = json.loads(out.stdout)["summary"]["bytes_moved"]
        except (ValueError, KeyError, TypeError):
            moved = float("nan")  # a PREFIX that keeps defrag's report to itself
        time.sleep(AFTER)
        app.kill()
        app.wait()
        reader.join(timeout=5)
    finally:
        if app and app.poll() is None:
            app.kill()
        throttle(dev, ceiling, False)
        subprocess.run([fk, "scratch", "destroy", mp], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)
    # db_bench's clock: its start is the line that arrived least late, minus its own time.
    start = min(a - own for a, own, _ in lines)
    s = sorted((own, ops) for _, own, ops in lines)
    a, b = ds - start, de - start
    before = rate(s, a - BEFORE, a)
    # A defrag shorter than two progress lines is measured over the lines around it.
    during = rate(s, a, max(b, a + 0.1))
    if not before or during is None:
        die("db_bench's progress does not cover the defrag")
    return dict(seconds=de - ds, moved=moved, read=r1[0] - r0[0], written=r1[1] - r0[1],
                during=during / before, shares=shares, reads=reads_ratio, stalled=stalled_ms)


def band(v):
    return f"{median(v):.3f} ({min(v):.3f}-{max(v):.3f}, n={len(v)})"


def main():
    if os.geteuid() != 0:
        die("needs root (scratch clones, blkio throttle, MOVE_EXT)")
    if len(sys.argv) < 3 or not all(os.access(p, os.X_OK) for p in sys.argv[1:3]):
        die(f"expected two fragkit binaries, got {sys.argv[1:3]}")
    rounds = sys.argv[3] if len(sys.argv) > 3 else "7"
    mode = sys.argv[4] if len(sys.argv) > 4 else "pick"
    if not rounds.isdigit() or int(rounds) < 1:
        die(f"ROUNDS: expected a number >= 1, got '{rounds}'")
    if mode not in ("pick", "bypass", "full"):
        die(f"MODE: expected pick, bypass or full, got '{mode}'")
    if not shutil.which("db_bench"):
        die("needs db_bench (apt-get install rocksdb-tools)")
    work = tempfile.mkdtemp(prefix="app-interference.")
    # Copies: a build during the run must not change the binaries being measured.
    builds = {}
    for name, path in (("A", sys.argv[1]), ("B", sys.argv[2])):
        builds[name] = os.path.join(work, f"fragkit-{name}")
        shutil.copy(path, builds[name])
    lab = os.environ.get("LAB_OUT")
    if not lab:
        lab = os.path.join(work, "lab")
        print("building the database: fragkit lab --app rocksdb --rounds 1 --keep", flush=True)
        subprocess.run([builds["A"], "lab", "--app", "rocksdb", "--rounds", "1", "--keep",
                        "--out", lab, "--format", "json"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        report = json.load(open(os.path.join(lab, "report.json")))
        keys, ceiling = report["keys"], report["io_limit"]
        base = json.load(open(os.path.join(lab, "data/scratch-base.json")))["mountpoint"]
    except (OSError, KeyError, ValueError) as e:
        die(f"LAB_OUT={lab}: not the --out of `fragkit lab --app rocksdb --keep` ({e})")
    profile = os.path.join(lab, "data/profile.json")
    if not os.path.ismount(base):
        die(f"{base}: the lab's base is not mounted (run the lab with --keep)")
    print(f"database {base}/db ({keys} keys), mode {mode}, {rounds} rounds")
    res = {"A": [], "B": []}
    for k in range(int(rounds)):
        for name in ("A", "B") if k % 2 == 0 else ("B", "A"):
            r = run(builds[name], mode, base, profile, keys, ceiling, 100 + k,
                    os.environ.get(f"PREFIX_{name}", "").split(), os.environ.get(f"ARGS_{name}", "").split())
            res[name].append(r)
            print(f"  round {k + 1} {name}: moved {r['moved'] / 2**20:.1f} MiB in {r['seconds']:.3f} s, "
                  f"device read {r['read'] / 2**20:.1f} MiB written {r['written'] / 2**20:.1f} MiB, "
                  f"during/before {r['during']:.3f}, reads {r['reads']:.3f}, stalled {r['stalled']:.0f} ms, samples: "
                  + " ".join(f"{k} {100 * v:.0f}%" for k, v in r["shares"].items()),
                  flush=True)
    for name in ("A", "B"):
        rs = res[name]
        how = " ".join([os.environ.get(f"PREFIX_{name}", ""), sys.argv[1] if name == "A" else sys.argv[2],
                        os.environ.get(f"ARGS_{name}", "")]).strip()
        print(f"{name} ({how}):")
        print(f"  db_bench during/before  {band([r['during'] for r in rs])}")
        print(f"  its reads during/before {band([r['reads'] for r in rs])}")
        print(f"  stalled ms (10 ms bins) {band([r['stalled'] for r in rs])}")
        for kind in Stacks.KINDS:
            print(f"  samples: {kind:<14} {band([r['shares'][kind] for r in rs])}")
        print(f"  defrag seconds          {band([r['seconds'] for r in rs])}")
        print(f"  moved / read / written  {median(r['moved'] for r in rs) / 2**20:.1f} / "
              f"{median(r['read'] for r in rs) / 2**20:.1f} / {median(r['written'] for r in rs) / 2**20:.1f} MiB")
    d = [b["during"] - a["during"] for a, b in zip(res["A"], res["B"])]
    print(f"B - A during/before per round: {band(d)}")
    d = [b["stalled"] - a["stalled"] for a, b in zip(res["A"], res["B"])]
    print(f"B - A stalled ms per round: {band(d)}")
    if not os.environ.get("LAB_OUT"):
        # The database this run built goes with it (its images directory too).
        subprocess.run([builds["A"], "scratch", "destroy", base], stdout=subprocess.DEVNULL)
        shutil.rmtree(os.path.dirname(os.path.dirname(base)), ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)


main()
