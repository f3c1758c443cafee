//! `fragkit lab --app rocksdb`: a real application on an aged file system, defragmented
//! while it runs.
//!
//! scratch → PaF aging → the application builds its database → trace its reads → advise →
//! rounds: per contender (none, pick, bypass, full, the file system's own tool), in
//! rotating order, a fresh block-for-block clone with a device bandwidth ceiling, the
//! application reading from it, the defragmenter started after a measured stretch of the
//! application alone; then a fixed read run on the result (real ops/s and device
//! requests) and the modeled time of the traced profile on it.
//!
//! The application's throughput is sampled from its own progress lines, stamped on arrival
//! with the lab's clock, so the windows before, during and after the defrag are cut at the
//! instants the defrag started and ended. Each round pairs its own before and during.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use fragkit_core::stats::Summary;
use serde::{Deserialize, Serialize};

use super::child::{self, Scan, TraceSummary};
use super::figures::{self, RatioInterval};
use super::flash::{self, FlashLoss, History};
use super::runner::Runner;
use super::{steps, DefragFigures, LabSpec, LayoutFigures, Machine, Scratches};
use fragkit_core::io::device::BlockDevice;
use fragkit_sys::blkio::{DeviceThrottle, ThrottleLimits};
use fragkit_sys::tunable::SysfsTunable;

pub const APP_SCHEMA_VERSION: u32 = 1;

/// The application the lab drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum App {
    /// RocksDB through db_bench (Debian's rocksdb-tools): fillrandom + overwrite build the
    /// database, readrandom with O_DIRECT reads it (YCSB-C, 100% reads, as FragPicker ran).
    Rocksdb,
    /// SQLite through the library: FAST'24's database (`age sqlite`: 10,000 records of
    /// 16 KiB, a dummy file appended and synced between inserts), read by full table scans
    /// (`bench sqlite`).
    Sqlite,
}

/// Bytes per RocksDB value: YCSB's default record (10 fields of 100 B).
const VALUE_SIZE: u64 = 1000;
/// The application alone before the defrag starts, after it has opened the database and
/// run for `WARM`.
const WARM: Duration = Duration::from_secs(1);
const BEFORE: Duration = Duration::from_secs(3);
/// The application alone after the defrag ended; also the "during" window of `none`.
const AFTER: Duration = Duration::from_secs(3);
/// How long the lab waits for the application's first progress line.
const START_LIMIT: Duration = Duration::from_secs(60);
/// The SQLite scans' request size as the fast24 preset's host sends them: its readahead
/// window (128 KiB, the artifact's NVMe; docs/ssd.md).
const SQLITE_REQUEST: &str = "128K";

impl App {
    pub fn name(self) -> &'static str {
        match self {
            App::Rocksdb => "rocksdb",
            App::Sqlite => "sqlite",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            App::Rocksdb => {
                "RocksDB (db_bench 'readrandom', O_DIRECT 4 KiB block reads, one thread) on a database built by fillrandom + overwrite"
            }
            App::Sqlite => {
                "SQLite (the library, through `fragkit bench sqlite`): full table scans of FAST'24's database, its pages dropped from the cache before each scan"
            }
        }
    }

    /// The program that runs the application: db_bench, or fragkit itself (`exe`).
    pub fn program(self, exe: &Path) -> String {
        match self {
            App::Rocksdb => "db_bench".into(),
            App::Sqlite => exe.to_string_lossy().into_owned(),
        }
    }

    /// What the application must have installed, if anything beyond fragkit.
    fn needs(self) -> Option<(&'static str, &'static str)> {
        match self {
            App::Rocksdb => Some(("db_bench", "rocksdb-tools")),
            App::Sqlite => None,
        }
    }

    /// Keys (RocksDB: raw data of a fifth of the file system) or records (SQLite:
    /// FAST'24's 10,000).
    pub fn keys(self, fs_size: u64) -> u64 {
        match self {
            App::Rocksdb => (fs_size / 5 / VALUE_SIZE).max(10_000),
            App::Sqlite => crate::age::sqlite::RECORDS,
        }
    }

    /// `scratch create` arguments: SQLite's file system is made as the FAST'24 artifact's
    /// setdevice.sh makes it (`mkfs.ext4 -m 0`, mounted `nodelalloc`), without its
    /// external journal (a clone would need its journal device too).
    fn scratch_args(self) -> Vec<String> {
        match self {
            App::Rocksdb => Vec::new(),
            App::Sqlite => vec![
                "--mkfs-args".into(),
                "-m 0".into(),
                "--mount-options".into(),
                "nodelalloc".into(),
            ],
        }
    }

    /// How advise prices the application's reads (see `advise_args`).
    fn access(self) -> &'static str {
        match self {
            App::Rocksdb => "the traced profile",
            App::Sqlite => "the whole file read in order in 128 KiB requests",
        }
    }

    /// Whether the lab replays the recorded block requests through the flash model
    /// (FAST'24's measure, [`flash`]): SQLite, whose paper figure is that replay's.
    fn flash_replay(self) -> bool {
        matches!(self, App::Sqlite)
    }

    /// FAST'24's SQLite row: fragmented 531.073 against contiguous 870.044 MB/s.
    fn paper_loss(self) -> Option<f64> {
        match self {
            App::Rocksdb => None,
            App::Sqlite => Some(1.0 - 531.073 / 870.044),
        }
    }

    /// Bytes of one RocksDB value or SQLite record.
    pub fn record_bytes(self) -> u64 {
        match self {
            App::Rocksdb => VALUE_SIZE,
            App::Sqlite => crate::age::sqlite::RECORD_BYTES,
        }
    }

    /// What the application's units are called in a report.
    pub fn unit(self) -> (&'static str, &'static str) {
        match self {
            App::Rocksdb => ("keys", "ops/s"),
            App::Sqlite => ("records", "rows/s"),
        }
    }

    /// What defrag, scan and advise are given under the database directory `db`.
    fn target(self, db: &Path) -> PathBuf {
        match self {
            App::Rocksdb => db.to_path_buf(),
            App::Sqlite => db.join("testdb.db"),
        }
    }

    /// The request size defrag keeps whole. RocksDB reads one table block (db_bench's
    /// 4 KiB before compression) per request, O_DIRECT-aligned to 512 B, so a read crosses
    /// at most one 4 KiB boundary and lies within an 8 KiB window; SQLite's scan is read
    /// ahead in the host's window.
    fn request(self) -> &'static str {
        match self {
            App::Rocksdb => "8K",
            App::Sqlite => SQLITE_REQUEST,
        }
    }

    /// How advise prices the application: RocksDB by its traced profile, SQLite as FAST'24
    /// reads it, the whole file in order at the host's readahead.
    fn advise_args(self, profile: &Path) -> Vec<String> {
        match self {
            App::Rocksdb => vec!["--profile".into(), profile.to_string_lossy().into_owned()],
            App::Sqlite => vec!["--io-size".into(), SQLITE_REQUEST.into()],
        }
    }

    /// Build the database in `db` (a directory) with fragkit `exe` or the application;
    /// SQLite's `contiguous`: without the dummy file (the artifact's contiguous case).
    fn fill_args(self, db: &Path, keys: u64, seed: u64, contiguous: bool) -> Vec<String> {
        let mut args = match self {
            App::Rocksdb => vec![
                format!("--db={}", db.display()),
                format!("--wal_dir={}", db.display()),
                "--benchmarks=fillrandom,overwrite".into(),
                format!("--num={keys}"),
                format!("--value_size={VALUE_SIZE}"),
                format!("--seed={seed}"),
            ],
            App::Sqlite => vec![
                "age".into(),
                "sqlite".into(),
                db.to_string_lossy().into_owned(),
                "--records".into(),
                keys.to_string(),
                "--seed".into(),
                seed.to_string(),
                "--format".into(),
                "json".into(),
            ],
        };
        if contiguous && self == App::Sqlite {
            args.push("--contiguous".into());
        }
        args
    }

    /// Read it: `reads` operations (SQLite: whole scans), or for `duration` seconds,
    /// progress every `stats_every` operations on stderr.
    fn read_args(
        self,
        db: &Path,
        keys: u64,
        seed: u64,
        reads: Option<u64>,
        duration: Option<u64>,
        stats_every: Option<u64>,
    ) -> Vec<String> {
        match self {
            App::Rocksdb => {
                let mut a = vec![
                    format!("--db={}", db.display()),
                    format!("--wal_dir={}", db.display()),
                    "--use_existing_db=1".into(),
                    "--benchmarks=readrandom".into(),
                    "--use_direct_reads=1".into(),
                    // Reads only: no compaction may rewrite the files under the defragmenter.
                    "--disable_auto_compactions=1".into(),
                    format!("--num={keys}"),
                    format!("--seed={seed}"),
                ];
                a.extend(reads.map(|r| format!("--reads={r}")));
                a.extend(duration.map(|d| format!("--duration={d}")));
                a.extend(stats_every.map(|s| format!("--stats_interval={s}")));
                a
            }
            App::Sqlite => {
                let mut a = vec![
                    "bench".into(),
                    "sqlite".into(),
                    self.target(db).to_string_lossy().into_owned(),
                ];
                match (reads, duration) {
                    (_, Some(d)) => a.extend(["--duration".into(), d.to_string()]),
                    (Some(n), None) => a.extend(["--scans".into(), n.to_string()]),
                    (None, None) => {}
                }
                a.extend(
                    stats_every
                        .into_iter()
                        .flat_map(|s| ["--progress".into(), s.to_string()]),
                );
                a
            }
        }
    }

    /// Reads of the fixed read run and the traced run: RocksDB operations, SQLite scans.
    fn fixed_reads(self, keys: u64) -> u64 {
        match self {
            App::Rocksdb => (keys / 20).max(1000),
            App::Sqlite => 2,
        }
    }

    /// ops/s (SQLite: rows/s) from the application's closing line.
    fn ops_per_sec(self, stdout: &str) -> Option<f64> {
        let unit = match self {
            App::Rocksdb => "ops/sec",
            App::Sqlite => "rows/s,",
        };
        stdout.lines().rev().find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let i = w.iter().position(|x| *x == unit)?;
            w.get(i.checked_sub(1)?)?.parse().ok()
        })
    }

    /// Operations (SQLite: rows) done so far, from one progress line, and when by the
    /// application's own clock (seconds since it started), if the line says: db_bench's
    /// "... thread 0: (1000,25000) ops and (...) ops/second in (0.05,1.25) seconds",
    /// bench sqlite's "progress: 25000 rows in 1.250000 s" (or "progress: 25000 rows").
    fn progress(self, line: &str) -> Option<(u64, Option<f64>)> {
        match self {
            App::Rocksdb => {
                let rest = line.split_once("thread ")?.1;
                let inner = rest.split_once('(')?.1.split_once(')')?.0;
                let ops = inner.split_once(',')?.1.trim().parse().ok()?;
                let secs = rest
                    .split_once(" in (")
                    .and_then(|(_, r)| r.split_once(')'))
                    .and_then(|(pair, _)| pair.split_once(','))
                    .and_then(|(_, total)| total.trim().parse::<f64>().ok())
                    .filter(|t| t.is_finite() && *t >= 0.0);
                Some((ops, secs))
            }
            App::Sqlite => {
                let rest = line.strip_prefix("progress: ")?;
                let (rows, secs) = match rest.split_once(" rows in ") {
                    Some((rows, t)) => (
                        rows,
                        t.strip_suffix(" s")
                            .and_then(|t| t.parse::<f64>().ok())
                            .filter(|t| t.is_finite() && *t >= 0.0),
                    ),
                    None => (rest.strip_suffix(" rows")?, None),
                };
                Some((rows.parse().ok()?, secs))
            }
        }
    }
}

