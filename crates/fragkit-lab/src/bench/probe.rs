//! FAST'24's device characterisation, as pure inference over measured points.
//!
//! Alignment probe: 4 KiB reads at random offsets that are multiples of an alignment a.
//! A flash device stripes its address space over D dies in units of g bytes (stripe
//! S = D·g). Offsets k·a land on die (k·a/g) mod D. When a is an odd multiple of the
//! step (and D is a power of two) the reads spread over every die: the baseline. When a
//! is p·odd for a power-of-two p ≥ 2g they reach only D·g/p dies, so throughput dips at
//! multiples of 2g, deeper at each doubling, down to one die at multiples of S, and no
//! further. Hence: g = (smallest dipping period)/2, S = the period where the floor starts.

use serde::Serialize;

use fragkit_core::stats::{median, slope};

/// Throughput of one alignment.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct AlignmentPoint {
    pub alignment: u64,
    pub iops: f64,
}

/// The level of one power-of-two period: alignments that are `period` × odd.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PeriodLevel {
    pub period: u64,
    pub points: usize,
    /// Median IOPS of those alignments over the baseline.
    pub relative: f64,
    pub dip: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct AlignmentInference {
    /// Median IOPS of alignments that are odd multiples of the step.
    pub baseline_iops: f64,
    /// Relative spread of the baseline (1.4826·MAD / median).
    pub noise: f64,
    /// A period's level must fall below 1 − threshold to count as a dip.
    pub threshold: f64,
    pub levels: Vec<PeriodLevel>,
    /// Die allocation granularity, if a dip structure was found.
    pub granularity: Option<u64>,
    /// Stripe size (all dies once), if the floor was reached within the probed range.
    pub stripe: Option<u64>,
    /// True when the floor is the last period probed: the stripe may be larger.
    pub stripe_lower_bound: bool,
    pub found: bool,
    /// The reasoning, one sentence per line.
    pub explanation: Vec<String>,
}

fn kib(n: u64) -> String {
    fragkit_core::units::short_size(n)
}

/// Infer g and S from points measured at multiples of `step`.
pub fn infer_alignment(points: &[AlignmentPoint], step: u64) -> AlignmentInference {
    let odd: Vec<f64> = points
        .iter()
        .filter(|p| p.alignment % step == 0 && (p.alignment / step) % 2 == 1)
        .map(|p| p.iops)
        .collect();
    let baseline = median(&odd);
    let dev: Vec<f64> = odd.iter().map(|v| (v - baseline).abs()).collect();
    let noise = if baseline > 0.0 {
        1.4826 * median(&dev) / baseline
    } else {
        0.0
    };
    // Real die collisions cost at least half the throughput once half the dies collide
    // twice over; more than 50% is never demanded, so noise cannot hide a real device.
    let threshold = (4.0 * noise).clamp(0.15, 0.5);
    let max_alignment = points.iter().map(|p| p.alignment).max().unwrap_or(0);
    let mut levels = Vec::new();
    let mut period = step * 2;
    while period <= max_alignment && baseline > 0.0 {
        let v: Vec<f64> = points
            .iter()
            .filter(|p| p.alignment % period == 0 && (p.alignment / period) % 2 == 1)
            .map(|p| p.iops)
            .collect();
        if !v.is_empty() {
            let relative = median(&v) / baseline;
            levels.push(PeriodLevel {
                period,
                points: v.len(),
                relative,
                dip: relative < 1.0 - threshold,
            });
        }
        period *= 2;
    }
    let mut explanation = vec![format!(
        "baseline: alignments that are odd multiples of {} spread reads over every die: median {:.0} IOPS over {} alignments, noise {:.1}%",
        kib(step),
        baseline,
        odd.len(),
        noise * 100.0
    )];
    explanation.push(format!(
        "a period p dips when the median of alignments p x odd falls below {:.0}% of the baseline (4x noise, kept within 50%..85%)",
        (1.0 - threshold) * 100.0
    ));
    for l in &levels {
        explanation.push(format!(
            "  alignments {} x odd ({} point{}): {:.0}% of baseline{}",
            kib(l.period),
            l.points,
            if l.points == 1 { "" } else { "s" },
            l.relative * 100.0,
            if l.dip { "  <- dip" } else { "" }
        ));
    }
    if noise > 0.25 {
        explanation.push(format!(
            "the baseline varies by {:.0}%: the machine is busy or --count is small; small dips cannot be told from noise",
            noise * 100.0
        ));
    }
    let first_dip = levels.iter().position(|l| l.dip);
    let mut out = AlignmentInference {
        baseline_iops: baseline,
        noise,
        threshold,
        levels: levels.clone(),
        granularity: None,
        stripe: None,
        stripe_lower_bound: false,
        found: false,
        explanation,
    };
    let Some(first) = first_dip else {
        out.explanation.push(format!(
            "no periodic structure found: no alignment period up to {} dips below the threshold; the target shows no die striping (a loop device, RAM-backed or cached target has none), so g and S are not inferred",
            kib(max_alignment)
        ));
        return out;
    };
    // Every period from the first dip on must stay a dip, or the "structure" is noise.
    if levels[first..].iter().any(|l| !l.dip) {
        out.explanation.push(
            "no periodic structure found: dips are not consistent (a longer period does not dip after a shorter one did), which die striping cannot produce; g and S are not inferred".into(),
        );
        return out;
    }
    // One or two low points at the longest periods are what noise looks like too.
    let dipping_points: usize = levels[first..].iter().map(|l| l.points).sum();
    if dipping_points < 3 {
        out.explanation.push(format!(
            "no periodic structure found: only {dipping_points} alignment(s) at the longest periods dip, too few to tell a stripe from noise (probe a larger --max to see more multiples)"
        ));
        return out;
    }
    let floor = levels[first..]
        .iter()
        .map(|l| l.relative)
        .fold(f64::INFINITY, f64::min);
    // The stripe is where the floor begins: every longer period stays within noise of it.
    // Each halving of the dies reached halves throughput, so "at the floor" is relative.
    let tol = (4.0 * noise).max(0.3);
    let s_idx = (first..levels.len())
        .find(|&i| {
            levels[i..]
                .iter()
                .all(|l| l.relative <= floor * (1.0 + tol))
        })
        .unwrap_or(levels.len() - 1);
    let g = levels[first].period / 2;
    let s = levels[s_idx].period;
    out.found = true;
    out.granularity = Some(g);
    out.stripe = Some(s);
    out.stripe_lower_bound = s_idx == levels.len() - 1;
    out.explanation.push(format!(
        "first dip at {} x odd: half the dies collide there, so the die allocation granularity g = {}",
        kib(levels[first].period),
        kib(g)
    ));
    out.explanation.push(format!(
        "the floor ({:.0}% of baseline) starts at {}: every read on one die, so the stripe S = {}{}; about {} dies",
        floor * 100.0,
        kib(s),
        kib(s),
        if out.stripe_lower_bound {
            " or more (the floor is the last period probed)"
        } else {
            ""
        },
        s / g.max(1)
    ));
    out
}

