"""An application's progress lines as (seconds, operations done) points, sorted by time:
the operations done at an instant and the rate over a window, interpolated between lines
as the lab does (crates/fragkit-lab/src/lab/app.rs, `rate`)."""


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
