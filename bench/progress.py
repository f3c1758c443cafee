"""An application's progress lines as (seconds, operations done) points, sorted by time:
the operations done at an instant and the rate over a window, interpolated between lines
as the lab does (crates/fragkit-lab/src/lab/app.rs, `rate`); and the lab's device ceiling
on a clone's loop device."""

BLKIO = "/sys/fs/cgroup/blkio"


def throttle(dev, ceiling, on):
    """The lab's ceiling (its report's io_limit) on `dev` (MAJOR:MINOR), or off; none when
    it had none (cgroup v1 blkio throttle in the root group, as the lab sets it)."""
    if not ceiling:
        return
    for name, key in (("read_bps", "read_bytes_per_s"), ("write_bps", "write_bytes_per_s"),
                      ("read_iops", "read_iops"), ("write_iops", "write_iops")):
        with open(f"{BLKIO}/blkio.throttle.{name}_device", "w") as f:
            f.write(f"{dev} {(ceiling.get(key) or 0) if on else 0}\n")


def ops_at(points, t):
    """Operations done at `t`, or None outside the points."""
    for (t0, o0), (t1, o1) in zip(points, points[1:]):
        if t0 <= t <= t1:
            return o0 + (o1 - o0) * (t - t0) / (t1 - t0) if t1 > t0 else o1
    return None


def rate(points, a, b):
    """Operations per second over [a, b], or None where the points do not cover it."""
    x, y = ops_at(points, a), ops_at(points, b)
    return None if x is None or y is None or b <= a else (y - x) / (b - a)