/// Interface probe: time of one run per number of requests, at one queue depth.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct InterfacePoint {
    pub requests: u64,
    pub seconds: f64,
}

/// Per-request overhead in seconds: the least-squares slope of time over request count.
pub fn per_request_overhead(points: &[InterfacePoint]) -> f64 {
    let x: Vec<f64> = points.iter().map(|p| p.requests as f64).collect();
    let y: Vec<f64> = points.iter().map(|p| p.seconds).collect();
    slope(&x, &y)
}

/// Time with the most requests over time with the fewest.
pub fn slowdown(points: &[InterfacePoint]) -> f64 {
    let lo = points.iter().min_by_key(|p| p.requests);
    let hi = points.iter().max_by_key(|p| p.requests);
    match (lo, hi) {
        (Some(l), Some(h)) if l.seconds > 0.0 => h.seconds / l.seconds,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IOPS of a device with `dies` dies of granularity g: proportional to dies reached.
    fn model(g: u64, dies: u64, step: u64, max: u64, jitter: f64) -> Vec<AlignmentPoint> {
        let mut out = Vec::new();
        let mut a = step;
        let mut k = 0u64;
        while a <= max {
            let reached = if !a.is_multiple_of(g) {
                dies
            } else {
                let j = a / g;
                dies / gcd(j, dies)
            };
            // Deterministic ±jitter wobble.
            k = k
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let wobble = 1.0 + jitter * (((k >> 33) % 2001) as f64 / 1000.0 - 1.0);
            out.push(AlignmentPoint {
                alignment: a,
                iops: 10_000.0 * reached as f64 * wobble,
            });
            a += step;
        }
        out
    }

    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }

    #[test]
    fn finds_nvme_a_structure() {
        // NVMe-A in FAST'24: g = 32K, S = 1M (32 dies); probe up to 2M to see the floor.
        let pts = model(32 << 10, 32, 4 << 10, 2 << 20, 0.03);
        let inf = infer_alignment(&pts, 4 << 10);
        assert!(inf.found, "{:#?}", inf.explanation);
        assert_eq!(inf.granularity, Some(32 << 10));
        assert_eq!(inf.stripe, Some(1 << 20));
        assert!(!inf.stripe_lower_bound);
    }

    #[test]
    fn finds_sata_a_structure() {
        let pts = model(4 << 10, 8, 4 << 10, 1 << 20, 0.02);
        let inf = infer_alignment(&pts, 4 << 10);
        assert_eq!(inf.granularity, Some(4 << 10));
        assert_eq!(inf.stripe, Some(32 << 10));
    }

    #[test]
    fn flat_target_has_no_structure() {
        let pts = model(4 << 10, 1, 4 << 10, 1 << 20, 0.05);
        let inf = infer_alignment(&pts, 4 << 10);
        assert!(!inf.found);
        assert_eq!(inf.granularity, None);
        assert!(inf
            .explanation
            .last()
            .unwrap()
            .contains("no periodic structure found"));
    }

    #[test]
    fn overhead_is_the_slope() {
        let pts: Vec<InterfacePoint> = [1u64, 2, 4, 8]
            .iter()
            .map(|&n| InterfacePoint {
                requests: n,
                seconds: 0.01 + n as f64 * 20e-6,
            })
            .collect();
        assert!((per_request_overhead(&pts) - 20e-6).abs() < 1e-12);
        assert!((slowdown(&pts) - (0.01 + 160e-6) / (0.01 + 20e-6)).abs() < 1e-12);
    }
}
