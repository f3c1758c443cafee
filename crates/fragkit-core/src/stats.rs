//! Statistics over iterations and parameters: mean, trimmed mean, CoV, percentiles, and
//! FragPicker's CC and NLRS (docs/design.md definitions).

use serde::Serialize;

pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Mean without the single highest and lowest value (FAST'24's trimmed mean over ten
/// runs); the plain mean when fewer than three values.
pub fn trimmed_mean(v: &[f64]) -> f64 {
    if v.len() < 3 {
        return mean(v);
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    mean(&s[1..s.len() - 1])
}

/// Sample standard deviation (n − 1); 0 for fewer than two values.
pub(crate) fn std_dev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// Coefficient of variation: standard deviation / mean (0 when the mean is 0).
pub fn cov(v: &[f64]) -> f64 {
    let m = mean(v);
    if m == 0.0 {
        0.0
    } else {
        std_dev(v) / m
    }
}

/// The middle value (the mean of the two middle values for an even count); 0 when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Nearest-rank percentile of an ascending slice (p in 0..=100).
pub(crate) fn percentile_sorted<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// CC: Pearson correlation of x and y (0 when either does not vary).
pub fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    if n < 2 {
        return 0.0;
    }
    let (mx, my) = (mean(&x[..n]), mean(&y[..n]));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let (dx, dy) = (x[i] - mx, y[i] - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if sxx == 0.0 || syy == 0.0 {
        0.0
    } else {
        sxy / (sxx * syy).sqrt()
    }
}

/// Least-squares slope of y on x.
pub fn slope(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    if n < 2 {
        return 0.0;
    }
    let (mx, my) = (mean(&x[..n]), mean(&y[..n]));
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for i in 0..n {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx).powi(2);
    }
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

/// NLRS: the least-squares slope after dividing x and y by their maxima.
pub fn nlrs(x: &[f64], y: &[f64]) -> f64 {
    let xmax = x.iter().cloned().fold(f64::MIN, f64::max);
    let ymax = y.iter().cloned().fold(f64::MIN, f64::max);
    if xmax <= 0.0 || ymax <= 0.0 {
        return 0.0;
    }
    let xn: Vec<f64> = x.iter().map(|v| v / xmax).collect();
    let yn: Vec<f64> = y.iter().map(|v| v / ymax).collect();
    slope(&xn, &yn)
}

/// One quantity over iterations or rounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Summary {
    pub mean: f64,
    pub trimmed_mean: f64,
    pub median: f64,
    pub cov: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Summary {
    /// All zero when `v` is empty.
    pub fn of(v: &[f64]) -> Summary {
        if v.is_empty() {
            return Summary::default();
        }
        Summary {
            mean: mean(v),
            trimmed_mean: trimmed_mean(v),
            median: median(v),
            cov: cov(v),
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            n: v.len(),
        }
    }

    /// The finite values' summary; none when there are none (a round without the
    /// figure, a ratio over zero).
    pub fn of_finite(v: &[f64]) -> Option<Summary> {
        let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        (!v.is_empty()).then(|| Summary::of(&v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        let v = [10.0, 12.0, 11.0, 100.0, 1.0];
        assert_eq!(mean(&v), 26.8);
        assert_eq!(trimmed_mean(&v), 11.0);
        assert!((std_dev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) - 2.138).abs() < 1e-3);
        assert_eq!(cov(&[5.0, 5.0]), 0.0);
        let sorted = [1u64, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        assert_eq!(percentile_sorted(&sorted, 50.0), 5);
        assert_eq!(percentile_sorted(&sorted, 99.0), 10);
        assert_eq!(percentile_sorted(&sorted, 0.0), 1);
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]), 1.0);
        assert!((pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        // y = 2x over x in 1..4: normalised both by max → slope 1.
        assert!((nlrs(&[1.0, 2.0, 4.0], &[2.0, 4.0, 8.0]) - 1.0).abs() < 1e-12);
    }

    proptest! {
        #[test]
        fn trimmed_mean_within_range(v in proptest::collection::vec(0.0f64..1e6, 1..40)) {
            let t = trimmed_mean(&v);
            let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = v.iter().cloned().fold(0.0, f64::max);
            prop_assert!(t >= lo - 1e-6 && t <= hi + 1e-6);
            prop_assert!(cov(&v) >= 0.0);
        }

        #[test]
        fn pearson_bounded(x in proptest::collection::vec(-1e3f64..1e3, 2..30),
                           y in proptest::collection::vec(-1e3f64..1e3, 2..30)) {
            let r = pearson(&x, &y);
            prop_assert!((-1.0 - 1e-9..=1.0 + 1e-9).contains(&r));
        }
    }
}
