//! The lab's arithmetic: from the steps' typed results to the report's figures. Nothing
//! here runs a command or needs root, so all of it is unit-tested.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

use super::child::{Bench, Defrag, Scan};
use super::{
    DefragFigures, DiskFigures, FileRow, Headline, LabSpec, LayoutFigures, MethodResult,
    ModeledFigures, WorkloadFigures,
};
use fragkit_core::scratch::FsType;
use fragkit_core::stats::median;

/// What a lab run will do, decided before anything runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The file system's own defragmenter and its leading arguments, when asked for and
    /// installed.
    pub tool: Option<(&'static str, Vec<String>)>,
    /// Defragmented states: pick, full and the tool when there is one.
    pub methods_after: u64,
    /// Steps the progress bar counts.
    pub steps: u64,
}

pub fn plan(spec: &LabSpec, installed: impl Fn(&str) -> bool) -> Plan {
    let tool = if spec.baseline {
        baseline_tool(spec.fs).filter(|(prog, _)| installed(prog))
    } else {
        None
    };
    let methods_after = 2 + tool.is_some() as u64;
    // create, paf, synthetic, free, scan, map, trace; per method: clone, defrag, scan,
    // map; the workload rounds.
    Plan {
        steps: 8 - u64::from(spec.paf == NO_PAF) + methods_after * 4 + spec.iterations as u64,
        tool,
        methods_after,
    }
}

/// `--paf none`: no PaF aging; the files grow in free space with room for them whole (the
/// scenario where conventional defragmenters have somewhere to put a file).
pub(crate) const NO_PAF: &str = "none";

/// The file system's own defragmenter, the conventional baseline.
pub(crate) fn baseline_tool(fs: FsType) -> Option<(&'static str, Vec<String>)> {
    match fs {
        // -v: only then does e4defrag say per file what it did ("extents: 33 -> 33" for a
        // file it left alone); without it a declined file reads "100% [ OK ]" like a moved one.
        FsType::Ext4 => Some(("e4defrag", vec!["-v".into()])),
        FsType::Xfs => Some(("xfs_fsr", vec!["-v".into()])),
        FsType::Btrfs => Some((
            "btrfs",
            vec!["filesystem".into(), "defragment".into(), "-f".into()],
        )),
        FsType::F2fs => None,
    }
}

/// A scan's summary at the lab's one request size.
pub(crate) fn layout_figures(step: &str, scan: &Scan) -> Result<LayoutFigures> {
    let sm = &scan.summary;
    let rq = sm
        .requests
        .first()
        .ok_or_else(|| anyhow!("{step}: no request counts in its summary"))?;
    Ok(LayoutFigures {
        files: sm.files,
        bytes: sm.bytes,
        fragments: sm.fragments,
        extents: sm.extents,
        split: rq.split,
        ideal: rq.ideal,
        extra: rq.extra,
        move_bytes: rq.move_bytes,
        layout_score: sm.layout_score,
    })
}

/// One state's figures from the rounds: per round, its jobs (one per file, run one after
/// another) add up to one pass of the workload; MB/s is that pass's bytes over its time.
pub(crate) fn workload_figures(rounds: &[Bench], mp: &Path) -> Result<WorkloadFigures> {
    let work = mp.join("work");
    let mut reads = Vec::new();
    let mut reads_each = Vec::new();
    let mut mapping = Vec::new();
    let mut mbps = Vec::new();
    let (mut bytes, mut requests) = (0, 0);
    let mut predicted: Option<u64> = None;
    let mut modeled: Option<ModeledFigures> = None;
    let mut modeled_disk: Option<DiskFigures> = None;
    for (k, round) in rounds.iter().enumerate() {
        let jobs: Vec<_> = round
            .jobs
            .iter()
            .filter(|j| j.path.starts_with(&work))
            .collect();
        if jobs.is_empty() {
            bail!("bench read: no job read {}", work.display());
        }
        let (mut b, mut secs, mut d, mut q, mut m) = (0u64, 0f64, 0u64, 0u64, 0u64);
        for j in &jobs {
            let it = j
                .iterations
                .first()
                .ok_or_else(|| anyhow!("bench read: {}: no iteration", j.path.display()))?;
            b += it.bytes;
            q += it.requests;
            secs += it.seconds;
            d += it.device.as_ref().map_or(0, |d| d.reads);
            m += it.mapping.as_ref().map_or(0, |d| d.reads);
        }
        mapping.push(m as f64);
        bytes = b;
        requests = q;
        reads.push(d as f64);
        reads_each.push(d);
        mbps.push(if secs > 0.0 {
            b as f64 / secs / 1e6
        } else {
            0.0
        });
        let m = modeled_pass(&jobs);
        let disk = disk_pass(&jobs);
        if k == 0 {
            predicted = jobs
                .iter()
                .map(|j| j.layout.as_ref().map(|l| l.split))
                .sum();
            modeled = m;
            modeled_disk = disk;
        } else if m != modeled || disk != modeled_disk {
            // Same layout, same requests: anything else is a bug in the model.
            bail!(
                "bench read --model: round {} gave other modeled figures for {} than round 1",
                k + 1,
                work.display()
            );
        }
    }
    Ok(WorkloadFigures {
        iterations: rounds.len(),
        bytes,
        requests,
        device_reads: fragkit_core::stats::mean(&reads),
        device_reads_each: reads_each,
        predicted_device_reads: predicted,
        mapping_reads: fragkit_core::stats::mean(&mapping),
        mb_per_s: fragkit_core::stats::trimmed_mean(&mbps),
        mb_per_s_cov: fragkit_core::stats::cov(&mbps),
        mb_per_s_each: mbps,
        modeled,
        modeled_disk,
    })
}

/// The disk model's figures of one pass (its jobs one after another: times and counts
/// add up); None when a job was not priced on the disk.
fn disk_pass(jobs: &[&super::child::BenchJob]) -> Option<DiskFigures> {
    let mut f = DiskFigures::default();
    for j in jobs {
        let m = j.model_hdd.as_ref()?;
        f.model.clone_from(&m.model);
        f.mapping.clone_from(&m.mapping);
        f.op.clone_from(&m.op);
        f.device_requests += m.device_requests;
        f.bytes += m.bytes;
        f.time_ns += m.time_ns;
        f.seeks += m.seeks;
        f.seek_ns += m.seek_ns;
        f.rotation_ns += m.rotation_ns;
        f.transfer_ns += m.transfer_ns;
        f.lookahead_reads += m.lookahead_reads;
    }
    f.mb_s = fragkit_core::ssd::model::mb_s(f.bytes, f.time_ns);
    Some(f)
}