/// A device bandwidth ceiling by name: what the scratch device may serve per second.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct IoLimit {
    pub name: String,
    pub read_bytes_per_s: u64,
    pub write_bytes_per_s: u64,
    pub read_iops: u64,
    pub write_iops: u64,
    pub source: String,
}

impl IoLimit {
    /// Samsung 860 EVO (SATA, 250 GB-4 TB) data sheet: sequential read up to 550 MB/s,
    /// write up to 520 MB/s, random 4 KB QD32 read up to 98,000 IOPS, write up to 90,000.
    pub fn sata_ssd() -> IoLimit {
        IoLimit {
            name: "sata-ssd".into(),
            read_bytes_per_s: 550_000_000,
            write_bytes_per_s: 520_000_000,
            read_iops: 98_000,
            write_iops: 90_000,
            source: "Samsung 860 EVO data sheet (550/520 MB/s, 98k/90k IOPS)".into(),
        }
    }

    /// `sata-ssd`, `none`, or `RBPS,WBPS[,RIOPS,WIOPS]` (bytes and requests per second,
    /// K/M/G suffixes for bytes).
    pub fn parse(text: &str) -> Result<Option<IoLimit>, String> {
        match text {
            "none" => return Ok(None),
            "sata-ssd" => return Ok(Some(IoLimit::sata_ssd())),
            _ => {}
        }
        let expected = || {
            format!(
                "--io-limit {text}: expected sata-ssd, none, or READ_BPS,WRITE_BPS[,READ_IOPS,WRITE_IOPS] (e.g. 500M,450M,90000,80000)"
            )
        };
        let parts: Vec<&str> = text.split(',').collect();
        if parts.len() != 2 && parts.len() != 4 {
            return Err(expected());
        }
        let size = |s: &str| fragkit_core::units::parse_size(s).map_err(|_| expected());
        let count = |s: &str| s.parse::<u64>().map_err(|_| expected());
        let l = IoLimit {
            name: text.into(),
            read_bytes_per_s: size(parts[0])?,
            write_bytes_per_s: size(parts[1])?,
            read_iops: parts.get(2).map_or(Ok(0), |s| count(s))?,
            write_iops: parts.get(3).map_or(Ok(0), |s| count(s))?,
            source: "given with --io-limit".into(),
        };
        if l.read_bytes_per_s == 0 || l.write_bytes_per_s == 0 {
            return Err(expected());
        }
        Ok(Some(l))
    }

    fn throttle(&self) -> ThrottleLimits {
        ThrottleLimits {
            read_bps: self.read_bytes_per_s,
            write_bps: self.write_bytes_per_s,
            read_iops: self.read_iops,
            write_iops: self.write_iops,
        }
    }
}

/// How to run the application lab.
#[derive(Debug, Clone)]
pub struct AppSpec {
    /// fs, size, paf, out, keep, scratch_dir, seed and baseline as `fragkit lab` has them.
    pub lab: LabSpec,
    pub app: App,
    pub rounds: u32,
    pub io_limit: Option<IoLimit>,
    /// With two or more CPUs: the application on the last, the defragmenters on the others
    /// ([`CpuSplit`]).
    pub pin: bool,
    /// Clone the base a kept `lab --app rocksdb` run left (its --out directory) instead of
    /// building the database again.
    pub database_from: Option<PathBuf>,
}

/// The base of a kept `lab --app` run in `dir` (its --out): the mounted base, checked
/// against what this run asks for (application, file system, size, PaF, seed).
fn kept_base(dir: &Path, app: App, lab: &LabSpec) -> Result<PathBuf> {
    let what = || format!("--database-from {}", dir.display());
    let text = fs::read_to_string(dir.join("report.json")).with_context(|| {
        format!(
            "{}: expected the --out directory of `fragkit lab --app {} --keep`",
            what(),
            app.name()
        )
    })?;
    let kept: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: report.json is not a lab --app report", what()))?;
    let field = |k: &str| kept.get(k).cloned().unwrap_or(serde_json::Value::Null);
    for (key, want) in [
        ("app", serde_json::json!(app.name())),
        ("fs", serde_json::json!(lab.fs.name())),
        ("size", serde_json::json!(lab.size)),
        ("paf", serde_json::json!(lab.paf)),
        ("seed", serde_json::json!(lab.seed)),
    ] {
        if field(key) != want {
            bail!(
                "{}: that run's {key} is {}, this one asks for {want}",
                what(),
                field(key)
            );
        }
    }
    let base = kept
        .pointer("/variables/BASE")
        .and_then(|b| b.as_str())
        .map(PathBuf::from)
        .ok_or_else(|| anyhow!("{}: its report names no base", what()))?;
    if !fragkit_sys::mountinfo::is_mount_point(&base) {
        bail!(
            "{}: its base {} is not mounted (expected a run made with --keep, not torn down since)",
            what(),
            base.display()
        );
    }
    Ok(base)
}

