#!/usr/bin/env python3
"""fragkit bench ior against the real IOR on the same jobs, paired.

For every job (file per process or one shared file, O_DIRECT, transfer 1 MiB and 4 MiB,
1, 2 and 4 ranks under mpirun) the two run alternately, A B, B A, ... ROUNDS times each,
on one scratch ext4 per backing directory (a disk-backed and a RAM-backed image by
default). Each run writes then reads BLOCK per rank once (-i 1) with reads from another
rank's data (IOR -C, fragkit's default). Both outputs are read by the same parser, with
the rules tools that read IOR's output follow (the table after its title, whitespace-
separated names, rows as wide as the header); the script stops if the two summaries'
columns differ. Per job it prints the median fragkit/IOR ratio of Mean(MiB) for write and
read with min-max and n, and the device's bytes read and written around each run (from
/sys/block/DEV/stat), fragkit's and IOR's medians, as proof both did the same work. Last,
the short-read case: files of 8 MiB kept, then a 16 MiB read; both must exit non-zero.

IOR: $IOR (an ior binary), else $IOR_SRC (IOR's source tree, or a bare git directory of
it) built once into a temporary directory with its own bootstrap/configure/make; with
neither the script says so and exits 0. Nothing of IOR enters fragkit.

Usage (root): bench/ior-compare.py [ROUNDS] [BLOCK] [BACKING_DIR...]
  e.g. IOR_SRC=/work/.mirror/hpc+ior/repo bench/ior-compare.py 7 64M /var/tmp /dev/shm
Timing runs should hold the bench lock: flock /work/bench.lock nice -n -15 ...
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NAME = "bench/ior-compare.py"


def die(msg, code=2):
    print(f"{NAME}: {msg}", file=sys.stderr)
    sys.exit(code)


def parse_table(text, title):
    """The table after the line starting with `title`: header names, then rows as wide."""
    lines = text.splitlines()
    try:
        i = next(k for k, l in enumerate(lines) if l.startswith(title))
    except StopIteration:
        return [], []
    rest = [l for l in lines[i + 1 :]]
    while rest and not rest[0].strip():
        rest.pop(0)
    if not rest:
        return [], []
    header = rest[0].split()
    rows = []
    for l in rest[1:]:
        v = l.split()
        if v and v[0].startswith("---"):
            continue
        if len(v) != len(header):
            break
        rows.append(dict(zip(header, v)))
    return header, rows


def find_ior(work):
    ior = os.environ.get("IOR")
    if ior:
        if not os.access(ior, os.X_OK):
            die(f"IOR={ior}: not an executable")
        return ior
    src = os.environ.get("IOR_SRC")
    if not src:
        return None
    tree = os.path.join(work, "ior-src")
    os.mkdir(tree)
    if os.path.isfile(os.path.join(src, "bootstrap")):
        shutil.copytree(src, tree, dirs_exist_ok=True)
    elif os.path.isfile(os.path.join(src, "HEAD")):
        archive = subprocess.run(
            ["git", f"--git-dir={src}", "archive", "HEAD"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
    else:
        die(f"IOR_SRC={src}: expected IOR's source tree (with ./bootstrap) or its git directory")
    rev = subprocess.run(
        ["git", f"--git-dir={src}", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip() if os.path.isfile(os.path.join(src, "HEAD")) else "tree"
    print(f"building IOR ({src} {rev}) in {tree} ...", file=sys.stderr)
    log = open(os.path.join(work, "ior-build.log"), "w")
    for step in (["./bootstrap"], ["./configure"], ["make", "-j2"]):
        if subprocess.run(step, cwd=tree, stdout=log, stderr=log).returncode != 0:
            die(f"building IOR: {' '.join(step)} failed; see {log.name}")
    return os.path.join(tree, "src", "ior")


def dev_bytes(dev):
    f = open(f"/sys/block/{dev}/stat").read().split()
    return int(f[2]) * 512, int(f[6]) * 512


def mpirun(np, argv):
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(np)] + argv
    return subprocess.run(cmd, capture_output=True, text=True)


def band(values, d=3):
    v = sorted(values)
    return f"{statistics.median(v):.{d}f} ({v[0]:.{d}f}–{v[-1]:.{d}f}, n={len(v)})"


def main():
    args = sys.argv[1:]
    rounds = int(args[0]) if args else 7
    block = args[1] if len(args) > 1 else "64M"
    backings = args[2:] or ["/var/tmp", "/dev/shm"]
    if rounds < 1:
        die(f"ROUNDS {rounds}: expected at least 1")
    if os.geteuid() != 0:
        die("needs root (scratch file systems on loop devices)", 1)
    if not shutil.which("mpirun"):
        die("mpirun not found (scripts/install-deps installs OpenMPI)", 1)
    work = tempfile.mkdtemp(prefix="ior-compare.")
    ior = find_ior(work)
    if ior is None:
        print(f"{NAME}: skipped: no IOR (set IOR=path/to/ior or IOR_SRC=IOR's source or git dir)")
        return 0
    subprocess.run(["cargo", "build", "--release", "-q", "--features", "mpi"], cwd=ROOT, check=True)
    fk = os.path.join(ROOT, "target", "release", "fragkit")
    jobs = [(lay, x, np) for lay in ("fpp", "shared") for x in ("1M", "4M") for np in (1, 2, 4)]
    print(f"IOR {ior}; fragkit {fk}; {rounds} pairs per job, block {block} per rank, -i 1")
    print("job                  | fragkit/IOR write        | fragkit/IOR read         "
          "| device MiB read  fk / IOR | written fk / IOR")
    for backing in backings:
        sdir = os.path.join(backing, f"ior-compare.{os.getpid()}")
        made = subprocess.run(
            [fk, "scratch", "create", "--size", "1G", "--dir", sdir, "--format", "json"],
            capture_output=True, text=True,
        )
        if made.returncode != 0:
            die(f"scratch on {backing}: {made.stderr.strip()}")
        import json

        info = json.loads(made.stdout)
        mnt, dev = info["mountpoint"], os.path.basename(info["loop_device"])
        print(f"-- ext4 on {dev}, image in {backing}")
        try:
            for lay, x, np in jobs:
                d = os.path.join(mnt, "ior")
                os.makedirs(d, exist_ok=True)
                ratio = {"write": [], "read": []}
                dev_io = {"fragkit": [], "ior": []}
                for k in range(rounds):
                    order = ("fragkit", "ior") if k % 2 == 0 else ("ior", "fragkit")
                    mean = {}
                    for who in order:
                        if who == "fragkit":
                            argv = [fk, "bench", "ior", d, "--xfer", x, "--block", block,
                                    "--iterations", "1", "--direct"]
                            argv.append("--file-per-process" if lay == "fpp" else "--shared-file")
                        else:
                            argv = [ior, "-w", "-r", "-C", "-i", "1", "-t", x.lower(), "-b",
                                    block.lower(), "--posix.odirect", "-o", os.path.join(d, "ior")]
                            if lay == "fpp":
                                argv.append("-F")
                        subprocess.run(["sync"])
                        r0, w0 = dev_bytes(dev)
                        out = mpirun(np, argv)
                        r1, w1 = dev_bytes(dev)
                        if out.returncode != 0:
                            die(f"{who} {lay} {x} np {np}: exit {out.returncode}: {out.stderr.strip()[-400:]}")
                        header, rows = parse_table(out.stdout, "Summary of all tests:")
                        mean[who] = {r["Operation"]: float(r["Mean(MiB)"]) for r in rows}
                        mean[who + "_header"] = header
                        dev_io[who].append((r1 - r0, w1 - w0))
                        for f in os.listdir(d):
                            os.unlink(os.path.join(d, f))
                    if mean["fragkit_header"] != mean["ior_header"]:
                        die(f"the summaries' columns differ:\n{mean['fragkit_header']}\n{mean['ior_header']}")
                    for op in ("write", "read"):
                        if op not in mean["fragkit"] or op not in mean["ior"]:
                            die(f"{lay} {x} np {np}: no {op} row in a summary")
                        ratio[op].append(mean["fragkit"][op] / mean["ior"][op])
                mib = lambda v: statistics.median(v) / (1 << 20)
                fr = mib([a for a, _ in dev_io["fragkit"]])
                ir = mib([a for a, _ in dev_io["ior"]])
                fw = mib([b for _, b in dev_io["fragkit"]])
                iw = mib([b for _, b in dev_io["ior"]])
                print(f"{lay:6} xfer {x:2} np {np}    | {band(ratio['write']):24} | "
                      f"{band(ratio['read']):24} | {fr:8.1f} / {ir:8.1f}       | {fw:8.1f} / {iw:8.1f}")
            # The short read: 8 MiB files kept, then a 16 MiB read of them.
            d = os.path.join(mnt, "short")
            os.makedirs(d, exist_ok=True)
            w = mpirun(2, [fk, "bench", "ior", d, "--block", "8M", "--write", "--keep",
                           "--iterations", "1", "--direct", "--file-per-process"])
            fk_short = mpirun(2, [fk, "bench", "ior", d, "--block", "16M", "--read",
                                  "--iterations", "1", "--direct", "--file-per-process"])
            for f in os.listdir(d):
                os.unlink(os.path.join(d, f))
            mpirun(2, [ior, "-w", "-k", "-i", "1", "-t", "1m", "-b", "8m", "-F",
                       "--posix.odirect", "-o", os.path.join(d, "ior")])
            ior_short = mpirun(2, [ior, "-r", "-i", "1", "-t", "1m", "-b", "16m", "-F",
                                   "--posix.odirect", "-o", os.path.join(d, "ior")])
            def last(o):
                lines = (o.stderr + o.stdout).splitlines()
                said = [l for l in lines if "returned" in l or "ERROR" in l or "EOF" in l]
                return (said or lines[-1:] or [""])[:1]
            print(f"short read (8 MiB files, 16 MiB read, 2 ranks): fragkit exit {fk_short.returncode}"
                  f" ({last(fk_short)[0][:120]}); IOR exit {ior_short.returncode}"
                  f" ({last(ior_short)[0][:120]}); the write before it: exit {w.returncode}")
            if fk_short.returncode == 0:
                die("fragkit's short read exited 0", 1)
        finally:
            subprocess.run([fk, "scratch", "destroy", mnt], capture_output=True)
            shutil.rmtree(sdir, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