/// The modeled figures of one pass (its jobs run one after another: times add up); None
/// when a job was not modeled.
fn modeled_pass(jobs: &[&super::child::BenchJob]) -> Option<ModeledFigures> {
    let mut f = ModeledFigures::default();
    for j in jobs {
        let m = j.model.as_ref()?;
        f.model.clone_from(&m.model);
        f.mapping.clone_from(&m.mapping);
        f.device_reads += m.device_reads;
        f.read_bytes += m.read_bytes;
        f.read_time_ns += m.read_time_ns;
        f.collisions += m.collisions;
        f.collided_requests += m.collided_requests;
        f.page_reads += m.page_reads;
        f.queued += m.queued;
        f.waited_same_request += m.waited_same_request;
        // The jobs run one after another: their busiest dies' times add up.
        f.busiest_die_ns += m.busiest_die_ns;
        f.busiest_channel_ns += m.busiest_channel_ns;
    }
    f.mb_s = fragkit_core::ssd::model::mb_s(f.read_bytes, f.read_time_ns);
    Some(f)
}

/// A defragmenter's device figures from `bench writes` around it.
pub(crate) fn writes_figures(step: &str, w: &super::child::Writes) -> Result<DefragFigures> {
    if w.exit_status.is_none() {
        bail!("{step}: the command was killed by a signal");
    }
    Ok(DefragFigures {
        seconds: w.command_seconds,
        device_bytes_written: w.counts.write_bytes,
        device_write_requests: w.counts.writes,
        device_bytes_read: w.counts.read_bytes,
        ..DefragFigures::default()
    })
}

/// fragkit defrag's own figures; a verification failure stops the lab.
pub fn fragkit_defrag(name: &str, d: &Defrag, mut f: DefragFigures) -> Result<DefragFigures> {
    let sm = &d.summary;
    if sm.verify_failures > 0 {
        bail!("{name}: {} ranges failed verification", sm.verify_failures);
    }
    f.bytes_planned = Some(sm.bytes_planned);
    f.bytes_moved = Some(sm.bytes_moved);
    f.ranges_moved = Some(sm.ranges_moved);
    f.verify_failures = Some(sm.verify_failures);
    f.declined = fragkit_declined(d);
    f.files_worse = Some(sm.files_worse);
    Ok(f)
}

