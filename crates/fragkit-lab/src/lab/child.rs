//! What the lab reads from each child command's JSON, as serde types: only the fields the
//! lab uses (serde ignores the rest), so a renamed field is a parse error naming the
//! step, not a silent zero. Reports the lab passes through into its own report
//! (`age paf`, `age fragpicker-synthetic`, `free`) keep their other fields in `rest`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Parse a step's JSON stdout into `T`, naming the step when it does not fit.
pub fn parse<T: DeserializeOwned>(step: &str, text: &str) -> Result<T> {
    serde_json::from_str(text).with_context(|| {
        format!(
            "step '{step}': output is not the JSON expected of it ({})",
            std::any::type_name::<T>().rsplit("::").next().unwrap_or("")
        )
    })
}

/// `fragkit bench writes --format json`: what the device under a path did while a command
/// ran (sync before and after).
#[derive(Debug, Clone, Deserialize)]
pub struct Writes {
    pub exit_status: Option<i32>,
    pub command_seconds: f64,
    pub counts: WritesCounts,
}

#[derive(Debug, Clone, Deserialize)]
pub struct WritesCounts {
    pub writes: u64,
    pub write_bytes: u64,
    pub read_bytes: u64,
}

/// `fragkit scan --format json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Scan {
    pub summary: ScanSummary,
    #[serde(default)]
    pub files: Vec<ScanFile>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ScanSummary {
    pub files: u64,
    pub bytes: u64,
    pub fragments: u64,
    pub extents: u64,
    pub layout_score: f64,
    /// One entry per request size asked for (the lab asks for one).
    pub requests: Vec<ScanRequests>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ScanRequests {
    pub split: u64,
    pub ideal: u64,
    pub extra: u64,
    pub move_bytes: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ScanFile {
    pub path: PathBuf,
    pub size: u64,
    pub fragments: u64,
}

impl ScanFile {
    /// The file's name (the lab's files all live in one `work` directory).
    pub fn name(&self) -> Option<String> {
        Some(self.path.file_name()?.to_string_lossy().into_owned())
    }
}

/// `fragkit bench read --format json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Bench {
    pub jobs: Vec<BenchJob>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BenchJob {
    pub path: PathBuf,
    pub iterations: Vec<BenchIteration>,
    /// The device requests the file's layout predicts (O_DIRECT reads).
    pub layout: Option<BenchLayout>,
    /// `bench read --model`: the job's reads on the modeled SSD.
    #[serde(default)]
    pub model: Option<fragkit_core::ssd::layout::ModeledReads>,
    /// `bench read --model hdd`: the job's reads on the modeled disk.
    #[serde(default)]
    pub model_hdd: Option<fragkit_core::hdd::ModeledIo>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BenchIteration {
    pub bytes: u64,
    pub requests: u64,
    pub seconds: f64,
    /// The device's counters (None when no block device is under the file).
    pub device: Option<BenchDevice>,
    /// The device's counters while the file's mapping was read back before the pass.
    #[serde(default)]
    pub mapping: Option<BenchDevice>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BenchDevice {
    pub reads: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BenchLayout {
    pub split: u64,
}

/// `fragkit defrag --format json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Defrag {
    pub summary: DefragSummary,
    #[serde(default)]
    pub files: Vec<DefragFile>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DefragSummary {
    pub bytes_planned: u64,
    pub bytes_moved: u64,
    pub ranges_moved: u64,
    pub verify_failures: u64,
    pub files_worse: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DefragFile {
    #[serde(default)]
    pub ranges: Vec<DefragRange>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DefragRange {
    pub status: String,
    pub skip: Option<String>,
    pub reason: Option<String>,
}

/// `fragkit age paf --format json`, as the lab report keeps it: the lists of deleted
/// names are replaced by their length (the data file keeps the names).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Paf {
    pub spec: String,
    pub generations: Vec<PafGeneration>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PafGeneration {
    pub files_written: u64,
    pub files_deleted: u64,
    pub used_pct_after_fill: f64,
    pub used_pct_after_delete: f64,
    /// How many files the generation deleted (the child lists their names).
    #[serde(deserialize_with = "count_of_list")]
    pub deleted: u64,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// A list's length, or a number kept as it is (a report read back).
fn count_of_list<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(a) => a.len() as u64,
        v => v.as_u64().unwrap_or(0),
    })
}

/// `fragkit age fragpicker-synthetic --format json`, without the per-file histograms
/// (the data file keeps them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Synthetic {
    pub files: Vec<SyntheticFile>,
    pub rounds: u64,
    pub fragments: u64,
    pub achieved_fragments_per_file: f64,
    pub expected_fragments_per_file: u64,
    pub fragmentor: Fragmentor,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SyntheticFile {
    pub path: PathBuf,
    #[serde(default, skip_serializing)]
    pub frag_sizes: Value,
    #[serde(default, skip_serializing)]
    pub frag_distances: Value,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fragmentor {
    pub ran: bool,
    pub fragments_before: u64,
    pub pieces_moved: u64,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl Synthetic {
    /// The files' names (they all live in one directory).
    pub fn names(&self) -> Vec<String> {
        self.files
            .iter()
            .filter_map(|f| Path::new(&f.path).file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .collect()
    }
}

/// `fragkit free --format json` without its per-group table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Free {
    pub block_size: u64,
    pub free_extents: u64,
    pub max_free_extent_blocks: u64,
    pub mean_free_extent_blocks_exact: f64,
    /// Longest run of free blocks (free extents that touch across group boundaries joined).
    #[serde(default)]
    pub largest_free_run_blocks: u64,
    /// Free extents by size, in power-of-two buckets of blocks.
    #[serde(default)]
    pub histogram: Vec<FreeBucket>,
    #[serde(default, skip_serializing)]
    pub groups: Value,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// One bucket of `fragkit free`'s histogram: free extents of min..=max blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FreeBucket {
    pub min_blocks: u64,
    pub max_blocks: u64,
    pub extents: u64,
    pub blocks: u64,
}

impl Free {
    /// Share of the free blocks in free extents smaller than `bytes`, from the histogram,
    /// and whether it is exact (false: one bucket straddles `bytes`, counted as not
    /// smaller, so the share is a lower bound). None without a histogram.
    pub fn share_below(&self, bytes: u64) -> Option<(f64, bool)> {
        let total: u64 = self.histogram.iter().map(|b| b.blocks).sum();
        if total == 0 || self.block_size == 0 {
            return None;
        }
        let limit = bytes / self.block_size;
        let below: u64 = self
            .histogram
            .iter()
            .filter(|b| b.max_blocks < limit)
            .map(|b| b.blocks)
            .sum();
        let exact = !self
            .histogram
            .iter()
            .any(|b| b.min_blocks < limit && b.max_blocks >= limit && b.blocks > 0);
        Some((below as f64 / total as f64, exact))
    }
}

/// What the lab reports of the trace profile pick mode ran on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TraceSummary {
    pub events: u64,
    pub dropped: u64,
    pub duration_ns: u64,
    pub files: usize,
    pub ranges: usize,
}

impl TraceSummary {
    pub fn of(p: &fragkit_trace::profile::Profile) -> TraceSummary {
        TraceSummary {
            events: p.events,
            dropped: p.dropped,
            duration_ns: p.duration_ns,
            files: p.files.len(),
            ranges: p.files.iter().map(|f| f.ranges.len()).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_sample_parses_and_names_files() {
        let text = r#"{"version":1,"summary":{"files":2,"fragmented_files":2,"bytes":1048576,
            "allocated":1048576,"extents":40,"fragments":38,"layout_score":0.1234,
            "requests":[{"size":131072,"split":30,"ideal":8,"extra":22,"ratio":3.75,"move_bytes":917504}],
            "worst":[]},
            "files":[{"path":"/mnt/x/work/f0","size":524288,"fragments":19,"extents":[]},
                     {"path":"/mnt/x/work/f1","size":524288,"fragments":19}]}"#;
        let s: Scan = parse("scan", text).unwrap();
        assert_eq!(s.summary.requests[0].extra, 22);
        assert_eq!(s.summary.fragments, 38);
        assert_eq!(s.files[1].name().as_deref(), Some("f1"));
    }

    #[test]
    fn a_missing_field_names_the_step() {
        let e = parse::<Scan>("scan (before)", r#"{"summary":{"files":1}}"#).unwrap_err();
        let msg = format!("{e:#}");
        assert!(msg.contains("scan (before)"), "{msg}");
        assert!(msg.contains("bytes"), "{msg}");
        assert!(parse::<Bench>("bench", "not json").is_err());
    }

    #[test]
    fn bench_sample_without_device_counters_parses() {
        let text = r#"{"version":1,"jobs":[{"path":"/m/work/f0","op":"read",
            "iterations":[{"bytes":4096,"requests":1,"seconds":0.5,"mb_per_s":0.0,"device":null}],
            "layout":null}]}"#;
        let b: Bench = parse("bench", text).unwrap();
        assert!(b.jobs[0].iterations[0].device.is_none());
        assert!(b.jobs[0].layout.is_none());
    }

    #[test]
    fn paf_keeps_unknown_fields_and_counts_deleted_names() {
        let text = r#"{"version":1,"spec":"4:75:50","seed":1,"dry_run":false,
            "generations":[{"generation":0,"files_written":10,"files_deleted":3,
              "used_pct_after_fill":75.0,"used_pct_after_delete":40.0,"deleted":["a","b","c"]}]}"#;
        let p: Paf = parse("age paf", text).unwrap();
        assert_eq!(p.generations[0].deleted, 3);
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["generations"][0]["deleted"], 3);
        assert_eq!(v["generations"][0]["generation"], 0);
        assert_eq!(v["seed"], 1);
        // Read back from a report (deleted already a number) it stays the same.
        let again: Paf = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&again).unwrap(), v);
    }

    #[test]
    fn free_share_below_a_size_from_the_histogram() {
        let text = r#"{"block_size":4096,"free_extents":3,"max_free_extent_blocks":70000,
            "mean_free_extent_blocks_exact":1.0,"largest_free_run_blocks":70000,
            "histogram":[{"min_blocks":1,"max_blocks":1,"extents":100,"blocks":100},
                         {"min_blocks":8,"max_blocks":15,"extents":10,"blocks":100},
                         {"min_blocks":65536,"max_blocks":131071,"extents":1,"blocks":70000}]}"#;
        let f: Free = parse("free", text).unwrap();
        // 32 MiB files = 8192 blocks: the first two buckets are smaller, exactly.
        let (share, exact) = f.share_below(32 << 20).unwrap();
        assert!((share - 200.0 / 70200.0).abs() < 1e-12);
        assert!(exact);
        // 40 KiB = 10 blocks: the 8..15 bucket straddles it.
        assert!(!f.share_below(40 << 10).unwrap().1);
        let empty: Free = parse(
            "free",
            r#"{"block_size":4096,"free_extents":0,"max_free_extent_blocks":0,"mean_free_extent_blocks_exact":0.0}"#,
        )
        .unwrap();
        assert_eq!(empty.share_below(1 << 20), None);
    }

    #[test]
    fn synthetic_and_free_drop_their_bulky_parts() {
        let text = r#"{"version":1,"rounds":4,"fragments":132,"file_size":1,
            "achieved_fragments_per_file":33.0,"expected_fragments_per_file":33,
            "fragmentor":{"ran":false,"skipped":"not ext4","fragments_before":0,"pieces_moved":0,"seconds":0.0},
            "files":[{"path":"/m/work/f0","fragments":33,"frag_sizes":{"n":1},"frag_distances":{"n":2}}]}"#;
        let s: Synthetic = parse("age fragpicker-synthetic", text).unwrap();
        assert_eq!(s.names(), vec!["f0".to_string()]);
        let v = serde_json::to_value(&s).unwrap();
        assert!(v["files"][0].get("frag_sizes").is_none());
        assert!(v["files"][0].get("frag_distances").is_none());
        assert_eq!(v["files"][0]["fragments"], 33);
        assert_eq!(v["fragmentor"]["skipped"], "not ext4");

        let text = r#"{"block_size":4096,"free_extents":7,"max_free_extent_blocks":9,
            "mean_free_extent_blocks_exact":2.5,"free_blocks":17,"groups":[{"g":0}]}"#;
        let f: Free = parse("free", text).unwrap();
        let v = serde_json::to_value(&f).unwrap();
        assert!(v.get("groups").is_none());
        assert_eq!(v["free_blocks"], 17);
    }

    #[test]
    fn defrag_sample_reads_skips() {
        let text = r#"{"summary":{"bytes_planned":10,"bytes_moved":5,"ranges_moved":1,
            "verify_failures":0,"files_worse":0,"files_scanned":1},
            "files":[{"path":"/m/f","ranges":[{"offset":0,"length":4096,"status":"skipped",
              "skip":"no_better_space","reason":"no free extent larger","verified":null}]}]}"#;
        let d: Defrag = parse("defrag", text).unwrap();
        assert_eq!(d.summary.bytes_moved, 5);
        assert_eq!(
            d.files[0].ranges[0].skip.as_deref(),
            Some("no_better_space")
        );
    }
}
