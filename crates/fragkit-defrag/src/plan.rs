//! Which byte ranges to migrate: FragPicker's pick (hot ranges from a trace that span more
//! than one fragment), FragPicker-B's bypass (every R-window spanning more than one
//! fragment), or conventional full (whole files, or each hole-free stretch of them).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use fragkit_core::layout::model::Fragment;
use fragkit_core::metrics::{range_request_count, split_window_list};
use fragkit_core::scan::FileEntry;

/// A profile written by `fragkit trace` (only the fields planning needs).
#[derive(Debug, Clone, Deserialize)]
pub struct Profile {
    pub version: u32,
    #[serde(default)]
    pub kind: Option<String>,
    /// How long the trace ran (0 when the profile does not say).
    #[serde(default)]
    pub duration_ns: u64,
    pub files: Vec<ProfileFile>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ProfileFile {
    pub path: PathBuf,
    #[serde(default)]
    pub dev: Option<String>,
    #[serde(default)]
    pub ino: Option<u64>,
    /// The file's size when traced, its read and write calls and the bytes they moved
    /// (what advise weighs each range's accesses with).
    #[serde(default)]
    pub size: u64,
    #[serde(default)]
    pub reads: u64,
    #[serde(default)]
    pub writes: u64,
    #[serde(default)]
    pub bytes_read: u64,
    pub ranges: Vec<ProfileRange>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct ProfileRange {
    pub offset: u64,
    pub length: u64,
    #[serde(default)]
    pub reads: u64,
    #[serde(default)]
    pub writes: u64,
}

impl Profile {
    pub fn load(path: &Path) -> Result<Profile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read profile", path.display()))?;
        let p: Profile = serde_json::from_str(&text).with_context(|| {
            format!(
                "{}: not a fragkit trace profile (expected JSON from `fragkit trace`)",
                path.display()
            )
        })?;
        if p.version != 1 {
            bail!(
                "{}: profile version {} (expected 1)",
                path.display(),
                p.version
            );
        }
        Ok(p)
    }
}

#[derive(Debug, Clone)]
pub enum Mode {
    Pick { profile: Profile, hot_pct: f64 },
    Bypass,
    Full,
}

impl Mode {
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Pick { .. } => "pick",
            Mode::Bypass => "bypass",
            Mode::Full => "full",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PlannedRange {
    pub offset: u64,
    pub length: u64,
    /// Extra requests at the planning request size that moving this range removes.
    pub extra_removed: u64,
    /// The R-windows inside the range that more than one run touches, clipped to it: what
    /// pick and bypass retry one by one when the range has no room as a whole (a window
    /// already in one piece needs nothing).
    #[serde(skip)]
    pub split_windows: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedRange {
    pub offset: u64,
    pub length: u64,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct FilePlan {
    pub ranges: Vec<PlannedRange>,
    pub skipped: Vec<SkippedRange>,
}

impl FilePlan {
    pub fn bytes(&self) -> u64 {
        self.ranges.iter().map(|r| r.length).sum()
    }
    pub(crate) fn extra_removed(&self) -> u64 {
        self.ranges.iter().map(|r| r.extra_removed).sum()
    }
}

/// End of the data a read can see: the file size rounded up to a block.
fn readable_end(f: &FileEntry) -> u64 {
    let bs = f.file.layout.block_size.max(1) as u64;
    f.file.layout.size.div_ceil(bs) * bs
}

/// Data runs touching [start, end) and the data bytes inside it.
fn runs_in(runs: &[Fragment], start: u64, end: u64) -> (u64, u64) {
    runs.iter()
        .filter(|r| r.logical < end && r.logical_end() > start)
        .fold((0, 0), |(n, b), r| {
            (n + 1, b + r.logical_end().min(end) - r.logical.max(start))
        })
}

/// Plan one range: it must be fully backed by written data (holes and preallocated blocks
/// inside cannot be made one request by moving data) and span more than one run. With
/// `whole_windows` (pick and bypass, whose goal is one request per R-window) a range whose
/// windows are each in one piece already has nothing to gain and is not planned.
fn plan_range(
    plan: &mut FilePlan,
    runs: &[Fragment],
    (start, end): (u64, u64),
    r: u64,
    whole_windows: bool,
) {
    let (n, data) = runs_in(runs, start, end);
    if n <= 1 {
        return;
    }
    let extra = range_request_count(runs, start - start % r, end, r).extra();
    if whole_windows && extra == 0 {
        return;
    }
    if data < end - start {
        plan.skipped.push(SkippedRange {
            offset: start,
            length: end - start,
            reason: "range has holes or preallocated blocks; moving data cannot join it".into(),
        });
        return;
    }
    let split_windows: Vec<(u64, u64)> = split_window_list(runs, r)
        .into_iter()
        .filter(|w| w.start < end && w.end > start)
        .map(|w| (w.start.max(start), w.end.min(end)))
        .collect();
    match plan.ranges.last_mut() {
        // Adjacent ranges become one migration (one donor, one ioctl).
        Some(last) if last.offset + last.length == start => {
            last.length = end - last.offset;
            last.extra_removed += extra;
            last.split_windows.extend(split_windows);
        }
        _ => plan.ranges.push(PlannedRange {
            offset: start,
            length: end - start,
            extra_removed: extra,
            split_windows,
        }),
    }
}

/// Plan every file; `request_size` is R (FragPicker's I/O size; 128 KiB by default).
pub(crate) fn plan_files(files: &[FileEntry], mode: &Mode, request_size: u64) -> Vec<FilePlan> {
    let hot = match mode {
        Mode::Pick { profile, hot_pct } => Some(hot_ranges(files, profile, *hot_pct)),
        _ => None,
    };
    files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let runs = f.file.layout.data_runs();
            let end_of_data = readable_end(f);
            let mut plan = FilePlan::default();
            match mode {
                Mode::Bypass => {
                    for w in split_window_list(&runs, request_size) {
                        plan_range(
                            &mut plan,
                            &runs,
                            (w.start, w.end.min(end_of_data)),
                            request_size,
                            true,
                        );
                    }
                }
                Mode::Full => {
                    // Each logically contiguous stretch of data that is in more than one run.
                    let mut k = 0;
                    while k < runs.len() {
                        let start = runs[k].logical;
                        let mut end = runs[k].logical_end();
                        let mut j = k + 1;
                        while j < runs.len() && runs[j].logical == end {
                            end = runs[j].logical_end();
                            j += 1;
                        }
                        if j - k > 1 {
                            plan_range(
                                &mut plan,
                                &runs,
                                (start, end.min(end_of_data)),
                                request_size,
                                false,
                            );
                        }
                        k = j;
                    }
                }
                Mode::Pick { .. } => {
                    let bs = f.file.layout.block_size.max(1) as u64;
                    let hot = hot.as_ref().expect("pick mode has hot ranges");
                    let mut ranges: Vec<(u64, u64)> = hot
                        .get(&i)
                        .map(|v| {
                            v.iter()
                                .map(|r| {
                                    let s = r.offset / bs * bs;
                                    // A hand-edited profile may hold any u64s: the end
                                    // saturates and is clipped to the data before it is
                                    // rounded up (end_of_data is a block multiple).
                                    let e = r
                                        .offset
                                        .saturating_add(r.length)
                                        .min(end_of_data)
                                        .div_ceil(bs)
                                        * bs;
                                    (s, e.min(end_of_data))
                                })
                                .filter(|(s, e)| e > s)
                                .collect()
                        })
                        .unwrap_or_default();
                    ranges.sort();
                    // Merge overlapping hot ranges so no byte is moved twice; adjacent ones
                    // stay separate (FragPicker): each is judged on the fragments it spans.
                    let mut merged: Vec<(u64, u64)> = Vec::new();
                    for (s, e) in ranges {
                        match merged.last_mut() {
                            Some(last) if s < last.1 => last.1 = last.1.max(e),
                            _ => merged.push((s, e)),
                        }
                    }
                    for range in merged {
                        plan_range(&mut plan, &runs, range, request_size, true);
                    }
                }
            }
            plan
        })
        .collect()
}

/// For each of the profile's files, the index of the scanned file it is (by device and
/// inode, else by path); None for one that was not scanned.
pub(crate) fn match_profile(files: &[FileEntry], profile: &Profile) -> Vec<Option<usize>> {
    let by_id: HashMap<(String, u64), usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| ((f.file.dev_string(), f.file.ino), i))
        .collect();
    let by_path: HashMap<&Path, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.file.path.as_path(), i))
        .collect();
    profile
        .files
        .iter()
        .map(|pf| {
            match (&pf.dev, pf.ino) {
                (Some(d), Some(ino)) => by_id.get(&(d.clone(), ino)).copied(),
                _ => None,
            }
            .or_else(|| by_path.get(pf.path.as_path()).copied())
        })
        .collect()
}

/// The profile's hottest ranges (top `hot_pct` percent by access count), per file index.
fn hot_ranges(
    files: &[FileEntry],
    profile: &Profile,
    hot_pct: f64,
) -> HashMap<usize, Vec<ProfileRange>> {
    let mut all: Vec<(usize, ProfileRange)> = Vec::new();
    for (pf, idx) in profile.files.iter().zip(match_profile(files, profile)) {
        if let Some(i) = idx {
            all.extend(pf.ranges.iter().map(|r| (i, *r)));
        }
    }
    all.sort_by_key(|r| std::cmp::Reverse(r.1.reads + r.1.writes));
    let keep = ((all.len() as f64) * hot_pct / 100.0).ceil() as usize;
    let mut out: HashMap<usize, Vec<ProfileRange>> = HashMap::new();
    for (i, r) in all.into_iter().take(keep) {
        out.entry(i).or_default().push(r);
    }
    out
}