/// fragkit defrag's skips, counted by reason kind, with one example reason each.
pub(crate) fn fragkit_declined(report: &Defrag) -> Option<String> {
    let mut kinds: BTreeMap<String, (u64, String)> = BTreeMap::new();
    for r in report.files.iter().flat_map(|f| &f.ranges) {
        if r.status == "skipped" {
            let kind = r.skip.clone().unwrap_or_else(|| "skipped".into());
            let e = kinds.entry(kind).or_insert((0, String::new()));
            e.0 += 1;
            if e.1.is_empty() {
                e.1 = r.reason.clone().unwrap_or_default();
            }
        }
    }
    (!kinds.is_empty()).then(|| {
        kinds
            .iter()
            .map(|(k, (n, why))| format!("{n} ranges skipped ({k}), e.g. \"{why}\""))
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// What a baseline tool said it left alone, from its output (stdout, then its log), in
/// its own words. The wordings are the tools' own (captured in the tests below):
/// - e4defrag -v prints "extents: A -> B [ OK ]" per file, and A -> A for a file it kept:
///   it moves a file only when the new space holds it in fewer extents; `e4defrag -c`
///   ends "does not need defragmentation.";
/// - xfs_fsr -v: "No improvement will be made (skipping): FILE" and "FILE already fully
///   defragmented." (it writes to stdout only when stdin is a terminal, else to syslog);
/// - btrfs filesystem defragment prints nothing per file.
pub(crate) fn tool_declined(text: &str) -> Option<String> {
    const SIGNS: [&str; 5] = [
        "does not need defragmentation",
        "already fully defragmented",
        "no improvement will be made",
        "can't be defragmented",
        // e4defrag refuses a file another process holds a POSIX lock on (SQLite's readers).
        "file has been locked",
    ];
    // e4defrag redraws its progress line with ESC[79;0H ESC[K: the last redraw counts.
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.rsplit("\x1b[K").next().unwrap_or(l).trim().to_string())
        .collect();
    let mut said = Vec::new();
    let (mut kept, mut acted) = (0u64, 0u64);
    let mut example = None;
    for l in &lines {
        if let Some((a, b)) = l.split_once("extents: ").and_then(|(_, t)| {
            let (a, rest) = t.split_once(" -> ")?;
            let b: String = rest.chars().take_while(char::is_ascii_digit).collect();
            Some((a.trim().parse::<u64>().ok()?, b.parse::<u64>().ok()?))
        }) {
            acted += 1;
            if b >= a {
                kept += 1;
                example.get_or_insert(format!("extents: {a} -> {b}"));
            }
        } else if SIGNS.iter().any(|s| l.to_lowercase().contains(s)) {
            said.push(l.as_str());
        }
    }
    let mut parts = Vec::new();
    if kept > 0 {
        parts.push(format!(
            "kept {kept} of {acted} files as they were (\"{}\": it moves a file only when the new space holds it in fewer extents)",
            example.unwrap_or_default()
        ));
    }
    match said.len() {
        0 => {}
        1 => parts.push(said[0].to_string()),
        n => parts.push(format!("{} (and {} more lines like it)", said[0], n - 1)),
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// One measured state of the file system: the untouched clone or a defragmented one.
#[derive(Debug, Clone)]
pub struct State {
    pub name: String,
    pub mountpoint: PathBuf,
    pub defrag: Option<DefragFigures>,
    pub layout: LayoutFigures,
    /// Block map, relative to the output directory.
    pub map: String,
}

pub(crate) fn describe_method(name: &str) -> &'static str {
    match name {
        "before" => "the fragmented file system, untouched",
        "pick" => "FragPicker: only the traced hot ranges that span more than one fragment",
        "bypass" => "FragPicker-B: every request-size window spanning more than one fragment",
        "full" => "conventional: every file in more than one fragment, in as few runs as free space allows (left alone when it allows no fewer)",
        "e4defrag" => "ext4's own defragmenter (e2fsprogs), whole files",
        "xfs_fsr" => "xfs's own reorganiser (xfsprogs), whole files",
        "btrfs" => "btrfs filesystem defragment, whole files",
        _ => "",
    }
}

/// Each state with its workload figures and its speed-up: per round, MB/s over the
/// untouched state's MB/s in the same round, median over rounds. The first state is the
/// untouched one.
pub fn methods(states: Vec<State>, figures: Vec<WorkloadFigures>) -> Vec<MethodResult> {
    let base_each = figures.first().map(|f| f.mb_per_s_each.clone());
    states
        .into_iter()
        .zip(figures)
        .map(|(s, workload)| {
            let before = s.name == "before";
            let speedup_each: Vec<f64> = if before {
                Vec::new()
            } else {
                workload
                    .mb_per_s_each
                    .iter()
                    .zip(base_each.iter().flatten())
                    .map(|(a, b)| if *b > 0.0 { a / b } else { 0.0 })
                    .collect()
            };
            MethodResult {
                speedup: (!before).then(|| median(&speedup_each)),
                real_time: if before {
                    None
                } else {
                    sign_test_interval(&speedup_each)
                },
                speedup_each,
                description: describe_method(&s.name).to_string(),
                name: s.name,
                mountpoint: s.mountpoint,
                defrag: s.defrag,
                layout: s.layout,
                workload,
                map: s.map,
            }
        })
        .collect()
}

/// Notes on the measurement: round-to-round noise, a baseline that was asked for but
/// is not installed.
pub(crate) fn measurement_notes(
    methods: &[MethodResult],
    spec: &LabSpec,
    plan: &Plan,
) -> Vec<String> {
    let mut notes = Vec::new();
    let noisiest = methods
        .iter()
        .map(|m| m.workload.mb_per_s_cov)
        .fold(0.0, f64::max);
    if noisiest > 0.10 {
        notes.push(format!(
            "MB/s varied by up to {:.0}% (CoV) between rounds on this machine, so real time is judged only by the paired intervals (faster or slower only when the interval excludes 1); the device's request counts are exact.",
            noisiest * 100.0
        ));
    }
    if spec.baseline && plan.tool.is_none() {
        notes.push(format!(
            "no baseline defragmenter for {} was found on this machine",
            spec.fs.name()
        ));
    }
    notes
}

/// Fragments per file per method, from each method's scan (in the order of `methods`).
pub fn file_rows(names: &[String], scans: &[Scan]) -> Vec<FileRow> {
    let scans: Vec<BTreeMap<String, (u64, u64)>> = scans
        .iter()
        .map(|s| {
            s.files
                .iter()
                .filter_map(|f| Some((f.name()?, (f.fragments, f.size))))
                .collect()
        })
        .collect();
    names
        .iter()
        .map(|n| FileRow {
            file: n.clone(),
            size: scans
                .first()
                .and_then(|s| s.get(n))
                .map_or(0, |&(_, size)| size),
            fragments: scans
                .iter()
                .map(|s| s.get(n).map_or(0, |&(f, _)| f))
                .collect(),
        })
        .collect()
}

pub fn headline(methods: &[MethodResult]) -> Headline {
    let written = |name: &str| {
        methods
            .iter()
            .find(|m| m.name == name)
            .and_then(|m| m.defrag.as_ref())
            .map(|d| d.device_bytes_written)
    };
    let pick = written("pick").or_else(|| written("bypass")).unwrap_or(0);
    let full = written("full").unwrap_or(0);
    let mut requests_after = BTreeMap::new();
    let mut speedup = BTreeMap::new();
    if let Some((first, rest)) = methods.split_first() {
        let before = &first.workload;
        for m in rest {
            if before.device_reads > 0.0 {
                requests_after.insert(
                    m.name.clone(),
                    m.workload.device_reads / before.device_reads,
                );
            }
            if let Some(x) = m.speedup {
                speedup.insert(m.name.clone(), x);
            }
        }
    }
    Headline {
        real_time: methods
            .iter()
            .filter_map(|m| m.real_time.map(|i| (m.name.clone(), i)))
            .collect(),
        winners: winners(methods),
        pick_written_vs_full: if full > 0 {
            pick as f64 / full as f64
        } else {
            0.0
        },
        requests_after,
        speedup,
    }
}

/// The paired interval of one method's real time: the median over rounds of the per-round
/// ratio MB/s(method) ÷ MB/s(other state, same round), with the exact distribution-free
/// interval for a median (the sign-test interval): order statistics [x(k), x(n+1−k)] of
/// the n ratios, whose coverage is 1 − 2·P(Binomial(n, ½) < k). k is the largest with
/// coverage ≥ 95%; with fewer than 6 rounds no k reaches 95% and k = 1 (the smallest and
/// the largest ratio; 5 rounds: 93.8%). No seed, no resampling: the same rounds give the
/// same interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RatioInterval {
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// Exact coverage of [low, high] for the median ratio.
    pub confidence: f64,
    pub rounds: usize,
}

/// Coverage below which the lab calls no difference whatever the interval says (fewer
/// than 5 rounds).
pub const MIN_CONFIDENCE: f64 = 0.9;

/// What real time says of one state against another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RealTime {
    /// The whole interval is above 1.
    Faster,
    /// The whole interval is below 1.
    Slower,
    /// The interval holds 1 (or too few rounds to tell).
    NoDifference,
}

impl RatioInterval {
    /// Whether this median is told apart from `other`'s: both intervals cover enough and
    /// they do not overlap (the application's rate during a defrag against the control's).
    pub fn apart_from(&self, other: &RatioInterval) -> bool {
        self.confidence >= MIN_CONFIDENCE
            && other.confidence >= MIN_CONFIDENCE
            && (self.high < other.low || self.low > other.high)
    }

    pub fn verdict(&self) -> RealTime {
        if self.confidence < MIN_CONFIDENCE {
            RealTime::NoDifference
        } else if self.low > 1.0 {
            RealTime::Faster
        } else if self.high < 1.0 {
            RealTime::Slower
        } else {
            RealTime::NoDifference
        }
    }
}

/// P(Binomial(n, ½) ≤ j), summed in log space (no overflow for large n).
fn binomial_half_cdf(n: usize, j: usize) -> f64 {
    let ln2 = std::f64::consts::LN_2;
    let mut ln_c = 0.0f64; // ln C(n, 0)
    let mut p = 0.0;
    for i in 0..=j.min(n) {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        p += (ln_c - n as f64 * ln2).exp();
    }
    p.min(1.0)
}

/// The sign-test interval of the median of `ratios` (see [`RatioInterval`]); None with
/// fewer than two finite ratios.
pub fn sign_test_interval(ratios: &[f64]) -> Option<RatioInterval> {
    let mut x: Vec<f64> = ratios.iter().copied().filter(|r| r.is_finite()).collect();
    let n = x.len();
    if n < 2 {
        return None;
    }
    x.sort_by(f64::total_cmp);
    let coverage = |k: usize| 1.0 - 2.0 * binomial_half_cdf(n, k - 1);
    let mut k = 1;
    while k < n.div_ceil(2) && coverage(k + 1) >= 0.95 {
        k += 1;
    }
    Some(RatioInterval {
        median: median(&x),
        low: x[k - 1],
        high: x[n - k],
        confidence: coverage(k),
        rounds: n,
    })
}

/// Per-round ratios a ÷ b (rounds where b is 0 dropped).
pub fn paired_ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .filter(|(_, b)| **b > 0.0)
        .map(|(a, b)| a / b)
        .collect()
}

