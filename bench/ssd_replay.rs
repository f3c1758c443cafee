//! Replay speed of the SSD model (goal: ≥ 1M requests/s on one core, in write order and
//! with the approach).
//!
//! `cargo bench --bench ssd_replay` (or `cargo run --release --bench ssd_replay -- N`).
//! Builds a seeded trace shaped like the FAST'24 workloads (a write phase of 4–256 KiB
//! writes with flushes, then 4 KiB – 1 MiB reads, 40% of requests), replays it with the
//! `fast24` model (write order, then the approach) in alternating pairs with a trivial loop that only sums the requests'
//! bytes per op, n = 7, and prints the median, min and max of each and of the ratio.
//! Times are this thread's CPU time (one core), so a shared machine slows them less than
//! wall time would; caches are still shared: say so when quoting figures.

use std::hint::black_box;

use fragkit::ssd::{Op, Params, Placement, Request, Ssd};

fn trace(n: usize) -> Vec<Request> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = 0u64;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let r = next();
        let (op, bytes) = match i % 10 {
            0 => (Op::Flush, 0),
            1..=5 => (Op::Write, 4096 << (r % 7)),
            _ => (Op::Read, 4096 << (r % 9)),
        };
        let sector = (next() % (8 << 30)) / 4096 * 8;
        t += 1000 + r % 20_000;
        out.push(Request {
            issue_ns: t,
            complete_ns: t + 5_000 + r % 100_000,
            sector,
            bytes,
            op,
            inode: Some(r % 64),
            offset: Some(sector * 512 % (64 << 20)),
        });
    }
    out
}

fn trivial(reqs: &[Request]) -> u64 {
    let mut sums = [0u64; 4];
    for r in reqs {
        sums[r.op as usize] += black_box(r.bytes);
    }
    sums.iter().sum()
}

/// CPU time of this thread in seconds: what one core spends, whoever else shares the machine.
fn cpu_now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let reqs = trace(n);
    for (placement, name) in [
        (Placement::WriteOrder, "write order"),
        (Placement::Approach, "approach"),
    ] {
        measure(&reqs, placement, name);
    }
}

/// Alternate the model and the trivial loop over `reqs`, n = 7, and print the figures.
fn measure(reqs: &[Request], placement: Placement, name: &str) {
    let n = reqs.len();
    let p = Params::fast24();
    let mut model = Vec::new();
    let mut base = Vec::new();
    let mut ratio = Vec::new();
    let mut check = None;
    for _ in 0..7 {
        let t0 = cpu_now();
        let r = Ssd::replay(&p, placement, black_box(reqs)).expect("valid preset");
        let m = cpu_now() - t0;
        let t1 = cpu_now();
        let s = trivial(black_box(reqs));
        let b = cpu_now() - t1;
        // Same work: the model saw every request the trivial loop summed.
        assert_eq!(r.reads + r.writes + r.flushes + r.discards, n as u64);
        assert_eq!(r.read_bytes + r.write_bytes, s);
        // And the same answer each time.
        let key = (r.read_time_ns, r.collisions);
        assert_eq!(*check.get_or_insert(key), key);
        model.push(n as f64 / m);
        base.push(n as f64 / b);
        ratio.push(m / b);
    }
    let lo_hi = |v: &[f64]| {
        (
            v.iter().cloned().fold(f64::MAX, f64::min),
            v.iter().cloned().fold(0.0, f64::max),
        )
    };
    let (mlo, mhi) = lo_hi(&model);
    let (rlo, rhi) = lo_hi(&ratio);
    println!(
        "ssd model (fast24, {name}): {:.2} M requests per CPU-second (min {:.2}, max {:.2}, n=7, {n} requests)",
        median(&mut model) / 1e6,
        mlo / 1e6,
        mhi / 1e6
    );
    println!(
        "  trivial replay loop: {:.1} M requests/s; model time / trivial loop time: {:.0}x (min {rlo:.0}, max {rhi:.0})",
        median(&mut base) / 1e6,
        median(&mut ratio)
    );
}