/// Which CPUs the application and the defragmenters ran on (taskset -c). On a machine of
/// two CPUs left to the scheduler, db_bench alone switched between two rates (about 3,800
/// and 5,800 operations/s) at random moments, and a defragmenter on the application's CPU
/// competes with it for that CPU, which is not how a drive interferes (docs/lab.md).
#[derive(Debug, Clone, Serialize)]
pub struct CpuSplit {
    pub application: usize,
    pub defragmenters: Vec<usize>,
}

impl CpuSplit {
    /// The split of the CPUs this process may run on; None with fewer than two, or
    /// without taskset.
    fn of_this_machine() -> Option<CpuSplit> {
        let mut cpus = fragkit_sys::affinity::allowed_cpus()?;
        if cpus.len() < 2 || !super::tool_available("taskset") {
            return None;
        }
        let application = cpus.pop()?;
        Some(CpuSplit {
            application,
            defragmenters: cpus,
        })
    }

    /// taskset's CPU list for the defragmenters.
    fn defragmenter_list(&self) -> String {
        let cpus: Vec<String> = self.defragmenters.iter().map(|c| c.to_string()).collect();
        cpus.join(",")
    }

    /// `program args` as run on the application's CPU.
    fn application_command(&self, program: &str, args: &[String]) -> (String, Vec<String>) {
        let mut a = vec![
            "-c".to_string(),
            self.application.to_string(),
            program.to_string(),
        ];
        a.extend(args.iter().cloned());
        ("taskset".to_string(), a)
    }
}

/// One contender in one round.
#[derive(Debug, Clone, Serialize)]
pub struct AppRound {
    pub round: u32,
    /// The application's ops/s alone just before the defrag, while it ran, and just after.
    pub before_ops_per_s: f64,
    pub during_ops_per_s: f64,
    pub after_ops_per_s: f64,
    /// during ÷ before of this round.
    pub during_ratio: f64,
    /// Operations the application did not do because the defrag ran:
    /// (before − during) × the defrag's seconds (negative: it did more).
    pub ops_lost: f64,
    /// The defrag's window in seconds since the application's first progress line.
    pub defrag_start_s: f64,
    pub defrag_end_s: f64,
    /// What the defragmenter did (none: no defrag).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defrag: Option<DefragFigures>,
    /// The defragmenter's exit status (fragkit defrag 1: some ranges skipped; e4defrag 1:
    /// some file refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defrag_exit: Option<i32>,
    /// The fixed read run on the result, caches dropped: ops/s and the device's reads.
    pub read_ops_per_s: f64,
    pub read_requests: u64,
    pub read_bytes: u64,
    /// The traced profile priced on the result (fast24 model), ns.
    pub modeled_ns: u64,
    /// The fixed read run's MB/s replayed on `fast24` after the build's and the defrag's
    /// writes (write order, [`flash`]); SQLite only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed_mb_s: Option<f64>,
    /// (seconds since the defrag started, ops/s) every progress line.
    pub series: Vec<(f64, f64)>,
}

/// One contender over all rounds.
#[derive(Debug, Clone, Serialize)]
pub struct Contender {
    pub name: String,
    /// The defrag command as run (shown with the lab's variables), none for `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub rounds: Vec<AppRound>,
    /// during ÷ before per round: its median and sign-test interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub during_ratio: Option<RatioInterval>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defrag_seconds: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_bytes_written: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_ops_per_s: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_requests: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modeled_ms: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed_mb_s: Option<Summary>,
}

/// A contender against the file system's own tool, paired by round.
#[derive(Debug, Clone, Serialize)]
pub struct VersusTool {
    pub contender: String,
    pub tool: String,
    /// Bytes the device wrote during the defrag: contender ÷ tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_written: Option<Summary>,
    /// The application's slowdown (1 − during ÷ before): contender ÷ tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<Summary>,
    /// The defrag's time: contender ÷ tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<Summary>,
    /// Device read requests of the fixed read run after: contender ÷ tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_requests: Option<Summary>,
    /// The application's operations lost to the defrag (slowdown × its time): contender ÷
    /// tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops_lost: Option<Summary>,
}

/// What `fragkit advise` said before anything moved.
#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    pub device: String,
    pub answer: String,
    pub now_ns: u64,
    pub contiguous_ns: u64,
    pub excess_ns: u64,
    pub bytes_to_move: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AppReport {
    pub version: u32,
    pub started_utc: String,
    pub seconds: f64,
    pub app: App,
    pub app_description: String,
    pub fs: String,
    pub size: u64,
    pub paf: String,
    pub seed: u64,
    /// The request size defrag kept whole and scan counted at.
    pub request_size: u64,
    /// How advise priced the application's reads.
    pub access: String,
    /// The published loss of throughput to this layout, where there is one (FAST'24's
    /// SQLite: 870.044 → 531.073 MB/s).
    pub paper_loss: Option<f64>,
    /// The same loss measured as FAST'24 did: recorded requests replayed on `fast24` in
    /// write order (SQLite).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flash: Option<FlashLoss>,
    /// RocksDB keys or SQLite records, and the bytes of each value or record.
    pub keys: u64,
    pub value_size: u64,
    pub rounds: u32,
    /// The device ceiling every round ran under (none: the RAM-backed loop device as is).
    pub io_limit: Option<IoLimit>,
    /// How the ceiling was applied.
    pub io_limit_how: String,
    /// Where the application and the defragmenters ran; None: where the scheduler put them.
    pub cpus: Option<CpuSplit>,
    /// The kept run whose database was cloned instead of built (--database-from).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_from: Option<PathBuf>,
    pub machine: Machine,
    /// The database as the application left it, before any defrag.
    pub database: LayoutFigures,
    pub trace: TraceSummary,
    pub advice: Vec<Advice>,
    /// advise's own fix carried out (`advise --apply`) on a fresh clone with the
    /// application stopped, per device: predicted against achieved.
    pub advise_applied: Vec<AdviseApplied>,
    pub contenders: Vec<Contender>,
    pub versus_tool: Vec<VersusTool>,
    /// The interference chart, relative to the output directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chart: Option<String>,
    pub steps: Vec<super::runner::StepRecord>,
    pub variables: BTreeMap<String, PathBuf>,
    pub notes: Vec<String>,
}

/// One progress line: when it arrived, the operations done, and when the application
/// says it printed it (seconds on its own clock).
type Progress = (Instant, u64, Option<f64>);