/// One axis of the winner table: which defragmenters are best on it, ties kept.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axis {
    pub axis: String,
    /// What "best" means on this axis.
    pub better: String,
    /// Each method's figure as the table shows it, in the order of `methods`.
    pub values: Vec<(String, String)>,
    /// The best methods: one is a winner, several a tie; empty when the axis was not
    /// measured.
    pub best: Vec<String>,
    /// Whether the axis is an exact count (true) or a measurement with noise (false).
    pub exact: bool,
}

impl Axis {
    pub fn tie(&self) -> bool {
        self.best.len() > 1
    }
}

/// Methods whose `value` equals the smallest (exact figures: equal is a tie).
fn lowest<'a>(
    ms: &[&'a MethodResult],
    value: impl Fn(&MethodResult) -> Option<u64>,
) -> Vec<&'a str> {
    let best = ms.iter().filter_map(|m| value(m)).min();
    ms.iter()
        .filter(|m| best.is_some() && value(m) == best)
        .map(|m| m.name.as_str())
        .collect()
}

/// The device's read count of a state over the rounds, as (lowest, highest).
pub fn reads_range(m: &MethodResult) -> (u64, u64) {
    let e = &m.workload.device_reads_each;
    match (e.iter().min(), e.iter().max()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => {
            let r = m.workload.device_reads.round() as u64;
            (r, r)
        }
    }
}

/// Whether a has fewer device reads than b beyond their round-to-round spread (the
/// count can vary by a few metadata reads between rounds): a's highest is below b's
/// lowest.
pub fn fewer_reads(a: &MethodResult, b: &MethodResult) -> bool {
    reads_range(a).1 < reads_range(b).0
}

/// Whether `a` is measurably faster than `b` in real time (paired rounds).
pub fn measurably_faster(a: &MethodResult, b: &MethodResult) -> bool {
    sign_test_interval(&paired_ratios(
        &a.workload.mb_per_s_each,
        &b.workload.mb_per_s_each,
    ))
    .is_some_and(|i| i.verdict() == RealTime::Faster)
}

/// The winner table over the defragmenters (every method but the untouched first one):
/// bytes written, device read requests after, extra requests in the layout, modeled time
/// (exact: equal figures tie) and real time (a method is beaten only by one measurably
/// faster than it, so methods within the noise of each other tie).
pub fn winners(methods: &[MethodResult]) -> Vec<Axis> {
    let ms: Vec<&MethodResult> = methods.iter().skip(1).collect();
    let names = |best: Vec<&str>| best.into_iter().map(String::from).collect::<Vec<_>>();
    let values = |f: &dyn Fn(&MethodResult) -> String| {
        ms.iter()
            .map(|m| (m.name.clone(), f(m)))
            .collect::<Vec<_>>()
    };
    let written = |m: &MethodResult| m.defrag.as_ref().map(|d| d.device_bytes_written);
    let modeled = |m: &MethodResult| m.workload.modeled.as_ref().map(|x| x.read_time_ns);
    // Device reads: the fewest, and every method whose range overlaps the best's.
    let reads_best: Vec<&str> = match ms
        .iter()
        .min_by(|a, b| a.workload.device_reads.total_cmp(&b.workload.device_reads))
    {
        None => Vec::new(),
        Some(best) => ms
            .iter()
            .filter(|m| !fewer_reads(best, m))
            .map(|m| m.name.as_str())
            .collect(),
    };
    let real_best: Vec<&str> = ms
        .iter()
        .filter(|m| !ms.iter().any(|o| measurably_faster(o, m)))
        .map(|m| m.name.as_str())
        .collect();
    vec![
        Axis {
            axis: "bytes written".into(),
            better: "fewest".into(),
            values: values(&|m| written(m).map_or("–".into(), |w| w.to_string())),
            best: names(lowest(&ms, written)),
            exact: true,
        },
        Axis {
            axis: "device read requests after".into(),
            better: "fewest (ties within the count's round-to-round spread)".into(),
            values: values(&|m| {
                let (a, b) = reads_range(m);
                if a == b {
                    a.to_string()
                } else {
                    format!("{a}–{b}")
                }
            }),
            best: names(reads_best),
            exact: true,
        },
        Axis {
            axis: "extra requests, whole-file reads (layout)".into(),
            better: "fewest".into(),
            values: values(&|m| m.layout.extra.to_string()),
            best: names(lowest(&ms, |m| Some(m.layout.extra))),
            exact: true,
        },
        Axis {
            axis: "modeled NVMe time".into(),
            better: "shortest".into(),
            values: values(&|m| modeled(m).map_or("–".into(), |t| t.to_string())),
            best: names(lowest(&ms, modeled)),
            exact: true,
        },
        Axis {
            axis: "real time".into(),
            better: "not measurably slower than another (paired sign-test interval)".into(),
            values: values(&|m| {
                m.real_time.map_or("–".into(), |i| {
                    format!("×{:.2} [{:.2}, {:.2}]", i.median, i.low, i.high)
                })
            }),
            best: names(real_best),
            exact: false,
        },
    ]
}

