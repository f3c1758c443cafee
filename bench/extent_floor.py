#!/usr/bin/env python3
"""The reads a defrag run's moved ranges force on the device, as a fio iolog (issue 15 item 4's
second floor: the physical floor for moving fragmented data is reading the SAME source extents,
one request per extent piece, plus the sequential write of those bytes).

Usage: extent_floor.py EXTENTS REPORT MOUNTPOINT DEVICE IOLOG
  EXTENTS: "# mount DIR" then `filefrag -v` of every file under DIR, taken on the aged image
           before any run (every run starts from that image)
  REPORT:  the defrag run's --format json report (files[].ranges[] with status "moved"),
           its paths under MOUNTPOINT; files are matched by their path relative to the mount
Writes IOLOG (fio iolog version 2: one read per piece of an extent that a moved range covers,
in file order, as readahead issues them; a piece never exceeds the device's max_sectors_kb,
which the block layer would split anyway) and prints "BYTES READS".
"""
import json
import re
import sys


def extents(path):
    """{relative path: (block size, [(logical block, physical block, blocks)])}"""
    out, cur, base = {}, None, None
    for line in open(path):
        if line.startswith("# mount "):
            base = line[len("# mount "):].strip().rstrip("/") + "/"
            continue
        m = re.match(r"File size of (.*) is \d+ \((\d+) blocks? of (\d+) bytes\)", line)
        if m:
            rel = m.group(1)[len(base):] if base and m.group(1).startswith(base) else m.group(1)
            cur = out.setdefault(rel, (int(m.group(3)), []))
            continue
        m = re.match(r"\s*\d+:\s*(\d+)\.\.\s*\d+:\s*(\d+)\.\.\s*\d+:\s*(\d+):", line)
        if m and cur is not None:
            cur[1].append((int(m.group(1)), int(m.group(2)), int(m.group(3))))
    return out


def main():
    ext_path, report, mnt, dev, iolog = sys.argv[1:6]
    mnt = mnt.rstrip("/") + "/"
    ext = extents(ext_path)
    cap = int(open(f"/sys/block/{dev.split('/')[-1]}/queue/max_sectors_kb").read()) * 1024
    doc = json.load(open(report))
    reads = []
    for f in doc["files"]:
        rel = f["path"][len(mnt):] if f["path"].startswith(mnt) else f["path"]
        if rel not in ext:
            sys.exit(f"extent_floor.py: {rel}: not in {ext_path}")
        bs, exts = ext[rel]
        for r in f.get("ranges", []):
            if r["status"] != "moved":
                continue
            lo, hi = r["offset"], r["offset"] + r["length"]
            for lblk, pblk, n in exts:
                a, b = max(lo, lblk * bs), min(hi, (lblk + n) * bs)
                if a >= b:
                    continue
                phys = pblk * bs + (a - lblk * bs)
                while a < b:
                    k = min(b - a, cap)
                    reads.append((phys, k))
                    phys += k
                    a += k
    with open(iolog, "w") as w:
        w.write(f"fio version 2 iolog\n{dev} add\n{dev} open\n")
        for off, n in reads:
            w.write(f"{dev} read {off} {n}\n")
        w.write(f"{dev} close\n")
    print(sum(n for _, n in reads), len(reads))


main()