/// The application running in the background: its progress lines stamped on arrival.
struct Running {
    child: Child,
    samples: Arc<Mutex<Vec<Progress>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn start(
        app: App,
        program: &str,
        args: &[String],
        log: &Path,
        stdout: &Path,
    ) -> Result<Running> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(fs::File::create(stdout)?))
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| anyhow!("{program}: cannot run: {e}"))?;
        let pipe = child.stderr.take().context("application's stderr")?;
        let samples = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&samples);
        let mut log = fs::File::create(log)?;
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let now = Instant::now();
                let _ = writeln!(log, "{line}");
                if let Some((ops, secs)) = app.progress(&line) {
                    if let Ok(mut s) = seen.lock() {
                        s.push((now, ops, secs));
                    }
                }
            }
        });
        Ok(Running {
            child,
            samples,
            reader: Some(reader),
        })
    }

    /// Wait for the first progress line (the database is open and reading).
    fn started(&mut self, stop: &dyn Fn() -> bool) -> Result<Instant> {
        let t = Instant::now();
        loop {
            if let Some(first) = self.samples.lock().ok().and_then(|s| s.first().copied()) {
                return Ok(first.0);
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("the application ended before its first progress line ({status})");
            }
            if t.elapsed() > START_LIMIT || stop() {
                bail!("the application showed no progress within {START_LIMIT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait (at most `limit`, or until `stop`) for a progress line stamped after `t`, so the
    /// windows that end at `t` are covered also when the application slowed down.
    fn progress_past(&mut self, t: Instant, limit: Duration, stop: &dyn Fn() -> bool) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline && !stop() {
            let past = self
                .samples
                .lock()
                .ok()
                .and_then(|s| s.last().map(|l| l.0 > t))
                .unwrap_or(false);
            if past || matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stop the application; its progress on the lab's clock (see [`on_lab_clock`]).
    fn stop(mut self) -> Vec<(Instant, u64)> {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        on_lab_clock(&self.samples.lock().map(|s| s.clone()).unwrap_or_default())
    }
}

/// Progress lines placed on the lab's clock. A line reaches the lab some time after the
/// application printed it (pipe, scheduling: on two busy cores up to 100 ms, and lines
/// then arrive in bursts), so arrival stamps make rates over short windows wrong. When every
/// line carries the application's own clock, each is placed at the application's start
/// plus its own time; the start is the earliest arrival minus own time over all lines (the
/// least-delayed line), an upper bound on the true start by at most that line's delay.
fn on_lab_clock(lines: &[Progress]) -> Vec<(Instant, u64)> {
    let own: Option<Vec<Duration>> = lines
        .iter()
        .map(|l| l.2.and_then(|t| Duration::try_from_secs_f64(t).ok()))
        .collect();
    let start = own.as_ref().and_then(|own| {
        lines
            .iter()
            .zip(own)
            .filter_map(|(l, t)| l.0.checked_sub(*t))
            .min()
    });
    match (own, start) {
        (Some(own), Some(start)) => lines
            .iter()
            .zip(own)
            .map(|(l, t)| (start.checked_add(t).unwrap_or(l.0), l.1))
            .collect(),
        _ => lines.iter().map(|l| (l.0, l.1)).collect(),
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.reader.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Operations done at instant `t`, linear between progress lines.
fn ops_at(samples: &[(f64, u64)], t: f64) -> Option<f64> {
    let i = samples.partition_point(|s| s.0 < t);
    match samples.get(i) {
        Some(s) if s.0 == t => return Some(s.1 as f64),
        None => return None,
        _ if i == 0 => return None,
        _ => {}
    }
    let (t0, o0) = samples[i - 1];
    let (t1, o1) = samples[i];
    let f = if t1 > t0 { (t - t0) / (t1 - t0) } else { 0.0 };
    Some(o0 as f64 + f * (o1 as f64 - o0 as f64))
}

/// ops/s between `a` and `b` (seconds on the samples' clock).
pub fn rate(samples: &[(f64, u64)], a: f64, b: f64) -> Option<f64> {
    if b <= a {
        return None;
    }
    Some((ops_at(samples, b)? - ops_at(samples, a)?) / (b - a))
}

/// The contenders, `none` first, then pick, bypass, full and the tool.
fn contender_names(tool: Option<&str>) -> Vec<String> {
    let mut v: Vec<String> = ["none", "pick", "bypass", "full"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.extend(tool.map(str::to_string));
    v
}

/// The traced profile with `from` (the traced mount) replaced by `to` in every path and the
/// device numbers dropped, so defrag and advise find the clone's files by path.
fn retarget_profile(
    profile: &Path,
    from: &Path,
    to: &Path,
    dev: Option<&str>,
    out: &Path,
) -> Result<()> {
    let text = fs::read_to_string(profile)
        .with_context(|| format!("{}: cannot read", profile.display()))?;
    let mut v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a trace profile", profile.display()))?;
    let files = v
        .get_mut("files")
        .and_then(|f| f.as_array_mut())
        .ok_or_else(|| anyhow!("{}: no files in the profile", profile.display()))?;
    for f in files {
        if let Some(obj) = f.as_object_mut() {
            if let Some(p) = obj.get("path").and_then(|p| p.as_str()) {
                let moved = Path::new(p)
                    .strip_prefix(from)
                    .map(|rel| to.join(rel))
                    .unwrap_or_else(|_| PathBuf::from(p));
                obj.insert(
                    "path".into(),
                    serde_json::Value::String(moved.to_string_lossy().into_owned()),
                );
            }
            match dev {
                Some(d) => obj.insert("dev".into(), serde_json::Value::String(d.into())),
                None => obj.remove("dev"),
            };
        }
    }
    fs::write(out, serde_json::to_string(&v)? + "\n")
        .with_context(|| format!("{}: cannot write", out.display()))
}

#[derive(Deserialize)]
struct AdviseOut {
    advice: AdviseBody,
}

#[derive(Deserialize)]
struct AdviseBody {
    device: String,
    answer: String,
    totals: AdviseTotals,
}

#[derive(Deserialize)]
struct AdviseTotals {
    now_ns: u64,
    contiguous_ns: u64,
    excess_ns: u64,
    bytes_to_move: u64,
}

/// `fragkit advise TARGET HOW... --device DEVICE`, its JSON in data/`output`.
fn advise(
    r: &mut Runner,
    name: &str,
    target: &Path,
    how: &[String],
    device: &str,
    output: &str,
) -> Result<Advice> {
    let mut args = vec!["advise".into(), target.to_string_lossy().into_owned()];
    args.extend(how.iter().cloned());
    args.extend([
        "--device".into(),
        device.into(),
        "--format".into(),
        "json".into(),
    ]);
    let text = r.fragkit(name, &args, Some(output))?;
    let a: AdviseOut = child::parse(name, &text)?;
    Ok(Advice {
        device: a.advice.device,
        answer: a.advice.answer,
        now_ns: a.advice.totals.now_ns,
        contiguous_ns: a.advice.totals.contiguous_ns,
        excess_ns: a.advice.totals.excess_ns,
        bytes_to_move: a.advice.totals.bytes_to_move,
    })
}

/// The per-contender summaries over its rounds.
fn summarize(name: String, command: Option<String>, rounds: Vec<AppRound>) -> Contender {
    let col = |f: &dyn Fn(&AppRound) -> Option<f64>| -> Vec<f64> {
        rounds.iter().filter_map(f).collect()
    };
    let ratios = col(&|r| Some(r.during_ratio));
    Contender {
        name,
        command,
        during_ratio: figures::sign_test_interval(&ratios),
        defrag_seconds: Summary::of_finite(&col(&|r| r.defrag.as_ref().map(|d| d.seconds))),
        device_bytes_written: Summary::of_finite(&col(&|r| {
            r.defrag.as_ref().map(|d| d.device_bytes_written as f64)
        })),
        read_ops_per_s: Summary::of_finite(&col(&|r| Some(r.read_ops_per_s))),
        read_requests: Summary::of_finite(&col(&|r| Some(r.read_requests as f64))),
        modeled_ms: Summary::of_finite(&col(&|r| Some(r.modeled_ns as f64 / 1e6))),
        replayed_mb_s: Summary::of_finite(&col(&|r| r.replayed_mb_s)),
        rounds,
    }
}

/// Each contender against the tool, paired by round.
pub fn versus_tool(contenders: &[Contender], tool: &str) -> Vec<VersusTool> {
    let Some(t) = contenders.iter().find(|c| c.name == tool) else {
        return Vec::new();
    };
    let by_round = |c: &Contender, f: &dyn Fn(&AppRound) -> Option<f64>| -> Vec<f64> {
        c.rounds
            .iter()
            .filter_map(|r| {
                let tr = t.rounds.iter().find(|x| x.round == r.round)?;
                // A round the tool refused (e4defrag: the file is locked) is no pair.
                if tr.defrag_exit != Some(0) {
                    return None;
                }
                let (a, b) = (f(r)?, f(tr)?);
                (b > 0.0).then_some(a / b)
            })
            .collect()
    };
    contenders
        .iter()
        .filter(|c| c.name != tool && c.name != "none")
        .map(|c| VersusTool {
            contender: c.name.clone(),
            tool: tool.to_string(),
            bytes_written: Summary::of_finite(&by_round(c, &|r| {
                r.defrag.as_ref().map(|d| d.device_bytes_written as f64)
            })),
            // Not clamped at 0: a slowdown inside the control's noise may come out negative.
            slowdown: Summary::of_finite(&by_round(c, &|r| Some(1.0 - r.during_ratio))),
            seconds: Summary::of_finite(&by_round(c, &|r| r.defrag.as_ref().map(|d| d.seconds))),
            read_requests: Summary::of_finite(&by_round(c, &|r| Some(r.read_requests as f64))),
            ops_lost: Summary::of_finite(&by_round(c, &|r| Some(r.ops_lost))),
        })
        .collect()
}

pub fn run(spec: &AppSpec) -> Result<AppReport> {
    fragkit_core::scratch::require_root("fragkit lab --app")?;
    if spec.rounds == 0 {
        bail!("--rounds 0: expected at least one round");
    }
    let app = spec.app;
    if let Some((program, package)) = app.needs() {
        if !super::tool_available(program) {
            bail!(
                "--app {}: {program} is not installed (Debian: apt-get install {package})",
                app.name()
            );
        }
    }
    let io_limit_how = match &spec.io_limit {
        Some(_) => {
            if fragkit_sys::blkio::root().is_none() {
                bail!("--io-limit: this machine has no cgroup v1 blkio hierarchy with throttling (the lab limits the scratch loop device through blkio.throttle.*_device in its root group); use --io-limit none");
            }
            "cgroup v1 blkio throttle (blkio.throttle.{read,write}_{bps,iops}_device) on each clone's loop device in the root group: every request to the device counts, the file system's writeback included; reads and writes have separate budgets, as in io.max".to_string()
        }
        None => "none: the RAM-backed loop device as it is; the application and the defragmenter compete for CPU, not for a device's bandwidth".to_string(),
    };
    let lab = &spec.lab;
    let kept = match &spec.database_from {
        Some(dir) => {
            if app.flash_replay() {
                bail!("--database-from: only with --app rocksdb (SQLite's loss is measured from the build's own recording)");
            }
            let same = std::path::absolute(dir).ok() == std::path::absolute(&lab.out).ok();
            if same {
                bail!(
                    "--database-from {}: the same directory as --out; give this run another --out",
                    dir.display()
                );
            }
            Some((dir.as_path(), kept_base(dir, app, lab)?))
        }
        None => None,
    };
    super::prepare_out(&lab.out)?;
    let out = lab.out.canonicalize()?;
    let t0 = Instant::now();
    let started_utc = super::utc_now();
    let tool = if lab.baseline {
        figures::baseline_tool(lab.fs).filter(|(p, _)| super::tool_available(p))
    } else {
        None
    };
    let names = contender_names(tool.as_ref().map(|t| t.0));
    let per_round = names.len() as u64 * 4;
    let mut r = Runner::new(&out, 7 + per_round * spec.rounds as u64)?;
    let mut notes = Vec::new();
    let (images, images_made, in_ram) = super::images_dir(lab, 2)?;
    r.define("IMAGES", &images);
    let mut scratches = Scratches {
        exe: r.exe().to_path_buf(),
        mounts: Vec::new(),
        keep: lab.keep,
        images: images_made.then(|| images.clone()),
        dirs: vec![images.join("base")],
    };
    let cpus = if spec.pin {
        CpuSplit::of_this_machine()
    } else {
        None
    };
    match &cpus {
        Some(c) => notes.push(format!(
            "While it was measured, the application ran on CPU {} and each defragmenter on CPU {} (taskset -c), so that they meet at the device and the file, not on one CPU; the kernel's threads (the loop device's worker, writeback, the journal) ran where the scheduler put them.",
            c.application,
            c.defragmenter_list()
        )),
        None if spec.pin => notes.push("Fewer than two CPUs (or no taskset): the application and the defragmenters shared the CPUs.".into()),
        None => {}
    }
    if in_ram && spec.io_limit.is_none() {
        notes.push("The scratch images are in RAM and no --io-limit was set: the defragmenter slows the application only through CPU and kernel locks, not through a device's bandwidth.".into());
    }

    // 1. Scratch, aged with PaF, then the application's database (or a clone of one a
    // kept run built).
    let base_info = match &kept {
        Some((dir, kept)) => {
            notes.push(format!(
                "The database was not built here: the base is a block-for-block clone of the one kept by the run in {} (--database-from).",
                dir.display()
            ));
            steps::clone_scratch(&mut r, kept, &images, "BASE")?
        }
        None => steps::create_base(&mut r, lab, &images, &app.scratch_args())?,
    };
    let base = base_info.mountpoint.clone();
    scratches.mounts.push(base.clone());
    r.define("BASE", &base);
    if lab.paf != figures::NO_PAF && kept.is_none() {
        steps::age_paf(&mut r, lab, &base)?;
    }
    let keys = app.keys(lab.size);
    let program = app.program(r.exe());
    let db = base.join("db");
    let target = app.target(&db);
    // SQLite: the build and a cold read recorded for the flash model, the device as the
    // modeled drive's host would drive it.
    let database_build = Build {
        app,
        program: &program,
        db: &db,
        keys,
        seed: lab.seed,
        contiguous: false,
    };
    let mut build = None;
    if app.flash_replay() {
        let dev = BlockDevice::for_path(&base)?;
        let limits = flash::as_modeled_drive(&dev)?;
        build = Some(recorded_build(&mut r, &database_build, &dev)?);
        drop(limits);
    } else if kept.is_none() {
        fill(&mut r, &database_build)?;
    }
    let text = r.fragkit(
        "scan (database)",
        &[
            "scan".into(),
            "--format".into(),
            "json".into(),
            "-r".into(),
            app.request().into(),
            target.to_string_lossy().into_owned(),
        ],
        Some("scan-database.json"),
    )?;
    let scan: Scan = child::parse("scan", &text)?;
    let database = figures::layout_figures("scan (database)", &scan)?;

    // 2. Trace the application's reads: the profile pick moves by and advise prices.
    let profile = out.join("data/profile.json");
    let reads = app.fixed_reads(keys);
    let mut targs = vec![
        "trace".into(),
        "--mount".into(),
        base.to_string_lossy().into_owned(),
        "-o".into(),
        profile.to_string_lossy().into_owned(),
        "--".into(),
        program.clone(),
    ];
    targs.extend(app.read_args(&db, keys, lab.seed + 1, Some(reads), None, None));
    // A kept run's database comes with its trace: the clone is the base as that run's
    // rounds found it (the trace's own db_bench run changed it: RocksDB flushes its log
    // when it opens the database), and its profile is the one they were moved by.
    let traced = match &kept {
        Some((dir, kept)) => {
            let t = Instant::now();
            // A block-for-block clone: the same inodes on the clone's device.
            let (major, minor) =
                fragkit_sys::dev::split(std::os::unix::fs::MetadataExt::dev(&fs::metadata(&base)?));
            let dev = format!("{major}:{minor}");
            retarget_profile(
                &dir.join("data/profile.json"),
                kept,
                &base,
                Some(&dev),
                &profile,
            )?;
            let traced = fs::read_to_string(dir.join("data/trace-app.out")).with_context(|| {
                format!("--database-from {}: its data/trace-app.out", dir.display())
            })?;
            fs::write(out.join("data/trace-app.out"), &traced)?;
            r.record(
                "trace application (the kept run's)",
                format!(
                    "# the profile and trace output of {}, its paths moved to the clone",
                    dir.display()
                ),
                t.elapsed().as_secs_f64(),
                Some("trace-app.out"),
            );
            traced
        }
        None => r.fragkit("trace application", &targs, Some("trace-app.out"))?,
    };
    let trace = TraceSummary::of(&fragkit_trace::profile::Profile::load(&profile)?);
    if trace.files == 0 {
        bail!("the trace saw no reads of the database's files");
    }
    // Progress about 20 times a second at the traced speed.
    let traced_rate = app.ops_per_sec(&traced).unwrap_or(20_000.0);
    let stats_every = ((traced_rate / 20.0) as u64).max(50);
    let mut advice = Vec::new();
    for device in [super::MODEL, super::DISK_MODEL] {
        advice.push(advise(
            &mut r,
            &format!("advise ({device})"),
            &target,
            &app.advise_args(&profile),
            device,
            &format!("advise-{device}.json"),
        )?);
    }

    // The contiguous database FAST'24 compares with, built and read the same way.
    let flash_loss = match &build {
        Some((h, read)) => {
            let mut fragmented = h.clone();
            fragmented.push_all(read);
            let contiguous =
                contiguous_reference(&mut r, lab, app, &images, &program, keys, &mut scratches)?;
            Some(FlashLoss::new(&fragmented, &contiguous)?)
        }
        None => None,
    };
    if flash_loss.as_ref().is_some_and(|f| f.dropped_events > 0) {
        notes.push("The block recorder lost events while the database was built or read: the replayed figures miss those requests.".into());
    }

    // 3. Rounds: every contender once per round, in rotating order, each on a fresh clone.
    let setup = RoundSetup {
        build: build.as_ref().map(|b| &b.0),
        base: &base,
        images: &images,
        profile: &profile,
        keys,
        reads,
        stats_every,
        tool: tool.as_ref(),
        cpus: cpus.as_ref(),
    };
    let mut results: BTreeMap<String, (Option<String>, Vec<AppRound>)> = BTreeMap::new();
    for k in 0..spec.rounds {
        for i in 0..names.len() {
            let name = &names[(k as usize + i) % names.len()];
            let round = run_round(
                &mut r,
                spec,
                &setup,
                name,
                k + 1,
                &mut scratches,
                &mut notes,
            )?;
            let entry = results.entry(name.clone()).or_default();
            entry.0 = entry.0.take().or(round.1);
            entry.1.push(round.0);
        }
    }
    // 4. advise's fix, carried out on a fresh clone per device: is advise right?
    let mut advise_applied = Vec::new();
    for device in [super::MODEL, super::DISK_MODEL] {
        advise_applied.push(apply_advice(&mut r, app, &setup, device, &mut scratches)?);
    }
    let mut contenders: Vec<Contender> = names
        .iter()
        .filter_map(|n| {
            let (command, rounds) = results.remove(n)?;
            Some(summarize(n.clone(), command, rounds))
        })
        .collect();
    for c in &mut contenders {
        c.rounds.sort_by_key(|r| r.round);
    }
    let versus = tool
        .as_ref()
        .map(|t| versus_tool(&contenders, t.0))
        .unwrap_or_default();
    notes.sort();
    notes.dedup();
    let variables: BTreeMap<String, PathBuf> = r.variables().into_iter().collect();
    r.finish();
    drop(scratches);
    Ok(AppReport {
        version: APP_SCHEMA_VERSION,
        started_utc,
        seconds: t0.elapsed().as_secs_f64(),
        app,
        app_description: app.describe().into(),
        fs: lab.fs.name().into(),
        size: lab.size,
        paf: lab.paf.clone(),
        seed: lab.seed,
        keys,
        value_size: app.record_bytes(),
        request_size: fragkit_core::units::parse_size(app.request()).unwrap_or(0),
        access: app.access().into(),
        paper_loss: app.paper_loss(),
        flash: flash_loss,
        rounds: spec.rounds,
        io_limit: spec.io_limit.clone(),
        io_limit_how,
        cpus,
        database_from: spec.database_from.clone(),
        machine: super::machine(&base_info.dir),
        database,
        trace,
        advice,
        advise_applied,
        contenders,
        versus_tool: versus,
        chart: None,
        steps: r.steps.clone(),
        variables,
        notes,
    })
}

/// One database to build: by whom, where, how many keys, and (SQLite) whether without
/// the dummy file.
struct Build<'a> {
    app: App,
    program: &'a str,
    db: &'a Path,
    keys: u64,
    seed: u64,
    contiguous: bool,
}

/// Build the database. SQLite's is FAST'24's, made under the artifact's writeback
/// settings (disablemeta.sh), which the fragmentation depends on.
fn fill(r: &mut Runner, b: &Build) -> Result<()> {
    let Build {
        app,
        program,
        db,
        keys,
        seed,
        contiguous,
    } = *b;
    let (name, output) = match contiguous {
        false => (format!("{} fill", app.name()), "app-fill.out"),
        true => (
            format!("{} fill (contiguous)", app.name()),
            "app-fill-contiguous.out",
        ),
    };
    let output = Some(output);
    let args = app.fill_args(db, keys, seed, contiguous);
    match app {
        App::Rocksdb => r.tool(&name, program, &args, output, &[0])?,
        App::Sqlite => {
            fs::create_dir_all(db).with_context(|| format!("{}: cannot create", db.display()))?;
            // setdevice.sh's allocator settings and disablemeta.sh's writeback, put back
            // afterwards: every file allocates from the per-CPU group, so the database's
            // pages and the dummy's interleave at each synced insert.
            let mut set = crate::bench::fast24::artifact_writeback()?;
            for (knob, value) in [("reserved_clusters", "0"), ("mb_stream_req", "4200000000")] {
                set.extend(
                    SysfsTunable::set(db, knob, value)
                        .with_context(|| format!("setting ext4 {knob} to {value}"))?,
                );
            }
            let out = r.fragkit(&name, &args, output)?;
            drop(set);
            out
        }
    };
    Ok(())
}

/// Build the database with the device's block requests recorded (its file system synced
/// before the recording ends, so what the build left dirty is in it), then the fixed read
/// run on it, cold, recorded: the build's writes as a history, and the read's trace.
fn recorded_build(
    r: &mut Runner,
    b: &Build,
    dev: &BlockDevice,
) -> Result<(History, fragkit_core::ssd::BlockTrace)> {
    let (app, db) = (b.app, b.db);
    let path = dev.dev_path();
    let (t, built) = fragkit_trace::block::record_during(&path, || {
        fill(r, b)?;
        fragkit_sys::sync::syncfs(db)
    })?;
    built?;
    let mut h = History::for_device(dev)?;
    h.push_writes(&t);
    fragkit_core::io::job::drop_caches()?;
    let tag = if b.contiguous { "contiguous" } else { "base" };
    let reads = app.fixed_reads(b.keys);
    let args = app.read_args(db, b.keys, b.seed + 1, Some(reads), None, None);
    let (read, done) = fragkit_trace::block::record_during(&path, || {
        r.tool(
            &format!("{} read ({tag}, recorded)", app.name()),
            b.program,
            &args,
            Some(&format!("app-read-{tag}.out")),
            &[0],
        )
    })?;
    done?;
    Ok((h, read))
}

/// FAST'24's contiguous case on its own scratch file system made as the base: the
/// database built without the dummy file and read, both recorded ([`recorded_build`]);
/// the scratch is destroyed afterwards.
fn contiguous_reference(
    r: &mut Runner,
    lab: &LabSpec,
    app: App,
    images: &Path,
    program: &str,
    keys: u64,
    scratches: &mut Scratches,
) -> Result<History> {
    scratches.dirs.push(images.join("contiguous"));
    let info = steps::create_scratch(r, lab, images, "contiguous", &app.scratch_args())?;
    let mp = info.mountpoint;
    scratches.mounts.push(mp.clone());
    r.define("CONTIGUOUS", &mp);
    let db = mp.join("db");
    let dev = BlockDevice::for_path(&mp)?;
    let limits = flash::as_modeled_drive(&dev)?;
    let build = Build {
        app,
        program,
        db: &db,
        keys,
        seed: lab.seed,
        contiguous: true,
    };
    let (mut h, read) = recorded_build(r, &build, &dev)?;
    drop(limits);
    h.push_all(&read);
    destroy_clone(r, &mp, "contiguous", scratches)?;
    Ok(h)
}

/// `advise --apply` against what it predicted, from its own JSON.
#[derive(Debug, Clone, Serialize)]
pub struct AdviseApplied {
    pub device: String,
    /// Files it acted on, and the fixes it chose.
    pub files: usize,
    pub fixes: Vec<String>,
    pub predicted_bytes: u64,
    pub moved_bytes: u64,
    /// What the device wrote during the runs (metadata and journal included).
    pub device_written_bytes: u64,
    pub predicted_ns: u64,
    pub achieved_ns: u64,
}

#[derive(Deserialize)]
struct ApplyOut {
    applied: Option<ApplyBody>,
}

#[derive(Deserialize)]
struct ApplyBody {
    files: Vec<ApplyFile>,
    predicted_bytes: u64,
    moved_bytes: u64,
    device_written_bytes: u64,
    predicted_ns: u64,
    achieved_ns: u64,
}

#[derive(Deserialize)]
struct ApplyFile {
    fix: String,
}

/// A fresh clone, `advise --apply` on it (the application stopped), the clone destroyed.
fn apply_advice(
    r: &mut Runner,
    app: App,
    s: &RoundSetup,
    device: &str,
    scratches: &mut Scratches,
) -> Result<AdviseApplied> {
    let (mp, profile) = s.fresh_clone(r, scratches, &format!("advise-{device}"))?;
    let target = app.target(&mp.join("db"));
    let mut args = vec!["advise".into(), target.to_string_lossy().into_owned()];
    args.extend(app.advise_args(&profile));
    args.extend([
        "--device".into(),
        device.into(),
        "--apply".into(),
        "--format".into(),
        "json".into(),
    ]);
    let name = format!("advise --apply ({device})");
    // 1: some file skipped or refused, listed in its report.
    let text = r.fragkit_report(&name, &args, Some(&format!("advise-apply-{device}.json")))?;
    let out: ApplyOut = child::parse(&name, &text)?;
    destroy_clone(r, &mp, &format!("advise --apply, {device}"), scratches)?;
    let a = out
        .applied
        .ok_or_else(|| anyhow!("{name}: its report has no 'applied' section"))?;
    let mut fixes: Vec<String> = a.files.iter().map(|f| f.fix.clone()).collect();
    fixes.sort();
    fixes.dedup();
    Ok(AdviseApplied {
        device: device.into(),
        files: a.files.len(),
        fixes,
        predicted_bytes: a.predicted_bytes,
        moved_bytes: a.moved_bytes,
        device_written_bytes: a.device_written_bytes,
        predicted_ns: a.predicted_ns,
        achieved_ns: a.achieved_ns,
    })
}

struct RoundSetup<'a> {
    /// The build's recorded writes, when the rounds are replayed on the flash model.
    build: Option<&'a History>,
    base: &'a Path,
    images: &'a Path,
    profile: &'a Path,
    keys: u64,
    reads: u64,
    stats_every: u64,
    tool: Option<&'a (&'static str, Vec<String>)>,
    cpus: Option<&'a CpuSplit>,
}

impl RoundSetup<'_> {
    /// A block-for-block clone of the base (mounted as $CLONE) and the traced profile
    /// retargeted to it, saved as data/profile-`tag`.json.
    fn fresh_clone(
        &self,
        r: &mut Runner,
        scratches: &mut Scratches,
        tag: &str,
    ) -> Result<(PathBuf, PathBuf)> {
        scratches.dirs.push(self.images.join("clone"));
        let info = steps::clone_scratch(r, self.base, self.images, "CLONE")?;
        let mp = info.mountpoint;
        scratches.mounts.push(mp.clone());
        let profile = r.out().join(format!("data/profile-{tag}.json"));
        retarget_profile(self.profile, self.base, &mp, None, &profile)?;
        Ok((mp, profile))
    }
}

/// `scratch destroy` on a clone made by [`RoundSetup::fresh_clone`].
fn destroy_clone(r: &mut Runner, mp: &Path, what: &str, scratches: &mut Scratches) -> Result<()> {
    r.fragkit(
        &format!("scratch destroy ({what})"),
        &[
            "scratch".into(),
            "destroy".into(),
            mp.to_string_lossy().into_owned(),
        ],
        None,
    )?;
    scratches.mounts.retain(|m| m != mp);
    Ok(())
}

/// One contender in round `k`: clone, ceiling, the application, the defrag under it, the
/// fixed read run and the modeled profile after; the clone is destroyed at the end.
fn run_round(
    r: &mut Runner,
    spec: &AppSpec,
    s: &RoundSetup,
    name: &str,
    k: u32,
    scratches: &mut Scratches,
    notes: &mut Vec<String>,
) -> Result<(AppRound, Option<String>)> {
    let app = spec.app;
    let tag = format!("{name}-r{k}");
    let (mp, profile) = s.fresh_clone(r, scratches, &tag)?;
    let db = mp.join("db");
    let target = app.target(&db);
    let device = BlockDevice::for_path(&mp)?;
    // Replayed rounds run on the device as the modeled drive's host drives it, as the
    // build was recorded.
    let modeled_drive = match s.build {
        Some(_) => Some(flash::as_modeled_drive(&device)?),
        None => None,
    };
    let throttle = match &spec.io_limit {
        Some(l) => Some(
            DeviceThrottle::set((device.major, device.minor), l.throttle()).map_err(|e| {
                anyhow!(
                    "--io-limit: cannot throttle {}: {e}",
                    device.dev_path().display()
                )
            })?,
        ),
        None => None,
    };

    // The application, cold, reading for as long as the round needs.
    fragkit_core::io::job::drop_caches()?;
    let run_args = app.read_args(
        &db,
        s.keys,
        spec.lab.seed + 2 + k as u64,
        None,
        Some(3600),
        Some(s.stats_every),
    );
    let program = app.program(r.exe());
    let (run_program, run_args) = match s.cpus {
        Some(c) => c.application_command(&program, &run_args),
        None => (program.clone(), run_args),
    };
    let mut running = Running::start(
        app,
        &run_program,
        &run_args,
        &r.out().join(format!("logs/app-{tag}.log")),
        &r.out().join(format!("data/app-{tag}.out")),
    )?;
    let flag = r.stop_flag();
    let stopped = || flag.load(std::sync::atomic::Ordering::SeqCst);
    let first = running.started(&stopped)?;
    let wait_until = |t: Instant| {
        while Instant::now() < t && !stopped() {
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait_until(first + WARM + BEFORE);
    let shown_before = r.steps.len();
    r.pin_steps(s.cpus.map(CpuSplit::defragmenter_list));
    let mut defrag_step = |r: &mut Runner| -> Result<(Instant, Option<DefragFigures>, Instant)> {
        let d_start = Instant::now();
        let defrag = match name {
            "none" => {
                wait_until(d_start + AFTER);
                None
            }
            "pick" => Some(steps::defrag_pick(
                r,
                &mp,
                &target,
                Some(&profile),
                app.request(),
                &tag,
            )?),
            "bypass" => Some(steps::defrag_pick(
                r,
                &mp,
                &target,
                None,
                app.request(),
                &tag,
            )?),
            "full" => Some(steps::defrag_full(r, &mp, &target, app.request(), &tag)?),
            _ => {
                let (prog, leading) = s.tool.ok_or_else(|| anyhow!("no tool for {name}"))?;
                Some(steps::defrag_tool(
                    r,
                    (prog, leading),
                    &mp,
                    std::slice::from_ref(&target),
                    notes,
                    &tag,
                    // bench writes passes the tool's status on; 1 is a refusal (e4defrag: the
                    // file is locked by the application), kept in the report as declined.
                    &[0, 1],
                )?)
            }
        };
        Ok((d_start, defrag, Instant::now()))
    };
    // Replayed rounds record the device during the defrag: its writes give the pages it
    // moved their new place in the flash model's write order.
    let (defrag_blocks, (d_start, defrag, d_end)) = match &modeled_drive {
        Some(_) => {
            let (t, d) =
                fragkit_trace::block::record_during(&device.dev_path(), || defrag_step(r))?;
            (Some(t), d?)
        }
        None => (None, defrag_step(r)?),
    };
    r.pin_steps(None);
    wait_until(d_end + AFTER);
    running.progress_past(d_end + AFTER, START_LIMIT, &stopped);
    let samples = running.stop();
    // The ceiling is for the application and the defragmenter together. The read-back
    // runs on the device as the base's did: under the throttle its requests were spaced
    // (and, replayed, overlapped) otherwise, so an untouched clone replayed 12% faster.
    drop(throttle);
    if r.stopped() {
        bail!("{}", super::runner::INTERRUPTED);
    }
    let step = (r.steps.len() > shown_before).then(|| r.steps[r.steps.len() - 1].clone());
    let command = step.as_ref().map(|s| s.command.clone());
    let defrag_exit = step.map(|s| s.exit_status);
    let secs = |t: Instant| t.saturating_duration_since(first).as_secs_f64();
    let rel: Vec<(f64, u64)> = samples.iter().map(|(t, o)| (secs(*t), *o)).collect();
    let (ds, de) = (secs(d_start), secs(d_end));
    let window = |a: f64, b: f64, what: &str| {
        rate(&rel, a, b).ok_or_else(|| {
            anyhow!("{name}, round {k}: the application's progress does not cover the {what} window ({a:.2}-{b:.2} s)")
        })
    };
    let before = window(ds - BEFORE.as_secs_f64(), ds, "before")?;
    // A defrag shorter than two progress lines is measured over the lines around it.
    let during = window(ds, de.max(ds + 0.1), "during")?;
    let after = window(de, de + AFTER.as_secs_f64(), "after")?;
    let series = rel
        .windows(2)
        .filter(|w| w[1].0 > w[0].0)
        .map(|w| (w[1].0 - ds, (w[1].1 - w[0].1) as f64 / (w[1].0 - w[0].0)))
        .collect();

    // The result read back the same way every time: real, device requests, modeled.
    fragkit_core::io::job::drop_caches()?;
    let s0 = device.settled_stats()?;
    let read_args = app.read_args(&db, s.keys, spec.lab.seed + 1, Some(s.reads), None, None);
    let read_run = |r: &mut Runner| {
        r.tool(
            &format!("{} read ({name}, round {k})", app.name()),
            &program,
            &read_args,
            Some(&format!("app-read-{tag}.out")),
            &[0],
        )
    };
    let (out, replayed_mb_s) = match (s.build, &defrag_blocks) {
        (Some(build), Some(moved)) => {
            let (t, out) = fragkit_trace::block::record_during(&device.dev_path(), || read_run(r))?;
            let mut h = build.clone();
            h.push_writes(moved);
            h.push_all(&t);
            (out?, Some(h.read_mb_s()?))
        }
        _ => (read_run(r)?, None),
    };
    let s1 = device.settled_stats()?;
    let delta = s0.delta(&s1);
    let read_ops_per_s = app
        .ops_per_sec(&out)
        .ok_or_else(|| anyhow!("{name}, round {k}: no ops/sec in the application's output"))?;
    let modeled = advise(
        r,
        &format!("advise ({name}, round {k})"),
        &target,
        &app.advise_args(&profile),
        super::MODEL,
        &format!("advise-{tag}.json"),
    )?;
    drop(modeled_drive);
    destroy_clone(r, &mp, &format!("{name}, round {k}"), scratches)?;
    Ok((
        AppRound {
            round: k,
            before_ops_per_s: before,
            during_ops_per_s: during,
            after_ops_per_s: after,
            ops_lost: (before - during) * (de - ds),
            during_ratio: if before > 0.0 {
                during / before
            } else {
                f64::NAN
            },
            defrag_start_s: ds,
            defrag_end_s: de,
            defrag,
            defrag_exit,
            read_ops_per_s,
            read_requests: delta.reads,
            read_bytes: delta.read_bytes,
            modeled_ns: modeled.now_ns,
            replayed_mb_s,
            series,
        },
        command,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_and_closing_line_parse() {
        let app = App::Rocksdb;
        assert_eq!(
            app.progress("2026/11/27-08:06:52  ... thread 0: (20000,40000) ops and (55040.9,53788.2) ops/second in (0.363366,0.743657) seconds"),
            Some((40000, Some(0.743657)))
        );
        assert_eq!(
            App::Sqlite.progress("progress: 25000 rows in 1.250000 s"),
            Some((25000, Some(1.25)))
        );
        assert_eq!(
            App::Sqlite.progress("progress: 25000 rows"),
            Some((25000, None))
        );
        assert_eq!(App::Sqlite.progress("progress: x rows in 1 s"), None);
        assert_eq!(app.progress("DB path: [/x]"), None);
        assert_eq!(
            app.ops_per_sec("readrandom   :      42.149 micros/op 23721 ops/sec 0.211 seconds 5000 operations;   14.8 MB/s"),
            Some(23721.0)
        );
    }

    #[test]
    fn progress_goes_on_the_applications_clock_when_it_has_one() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Printed at 100, 200, 300, 400 ms after a start at t0 + 1 s; the first arrived
        // 5 ms late, the second and third held up and delivered with the fourth (on time).
        let lines = vec![
            (at(1105), 100, Some(0.1)),
            (at(1400), 200, Some(0.2)),
            (at(1400), 300, Some(0.3)),
            (at(1400), 400, Some(0.4)),
        ];
        let placed = on_lab_clock(&lines);
        let ms: Vec<u128> = placed.iter().map(|p| (p.0 - t0).as_millis()).collect();
        assert_eq!(ms, vec![1100, 1200, 1300, 1400]);
        assert_eq!(
            placed.iter().map(|p| p.1).collect::<Vec<_>>(),
            vec![100, 200, 300, 400]
        );
        // One line without its own time: all stay at arrival.
        let mut mixed = lines.clone();
        mixed[2].2 = None;
        let kept = on_lab_clock(&mixed);
        assert_eq!(kept[1].0, at(1400));
        assert!(on_lab_clock(&[]).is_empty());
    }

    #[test]
    fn rates_interpolate_between_progress_lines() {
        let s = vec![(0.0, 0), (1.0, 1000), (2.0, 3000)];
        assert_eq!(rate(&s, 0.5, 1.5), Some(1500.0));
        assert_eq!(rate(&s, 0.0, 2.0), Some(1500.0));
        assert_eq!(rate(&s, 1.0, 3.0), None, "past the last line");
        assert_eq!(rate(&s, 1.0, 1.0), None);
    }

    #[test]
    fn io_limits_parse_or_say_what_was_expected() {
        assert_eq!(IoLimit::parse("none"), Ok(None));
        assert_eq!(IoLimit::parse("sata-ssd"), Ok(Some(IoLimit::sata_ssd())));
        let l = IoLimit::parse("500M,450M,90000,80000").unwrap().unwrap();
        assert_eq!(l.read_bytes_per_s, 500 << 20);
        assert_eq!(l.write_iops, 80000);
        for bad in ["", "1M", "1M,2M,3", "x,1M", "0,1M"] {
            let e = IoLimit::parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("--io-limit {bad}:")), "{e}");
        }
    }

    #[test]
    fn profiles_follow_the_clone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.json");
        std::fs::write(
            &p,
            r#"{"version":1,"files":[{"path":"/a/base/db/1.sst","dev":"7:0","ino":12},{"path":"/elsewhere/x","dev":"8:1","ino":3}]}"#,
        )
        .unwrap();
        let o = dir.path().join("o.json");
        retarget_profile(&p, Path::new("/a/base"), Path::new("/a/clone"), None, &o).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&o).unwrap()).unwrap();
        assert_eq!(v["files"][0]["path"], "/a/clone/db/1.sst");
        assert!(v["files"][0].get("dev").is_none());
        assert_eq!(v["files"][0]["ino"], 12);
        assert_eq!(v["files"][1]["path"], "/elsewhere/x");
    }
}