/// Where real time and the counts disagree beyond the noise for one method against the
/// untouched state: Some(true) when the counts say better (fewer device reads beyond
/// their spread, or shorter modeled time with no more reads) but real time is measurably
/// slower; Some(false) when the counts say worse and real time is measurably faster.
pub fn real_time_disagrees(m: &MethodResult, before: &MethodResult) -> Option<bool> {
    let verdict = m.real_time?.verdict();
    let modeled = |x: &MethodResult| x.workload.modeled.as_ref().map(|d| d.read_time_ns);
    let counts_better = fewer_reads(m, before)
        || (!fewer_reads(before, m)
            && matches!((modeled(m), modeled(before)), (Some(a), Some(b)) if a < b));
    let counts_worse = fewer_reads(before, m)
        || (!fewer_reads(m, before)
            && matches!((modeled(m), modeled(before)), (Some(a), Some(b)) if a > b));
    match verdict {
        RealTime::Slower if counts_better => Some(true),
        RealTime::Faster if counts_worse => Some(false),
        _ => None,
    }
}

/// A pair of defragmenters the modeled time ranks one way and the counts the other:
/// `faster` is modeled faster although `fewer` has no more device reads, collisions or
/// page reads and fewer of at least one.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeledInversion {
    pub faster: String,
    pub fewer: String,
}

