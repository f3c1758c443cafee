#!/usr/bin/env python3
"""Fragment FILE on a scratch file system by fill-and-punch (bench helper).

Fills nearly all free space with one preallocated filler, fills the rest with FRAG-sized
files, deletes every other one, writes FILE with O_DIRECT in FRAG chunks (it must take the
holes), then deletes the fillers so contiguous free space exists again.
usage: fragment.py MOUNTPOINT FILE SIZE FRAG   (sizes in bytes)
"""
import ctypes, mmap, os, shutil, sys, time

mp, path, size, frag = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
fill = os.path.join(mp, ".fillers")
os.makedirs(fill)
st = os.statvfs(mp)
free = st.f_bfree * st.f_frsize
share = 2 * size + (8 << 20)
big = os.open(os.path.join(fill, "big"), os.O_RDWR | os.O_CREAT)
assert libc.fallocate(big, 0, 0, free - share) == 0, "fallocate filler"
os.close(big)
n = 0
while True:
    p = os.path.join(fill, f"s{n}")
    try:
        fd = os.open(p, os.O_RDWR | os.O_CREAT)
    except OSError:
        break
    ok = libc.fallocate(fd, 0, 0, frag) == 0
    os.close(fd)
    if not ok:
        os.unlink(p)
        break
    n += 1
os.sync()
for i in range(0, n, 2):
    os.unlink(os.path.join(fill, f"s{i}"))
os.sync()
buf = mmap.mmap(-1, frag)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
for off in range(0, size, frag):
    buf.seek(0)
    buf.write(os.urandom(frag))
    os.pwrite(fd, buf, off)
    os.fdatasync(fd)
os.close(fd)
shutil.rmtree(fill)
os.sync()