pub fn modeled_inversions(methods: &[MethodResult]) -> Vec<ModeledInversion> {
    let mut out = Vec::new();
    let ms: Vec<(&MethodResult, &ModeledFigures)> = methods
        .iter()
        .skip(1)
        .filter_map(|m| m.workload.modeled.as_ref().map(|x| (m, x)))
        .collect();
    for (a, x) in &ms {
        for (b, y) in &ms {
            let counts = [
                (y.device_reads, x.device_reads),
                (y.collisions, x.collisions),
                (y.page_reads, x.page_reads),
            ];
            let b_no_more = counts.iter().all(|(by, ax)| by <= ax);
            let b_fewer = counts.iter().any(|(by, ax)| by < ax);
            if x.read_time_ns < y.read_time_ns && b_no_more && b_fewer {
                out.push(ModeledInversion {
                    faster: a.name.clone(),
                    fewer: b.name.clone(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::child::parse;
    use super::super::Workload;
    use super::*;

    fn spec(baseline: bool, iterations: u32) -> LabSpec {
        LabSpec {
            fs: FsType::Ext4,
            size: 512 << 20,
            workload: Workload::Seq,
            out: PathBuf::from("/tmp/lab"),
            files: 4,
            paf: "4:75:50".into(),
            iterations,
            baseline,
            keep: false,
            scratch_dir: None,
            seed: 1,
        }
    }

    #[test]
    fn plan_counts_steps_and_drops_a_missing_tool() {
        let p = plan(&spec(true, 7), |_| true);
        assert_eq!(p.tool.as_ref().map(|t| t.0), Some("e4defrag"));
        assert_eq!(p.methods_after, 3);
        assert_eq!(p.steps, 8 + 3 * 4 + 7);
        let p = plan(&spec(true, 7), |_| false);
        assert_eq!((p.tool, p.methods_after, p.steps), (None, 2, 8 + 2 * 4 + 7));
        assert_eq!(plan(&spec(false, 1), |_| true).tool, None);
        assert_eq!(baseline_tool(FsType::F2fs), None);
    }

    fn job(path: &str, bytes: u64, secs: f64, reads: Option<u64>, split: Option<u64>) -> String {
        format!(
            r#"{{"path":"{path}","iterations":[{{"bytes":{bytes},"requests":{},"seconds":{secs},"device":{}}}],"layout":{}}}"#,
            bytes / 131072,
            reads.map_or("null".into(), |r| format!(r#"{{"reads":{r}}}"#)),
            split.map_or("null".into(), |s| format!(
                r#"{{"request_size":131072,"split":{s},"ideal":1}}"#
            )),
        )
    }

    fn round(jobs: &[String]) -> Bench {
        parse(
            "bench",
            &format!(r#"{{"version":1,"jobs":[{}]}}"#, jobs.join(",")),
        )
        .unwrap()
    }

    #[test]
    fn workload_sums_a_states_jobs_per_round() {
        let mb = 1_000_000u64;
        let rounds = vec![
            round(&[
                job("/a/work/f0", 2 * mb, 1.0, Some(10), Some(9)),
                job("/b/work/f0", 4 * mb, 1.0, Some(50), Some(48)),
                job("/a/work/f1", 2 * mb, 1.0, Some(12), Some(11)),
            ]),
            round(&[
                job("/b/work/f0", 4 * mb, 2.0, Some(52), Some(48)),
                job("/a/work/f0", 2 * mb, 0.5, Some(10), Some(9)),
                job("/a/work/f1", 2 * mb, 0.5, Some(14), Some(11)),
            ]),
        ];
        let a = workload_figures(&rounds, Path::new("/a")).unwrap();
        assert_eq!(a.bytes, 4 * mb);
        assert_eq!(a.requests, 2 * (2 * mb / 131072));
        assert_eq!(a.device_reads, 23.0);
        assert_eq!(a.predicted_device_reads, Some(20));
        assert_eq!(a.mb_per_s_each, vec![2.0, 4.0]);
        let b = workload_figures(&rounds, Path::new("/b")).unwrap();
        assert_eq!(b.mb_per_s_each, vec![4.0, 2.0]);
        assert!(workload_figures(&rounds, Path::new("/c")).is_err());
        // One job without a layout prediction: no prediction for the state.
        let r = vec![round(&[
            job("/a/work/f0", mb, 1.0, None, Some(3)),
            job("/a/work/f1", mb, 1.0, None, None),
        ])];
        let a = workload_figures(&r, Path::new("/a")).unwrap();
        assert_eq!(a.predicted_device_reads, None);
        assert_eq!(a.device_reads, 0.0);
    }

    /// `job` with the disk model's figures for it.
    fn disk_job(path: &str, time_ns: u64, seeks: u64) -> String {
        let j = job(path, 1_000_000, 1.0, Some(2), Some(2));
        format!(
            r#"{},"model_hdd":{{"model":"hdd","mapping":"fiemap-physical-address","op":"read","device_requests":2,"bytes":1000000,"time_ns":{time_ns},"mb_s":0,"seeks":{seeks},"seek_ns":0,"rotation_ns":{},"transfer_ns":0,"lookahead_reads":0}}}}"#,
            &j[..j.len() - 1],
            seeks * 1000
        )
    }

    /// A state's disk figures add up over its jobs (2 MB in 4 ms: 500 MB/s); a round that
    /// prices the same files otherwise is refused, and a job without them leaves none.
    #[test]
    fn disk_figures_add_up_and_repeat_every_round() {
        let r1 = round(&[
            disk_job("/a/work/f0", 1_000_000, 1),
            disk_job("/a/work/f1", 3_000_000, 2),
        ]);
        let a = workload_figures(&[r1.clone(), r1.clone()], Path::new("/a")).unwrap();
        let d = a.modeled_disk.unwrap();
        assert_eq!(
            (d.bytes, d.time_ns, d.seeks, d.rotation_ns),
            (2_000_000, 4_000_000, 3, 3000)
        );
        assert_eq!((d.device_requests, d.model.as_str()), (4, "hdd"));
        assert_eq!(d.mb_s, 500.0);
        let r2 = round(&[
            disk_job("/a/work/f0", 1_000_000, 1),
            disk_job("/a/work/f1", 3_000_001, 2),
        ]);
        let e = workload_figures(&[r1.clone(), r2], Path::new("/a")).unwrap_err();
        assert!(e.to_string().contains("round 2"), "{e}");
        let r3 = round(&[
            disk_job("/a/work/f0", 1_000_000, 1),
            job("/a/work/f1", 1, 1.0, None, None),
        ]);
        assert_eq!(
            workload_figures(&[r3], Path::new("/a"))
                .unwrap()
                .modeled_disk,
            None
        );
    }

    fn state(name: &str, written: u64) -> State {
        State {
            name: name.into(),
            mountpoint: PathBuf::from(format!("/{name}")),
            defrag: (name != "before").then(|| DefragFigures {
                device_bytes_written: written,
                ..DefragFigures::default()
            }),
            layout: LayoutFigures::default(),
            map: format!("maps/{name}.png"),
        }
    }

    fn fig(each: &[f64], reads: f64) -> WorkloadFigures {
        WorkloadFigures {
            mb_per_s: fragkit_core::stats::trimmed_mean(each),
            mb_per_s_each: each.to_vec(),
            device_reads: reads,
            ..WorkloadFigures::default()
        }
    }

    #[test]
    fn speedups_pair_rounds_and_headline_compares_with_before() {
        let m = methods(
            vec![state("before", 0), state("pick", 10), state("full", 40)],
            vec![
                fig(&[100.0, 50.0, 100.0], 1000.0),
                fig(&[200.0, 50.0, 110.0], 500.0),
                fig(&[100.0, 100.0, 300.0], 250.0),
            ],
        );
        assert_eq!(m[0].speedup, None);
        assert!(m[0].speedup_each.is_empty());
        assert_eq!(m[1].speedup_each, vec![2.0, 1.0, 1.1]);
        assert_eq!(m[1].speedup, Some(1.1));
        assert_eq!(m[2].speedup, Some(2.0));
        assert_eq!(m[1].description, describe_method("pick"));
        let h = headline(&m);
        assert_eq!(h.pick_written_vs_full, 0.25);
        assert_eq!(h.requests_after["pick"], 0.5);
        assert_eq!(h.requests_after["full"], 0.25);
        assert!(!h.requests_after.contains_key("before"));
        // The headline's speed-up is the methods' (paired median), not a ratio of means.
        assert_eq!(h.speedup["pick"], 1.1);
        assert_eq!(h.speedup["full"], 2.0);
        assert!(!h.speedup.contains_key("before"));
    }

    #[test]
    fn notes_flag_noise_and_a_missing_baseline() {
        let m = methods(
            vec![state("before", 0)],
            vec![WorkloadFigures {
                mb_per_s_cov: 0.2,
                ..WorkloadFigures::default()
            }],
        );
        let s = spec(true, 3);
        let notes = measurement_notes(&m, &s, &plan(&s, |_| false));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("20%"));
        assert!(notes[1].contains("ext4"));
        assert!(measurement_notes(&m[..0], &s, &plan(&s, |_| true)).is_empty());
    }

    #[test]
    fn declines_are_read_from_both_kinds_of_output() {
        let d: Defrag = parse(
            "defrag",
            r#"{"summary":{"bytes_planned":0,"bytes_moved":0,"ranges_moved":0,"verify_failures":0,"files_worse":0},
               "files":[{"ranges":[
                 {"status":"skipped","skip":"no_gain","reason":"first"},
                 {"status":"moved"},
                 {"status":"skipped","skip":"no_gain","reason":"second"},
                 {"status":"skipped","skip":"budget","reason":"over budget"}]}]}"#,
        )
        .unwrap();
        assert_eq!(
            fragkit_declined(&d).unwrap(),
            "1 ranges skipped (budget), e.g. \"over budget\"; 2 ranges skipped (no_gain), e.g. \"first\""
        );
        let f = fragkit_defrag("defrag", &d, DefragFigures::default()).unwrap();
        assert_eq!(f.bytes_moved, Some(0));
        assert!(f.declined.is_some());
        let mut bad = d.clone();
        bad.summary.verify_failures = 2;
        assert!(fragkit_defrag("defrag", &bad, DefragFigures::default()).is_err());

        assert_eq!(tool_declined("ok\nmoved 3 files\n"), None);
    }

    /// Real output, captured on this project's machine (Debian 12: e2fsprogs 1.47.0,
    /// xfsprogs 6.1.0) on an ext4/xfs scratch holding a file in 128 fragments ("frag") and
    /// one written whole ("whole"); e4defrag's cursor escapes kept as it prints them.
    #[test]
    fn declines_in_the_tools_real_words() {
        let e4defrag_v = "e4defrag 1.47.0 (5-Feb-2023)\n\
ext4 defragmentation for directory(/tmp/fragkit-scratch-UAtRGl/mnt)\n\
[1/4] \"/tmp/fragkit-scratch-UAtRGl/mnt\"\n\
\tFile is not regular file\t\t[ NG ]\n\
[2/4]\x1b[79;0H\x1b[K[2/4]/tmp/fragkit-scratch-UAtRGl/mnt/frag:\t  0%\x1b[79;0H\x1b[K[2/4]/tmp/fragkit-scratch-UAtRGl/mnt/frag:\t100%  extents: 128 -> 1\t[ OK ]\n\
[3/4] \"/tmp/fragkit-scratch-UAtRGl/mnt/lost+found\"\n\
\tCan not process \"lost+found\"\t\t[ NG ]\n\
[4/4]\x1b[79;0H\x1b[K[4/4]/tmp/fragkit-scratch-UAtRGl/mnt/whole:\t100%  extents: 1 -> 1\t[ OK ]\n\
\n\
\tSuccess:\t\t\t[ 2/4 ]\n\
\tFailure:\t\t\t[ 2/4 ]\n\
\tTotal extents:\t\t\t 129->2\n\
\tFragmented percentage:\t\t 50%->0%\n";
        assert_eq!(
            tool_declined(e4defrag_v).unwrap(),
            "kept 1 of 2 files as they were (\"extents: 1 -> 1\": it moves a file only when the new space holds it in fewer extents)"
        );
        // Without -v the same run says nothing a reader could tell a decline by: that is
        // why the lab runs e4defrag -v.
        let e4defrag = "e4defrag 1.47.0 (5-Feb-2023)\n\
ext4 defragmentation for directory(/tmp/fragkit-scratch-8JAVIY/mnt)\n\
\x1b[79;0H\x1b[K[3/4]/tmp/fragkit-scratch-8JAVIY/mnt/frag:\t100%\t[ OK ]\n\
\x1b[79;0H\x1b[K[4/4]/tmp/fragkit-scratch-8JAVIY/mnt/whole:\t100%\t[ OK ]\n\
\n\tSuccess:\t\t\t[ 2/4 ]\n\tFailure:\t\t\t[ 2/4 ]\n";
        assert_eq!(tool_declined(e4defrag), None);
        let e4defrag_c = "e4defrag 1.47.0 (5-Feb-2023)\n\
<Fragmented files>                             now/best       size/ext\n\
1. /tmp/fragkit-scratch-8JAVIY/mnt/whole         1/1           8192 KB\n\
2. /tmp/fragkit-scratch-8JAVIY/mnt/frag          1/1           8192 KB\n\
\n Total/best extents\t\t\t\t2/2\n\
 Average size per extent\t\t\t8192 KB\n\
 Fragmentation score\t\t\t\t0\n\
 [0-30 no problem: 31-55 a little bit fragmented: 56- needs defrag]\n\
 This directory (/tmp/fragkit-scratch-8JAVIY/mnt) does not need defragmentation.\n\
 Done.\n";
        assert_eq!(
            tool_declined(e4defrag_c).unwrap(),
            "This directory (/tmp/fragkit-scratch-8JAVIY/mnt) does not need defragmentation."
        );
        // xfs_fsr -v with a terminal on stdin (`script -qec 'xfs_fsr -v FILES' /dev/null`).
        let xfs_fsr = "/tmp/fragkit-scratch-BBDF3e/mnt/whole\r\n\
/tmp/fragkit-scratch-BBDF3e/mnt/whole already fully defragmented.\r\n\
/tmp/fragkit-scratch-BBDF3e/mnt/frag\r\n\
/tmp/fragkit-scratch-BBDF3e/mnt/frag already fully defragmented.\r\n";
        assert_eq!(
            tool_declined(xfs_fsr).unwrap(),
            "/tmp/fragkit-scratch-BBDF3e/mnt/whole already fully defragmented. (and 1 more lines like it)"
        );
        // ... on a mount point with a fragmented file: it acted, nothing declined.
        let xfs_fsr_fs = "/tmp/fragkit-scratch-BBDF3e/mnt start inode=0\r\nino=132\r\n\
extents before:128 after:1 DONE ino=132\r\n";
        assert_eq!(tool_declined(xfs_fsr_fs), None);
        assert_eq!(
            tool_declined("No improvement will be made (skipping): /mnt/work/f0\n").unwrap(),
            "No improvement will be made (skipping): /mnt/work/f0"
        );
        // btrfs filesystem defragment -f prints nothing.
        assert_eq!(tool_declined(""), None);
    }

    #[test]
    fn file_rows_follow_the_names_across_scans() {
        let scan = |frags: [u64; 2]| -> Scan {
            parse(
                "scan",
                &format!(
                    r#"{{"summary":{{"files":2,"bytes":8,"fragments":0,"extents":0,"layout_score":1.0,"requests":[]}},
                       "files":[{{"path":"/x/work/a","size":4,"fragments":{}}},{{"path":"/x/work/b","size":4,"fragments":{}}}]}}"#,
                    frags[0], frags[1]
                ),
            )
            .unwrap()
        };
        let rows = file_rows(
            &["b".into(), "a".into(), "gone".into()],
            &[scan([5, 7]), scan([1, 2])],
        );
        assert_eq!(rows[0].fragments, vec![7, 2]);
        assert_eq!(rows[1].fragments, vec![5, 1]);
        assert_eq!(rows[2].fragments, vec![0, 0]);
        assert_eq!(rows[2].size, 0);
        assert!(layout_figures("scan", &scan([1, 1])).is_err());
    }

    #[test]
    fn apart_only_when_the_intervals_do_not_overlap() {
        let control = sign_test_interval(&[0.72, 1.09, 1.18, 1.08, 1.0, 1.02, 1.34]).unwrap();
        let e4 = sign_test_interval(&[0.31, 0.27, 0.32, 0.29, 0.22, 0.25, 0.34]).unwrap();
        let pick = sign_test_interval(&[0.66, 0.98, 0.82, 1.32, 0.68, 0.77, 0.86]).unwrap();
        assert!(e4.apart_from(&control) && control.apart_from(&e4));
        assert!(!pick.apart_from(&control));
        let few = sign_test_interval(&[0.3, 0.2]).unwrap();
        assert!(
            !few.apart_from(&control),
            "too few rounds tell nothing apart"
        );
    }

    #[test]
    fn sign_test_interval_is_exact_and_seedless() {
        let i = sign_test_interval(&[1.3, 0.9, 3.17, 2.0, 0.5]).unwrap();
        assert_eq!((i.median, i.low, i.high, i.rounds), (1.3, 0.5, 3.17, 5));
        assert!((i.confidence - 0.9375).abs() < 1e-12);
        assert_eq!(i.verdict(), RealTime::NoDifference);
        // 10 rounds: P(B(10,½) ≤ 1) = 11/1024, so k = 2 (97.9%); k = 3 would be 89.1%.
        let x: Vec<f64> = (1..=10).map(f64::from).collect();
        let i = sign_test_interval(&x).unwrap();
        assert_eq!((i.low, i.high), (2.0, 9.0));
        assert!((i.confidence - (1.0 - 22.0 / 1024.0)).abs() < 1e-12);
        let faster = sign_test_interval(&[1.5, 1.6, 1.7, 1.8, 1.9]).unwrap();
        assert_eq!(faster.verdict(), RealTime::Faster);
        let slower = sign_test_interval(&[0.5, 0.6, 0.7, 0.8, 0.9]).unwrap();
        assert_eq!(slower.verdict(), RealTime::Slower);
        // Too few rounds to call anything, whatever the ratios.
        let few = sign_test_interval(&[2.0, 3.0, 4.0]).unwrap();
        assert!(few.confidence < MIN_CONFIDENCE);
        assert_eq!(few.verdict(), RealTime::NoDifference);
        assert_eq!(sign_test_interval(&[2.0]), None);
        assert_eq!(sign_test_interval(&[]), None);
        assert!((binomial_half_cdf(2000, 2000) - 1.0).abs() < 1e-9);
    }

    fn after(
        name: &str,
        written: u64,
        extra: u64,
        reads: &[u64],
        mbps: &[f64],
        ns: u64,
    ) -> MethodResult {
        MethodResult {
            name: name.into(),
            description: String::new(),
            mountpoint: PathBuf::from("/m"),
            defrag: Some(DefragFigures {
                device_bytes_written: written,
                ..DefragFigures::default()
            }),
            layout: LayoutFigures {
                extra,
                ..LayoutFigures::default()
            },
            workload: WorkloadFigures {
                device_reads: reads.iter().sum::<u64>() as f64 / reads.len() as f64,
                device_reads_each: reads.to_vec(),
                mb_per_s_each: mbps.to_vec(),
                modeled: Some(ModeledFigures {
                    read_time_ns: ns,
                    ..ModeledFigures::default()
                }),
                ..WorkloadFigures::default()
            },
            speedup: None,
            speedup_each: Vec::new(),
            real_time: sign_test_interval(&paired_ratios(mbps, &[100.0; 5])),
            map: String::new(),
        }
    }

    #[test]
    fn winners_tie_on_equal_figures_and_within_the_noise() {
        let before = after("before", 0, 9, &[9000; 5], &[100.0; 5], 900);
        let ms = vec![
            before,
            after(
                "pick",
                10,
                0,
                &[4489, 4500, 4489, 4500, 4489],
                &[90.0, 317.0, 500.0, 120.0, 400.0],
                500,
            ),
            after(
                "full",
                40,
                0,
                &[4500; 5],
                &[80.0, 189.0, 300.0, 150.0, 450.0],
                500,
            ),
            after(
                "e4defrag",
                40,
                0,
                &[4500; 5],
                &[100.0, 205.0, 550.0, 110.0, 300.0],
                500,
            ),
        ];
        let w = winners(&ms);
        let best = |axis: &str| w.iter().find(|a| a.axis == axis).unwrap().best.clone();
        assert_eq!(best("bytes written"), vec!["pick"]);
        assert_eq!(
            best("device read requests after"),
            vec!["pick", "full", "e4defrag"]
        );
        assert_eq!(
            best("extra requests, whole-file reads (layout)"),
            vec!["pick", "full", "e4defrag"]
        );
        assert_eq!(best("modeled NVMe time"), vec!["pick", "full", "e4defrag"]);
        assert_eq!(best("real time"), vec!["pick", "full", "e4defrag"]);
        assert_eq!(w[1].values[0].1, "4489–4500");
        // (Each pair of methods swaps places between rounds: no one is measurably faster.)
        // Reads that fall beyond the spread are fewer; a measurably faster method wins.
        let ms2 = vec![
            ms[0].clone(),
            after(
                "pick",
                10,
                0,
                &[4000; 5],
                &[150.0, 160.0, 170.0, 180.0, 190.0],
                400,
            ),
            after(
                "full",
                40,
                0,
                &[4500; 5],
                &[100.0, 101.0, 99.0, 100.0, 100.0],
                500,
            ),
        ];
        let w = winners(&ms2);
        assert_eq!(w[1].best, vec!["pick"]);
        assert_eq!(w[4].best, vec!["pick"]);
        assert_eq!(real_time_disagrees(&ms2[1], &ms2[0]), None);
        // Counts better, real time measurably slower: a disagreement.
        let slow = after(
            "pick",
            10,
            0,
            &[4000; 5],
            &[50.0, 60.0, 70.0, 80.0, 90.0],
            400,
        );
        assert_eq!(real_time_disagrees(&slow, &ms2[0]), Some(true));
    }

    #[test]
    fn modeled_inversions_find_the_db_case() {
        let mut pick = after("pick", 1, 0, &[8192; 5], &[100.0; 5], 46_000_000);
        let mut full = after("full", 2, 0, &[8276; 5], &[100.0; 5], 44_000_000);
        pick.workload.modeled = Some(ModeledFigures {
            device_reads: 8192,
            collisions: 0,
            page_reads: 8192,
            read_time_ns: 46_000_000,
            ..ModeledFigures::default()
        });
        full.workload.modeled = Some(ModeledFigures {
            device_reads: 8276,
            collisions: 3,
            page_reads: 11457,
            read_time_ns: 44_000_000,
            ..ModeledFigures::default()
        });
        let before = after("before", 0, 0, &[9000; 5], &[100.0; 5], 50_000_000);
        let inv = modeled_inversions(&[before.clone(), pick.clone(), full.clone()]);
        assert_eq!(
            inv,
            vec![ModeledInversion {
                faster: "full".into(),
                fewer: "pick".into()
            }]
        );
        // Modeled faster and fewer counts: nothing to explain.
        full.workload.modeled.as_mut().unwrap().read_time_ns = 47_000_000;
        assert!(modeled_inversions(&[before, pick, full]).is_empty());
    }
}
