//! `fragkit bench fast24`: the FAST'24 artifact's result table ("We Ain't Afraid of No File
//! Fragmentation", yuhun-Jun/fast24_ae) on scratch ext4 file systems here. Every workload
//! really runs (hypothetical append/overwrite × worst/random, SQLite, fileserver), its
//! block requests are recorded (`trace::block::record_during`) and replayed through the
//! `fast24` SSD model; the rows put the modeled MB/s beside the loop device's real MB/s and
//! the paper's.
//!
//! Each run gets a fresh scratch ext4 made as the artifact's `setdevice.sh`: `-m 0`,
//! mounted `nodelalloc`, `reserved_clusters` 0, `mb_stream_req` 4200000000. Differences,
//! each with its reason:
//! - As the artifact: the journal on its own 1 GiB device (`mkfs.ext4 -O journal_dev`,
//!   `-J device=`), so the traced data device never sees it; the machine's writeback set
//!   as `disablemeta.sh` for the whole run and put back after ([`WRITEBACK`]).
//! - The loop device is given the modeled NVMe's queue limits while a workload is
//!   recorded: largest request = MDTS (256 KiB), readahead = the host's 128 KiB.
//! - The modeled figure times the read phase only (reads issued once the timed read-back
//!   began); the aging's writes build the FTL's mapping.
//! - "approach" rows: modeled = the fragmented run's trace replayed with the model's
//!   `--approach` (NVMeVirt_DA's placement, what the paper measured); real = the artifact's
//!   user-level pseudo approach (dummies padded to S) on the loop device for the
//!   hypothetical workloads, none for SQLite and fileserver (there is no user-level form).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use serde::Serialize;

use crate::age::fileserver::{self, FileserverSpec};
use crate::age::hypothetical::{self, HypotheticalLayout, HypotheticalMode, HypotheticalPattern};
use crate::age::sqlite::{self, SqliteSpec};
use crate::age::ReadBack;
use fragkit_core::scratch::{FsType, Scratch, ScratchSpec};
use fragkit_core::ssd::{BlockTrace, Op, Params, Placement, Ssd};
use fragkit_sys::tunable::{Ext4Tunable, SysfsTunable};

/// The artifact's published results (fast24_ae README, section 6 "Results": printresult.sh
/// on the authors' NVMeVirt; MiB/s, printed as "MB/s"): (workload, state, MiB/s). One contiguous 8 MiB file
/// serves the four hypothetical workloads.
pub(crate) const PAPER: &[(&str, &str, f64)] = &[
    ("append-worst", "contiguous", 2174.53),
    ("append-worst", "fragmented", 397.26),
    ("append-worst", "approach", 2126.48),
    ("append-random", "contiguous", 2174.53),
    ("append-random", "fragmented", 1470.01),
    ("append-random", "approach", 2063.64),
    ("overwrite-worst", "contiguous", 2174.53),
    ("overwrite-worst", "fragmented", 398.789),
    ("overwrite-worst", "approach", 2057.91),
    ("overwrite-random", "contiguous", 2174.53),
    ("overwrite-random", "fragmented", 1487.34),
    ("overwrite-random", "approach", 2069.28),
    ("sqlite", "contiguous", 870.044),
    ("sqlite", "fragmented", 531.073),
    ("sqlite", "approach", 849.64),
    ("fileserver", "contiguous", 2739.8),
    ("fileserver", "fragmented", 2149.4),
    ("fileserver", "approach", 2611.8),
];

/// The artifact's three workload families (a table row group each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Hypothetical,
    Sqlite,
    Fileserver,
}

impl Family {
    pub const ALL: [Family; 3] = [Family::Hypothetical, Family::Sqlite, Family::Fileserver];

    /// Recorded runs the family takes.
    pub fn runs(self) -> u64 {
        match self {
            Family::Hypothetical => 9,
            Family::Sqlite | Family::Fileserver => 2,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Fast24Spec {
    /// The families to run, in table order (all when empty).
    pub only: Vec<Family>,
    /// Where the scratch images go (see [`images_dir`]); $TMPDIR when None.
    pub images_in: Option<PathBuf>,
    /// A smaller fileserver set (the hypothetical and SQLite workloads stay full size).
    pub quick: bool,
    pub seed: u64,
    /// Keep every run's block trace (journal dropped) here, named `<run>.json`.
    pub traces: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub workload: &'static str,
    pub state: &'static str,
    /// MiB/s (2^20 bytes), the paper's unit (printresult.sh: 8 MiB / seconds).
    pub modeled_mib_s: f64,
    pub real_mib_s: Option<f64>,
    pub paper_mib_s: f64,
    /// This row over its workload's contiguous row (1 for the contiguous rows).
    pub modeled_ratio: f64,
    pub paper_ratio: f64,
}

/// What one recorded run gave (for the table's evidence lines; not in the JSON).
#[derive(Debug, Clone)]
pub struct Run {
    pub name: String,
    pub read: ReadBack,
    pub fragments: u64,
    pub write_order: fragkit_core::ssd::Report,
    pub approach: fragkit_core::ssd::Report,
    pub requests: usize,
    pub dropped_events: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Fast24Report {
    pub version: u32,
    pub kind: &'static str,
    pub rows: Vec<Row>,
    #[serde(skip)]
    pub runs: Vec<Run>,
    #[serde(skip)]
    pub quick: bool,
    /// Where the images were (the real MB/s is that loop device's).
    #[serde(skip)]
    pub images_in: Option<PathBuf>,
}

/// One workload on a fresh scratch ext4 set up as the artifact's, recorded.
/// `readers`: how the read phase is replayed (see [`model`]).
fn recorded_run(
    name: &str,
    size: u64,
    readers: Option<u32>,
    spec: &Fast24Spec,
    work: impl FnOnce(&Path) -> Result<(ReadBack, u64)> + Send,
) -> Result<Run> {
    let p = Params::fast24();
    let mut ss = ScratchSpec::new(FsType::Ext4, size);
    ss.parent = spec.images_in.clone();
    ss.mkfs_args = vec!["-m".into(), "0".into()];
    ss.mount_options = Some("nodelalloc".into());
    ss.external_journal = Some(JOURNAL_BYTES);
    let scratch = Scratch::create(&ss)?;
    let mnt = scratch.mountpoint().to_path_buf();
    let dev = scratch.info.loop_device.clone();
    let _reserved = Ext4Tunable::set(&mnt, "reserved_clusters", "0")
        .context("setting ext4 reserved_clusters")?;
    let _stream = Ext4Tunable::set(&mnt, "mb_stream_req", "4200000000")
        .context("setting ext4 mb_stream_req")?;
    // The loop device cuts requests and reads ahead as the modeled NVMe's host would.
    let _limits = device_limits(&scratch.device_name(), &p)?;
    let (mut trace, r) = fragkit_trace::block::record_during(&dev, || work(&mnt))?;
    let (read, fragments) = r.with_context(|| format!("bench fast24: {name}"))?;
    fragkit_trace::block::resolve_owners(&mut trace, &mnt)?;
    drop((_limits, _reserved, _stream));
    scratch.destroy()?;
    // Time the read phase only: reads before it (metadata during aging) are left out.
    trace
        .requests
        .retain(|q| q.op != Op::Read || q.issue_ns >= read.started_ns);
    if let Some(dir) = &spec.traces {
        std::fs::create_dir_all(dir)?;
        let p = dir.join(format!("{name}.json"));
        std::fs::write(&p, trace.to_json() + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    let (write_order, approach) = model(&trace, readers)?;
    Ok(Run {
        name: name.to_string(),
        read,
        fragments,
        write_order,
        approach,
        requests: trace.requests.len(),
        dropped_events: trace.dropped,
    })
}

/// The fileserver's read phase, replayed as this many closed-loop readers: a read phase
/// of threads each issuing one request at a time, where which requests overlapped on the
/// recording device was a matter of its speed and of the scheduler (fileserver_read.f:
/// `set $nthreads=10`, each open / readwholefile 1 MiB directio / close).
const FILESERVER_READERS: u32 = 10;

/// The trace replayed under `fast24`, in write order and with the approach; the read
/// phase (every read left in the trace) by `readers` closed-loop readers when given
/// (`Ssd::closed_reads`), else with the recording's overlap.
pub fn model(
    trace: &BlockTrace,
    readers: Option<u32>,
) -> Result<(fragkit_core::ssd::Report, fragkit_core::ssd::Report)> {
    let p = Params::fast24();
    let replay = |pl| match readers {
        Some(n) => Ssd::replay_closed(&p, pl, &trace.requests, 0, n),
        None => Ssd::replay(&p, pl, &trace.requests),
    };
    let w = replay(Placement::WriteOrder).map_err(|e| anyhow!("{e}"))?;
    let a = replay(Placement::Approach).map_err(|e| anyhow!("{e}"))?;
    Ok((w, a))
}

fn hyp(
    dir: &Path,
    mode: HypotheticalMode,
    pattern: HypotheticalPattern,
    approach: bool,
    seed: u64,
) -> Result<(ReadBack, u64)> {
    let r = hypothetical::build(&hypothetical::HypotheticalSpec {
        path: dir.join("T0.data"),
        mode,
        pattern,
        chunk: 32 << 10,
        stripe: 256 << 10,
        size: 8 << 20,
        direct: false,
        tune: true,
        keep_dummies: true,
        seed,
        layout: HypotheticalLayout::Artifact,
        approach,
        read_back: true,
    })?;
    Ok((r.read.expect("read_back asked"), r.achieved.fragments))
}

/// The artifact's contiguous file: 8 MiB in 1 MiB writes, fsync, read back.
fn contiguous_file(dir: &Path, seed: u64) -> Result<(ReadBack, u64)> {
    let p = dir.join("T0.data");
    let buf = crate::age::seeded_buf(1 << 20, seed);
    let f = std::fs::File::create(&p)?;
    {
        // On one CPU, as the overwrite workload's fill: ext4 serves a small file's first
        // blocks from a per-CPU pool, so a migration mid-write could split it.
        let _pin = fragkit_sys::affinity::CpuPin::current();
        for i in 0..8u64 {
            std::os::unix::fs::FileExt::write_all_at(&f, buf.as_slice(), i << 20)?;
        }
    }
    f.sync_all()?;
    drop(f);
    let c = crate::age::check_file(&p)?;
    Ok((crate::age::read_back(&p)?, c.fragments))
}

/// Where to keep the runs' images: /dev/shm when it is a tmpfs with room for the largest
/// run, so the recording device's speed is the same from run to run. The model keeps the
/// recording's dependencies (what was issued after what completed); on a loop device over
/// a disk image, the disk's varying latency changed which buffered reads overlapped, and
/// with it the modeled SQLite ratio (0.55 to 0.63 between runs). None: $TMPDIR.
pub fn images_dir() -> Option<PathBuf> {
    let shm = Path::new("/dev/shm");
    let info = fragkit_sys::fsinfo::FsInfo::of_path(shm).ok()?;
    let free = info.blocks_available.saturating_mul(info.fragment_size);
    (info.type_name() == "tmpfs" && free >= LARGEST_RUN_BYTES).then(|| shm.to_path_buf())
}

/// The most a run writes into its images: the full SQLite run (a 160 MB database beside
/// a 1 GB dummy file) with headroom, and what its journal touches.
const LARGEST_RUN_BYTES: u64 = 3 << 30;

/// The artifact's journal partition: `+1G` (fast24_ae evaluation/setdevice.sh).
const JOURNAL_BYTES: u64 = 1 << 30;

/// The artifact's writeback settings for every run (fast24_ae evaluation/disablemeta.sh,
/// run before each workload script; enablemeta.sh after): no periodic writeback, dirty
/// data expires after 600 s, so metadata reaches the device only when a workload syncs.
/// dirty_ratio before dirty_background_ratio: the kernel keeps background below it.
pub const WRITEBACK: [(&str, &str); 4] = [
    ("dirty_ratio", "50"),
    ("dirty_background_ratio", "50"),
    ("dirty_writeback_centisecs", "0"),
    ("dirty_expire_centisecs", "60000"),
];

/// Set the machine's writeback knobs as the artifact did; put back when dropped.
pub(crate) fn artifact_writeback() -> Result<Vec<SysfsTunable>> {
    let mut set = Vec::new();
    for (k, v) in WRITEBACK {
        if let Some(t) = SysfsTunable::set_vm(k, v).with_context(|| format!("setting vm.{k}"))? {
            set.push(t);
        }
    }
    Ok(set)
}

/// The scratch loop device's queue limits set to the modeled device's: its largest
/// command (MDTS) as max_sectors_kb and its host's readahead window as read_ahead_kb, so
/// the recording holds the requests an NVMe driver would have sent. Put back when dropped.
pub(crate) fn device_limits(dev: &str, p: &Params) -> Result<Vec<SysfsTunable>> {
    let mut set = Vec::new();
    for (k, bytes) in [
        ("max_sectors_kb", p.max_transfer_bytes),
        ("read_ahead_kb", p.readahead_bytes),
    ] {
        let t = SysfsTunable::set_block_queue(dev, k, &(bytes >> 10).to_string())
            .with_context(|| format!("setting {dev}'s queue/{k} to {} KiB", bytes >> 10))?
            .ok_or_else(|| anyhow!("{dev}: no queue/{k} in sysfs"))?;
        set.push(t);
    }
    Ok(set)
}

/// Run everything; `step` is told each run's name when it finishes.
pub fn run(spec: &Fast24Spec, step: &mut dyn FnMut(&str)) -> Result<Fast24Report> {
    let seed = spec.seed;
    let _writeback = artifact_writeback()?;
    let mut runs: Vec<Run> = Vec::new();
    let mut go = |name: &str,
                  size: u64,
                  readers: Option<u32>,
                  work: &(dyn Fn(&Path) -> Result<(ReadBack, u64)> + Sync)|
     -> Result<()> {
        let r = recorded_run(name, size, readers, spec, |d| work(d))?;
        step(name);
        runs.push(r);
        Ok(())
    };
    let wanted = |f: Family| spec.only.is_empty() || spec.only.contains(&f);
    let hypothetical = wanted(Family::Hypothetical);
    if hypothetical {
        go("hypothetical-contiguous", 512 << 20, None, &|d| {
            contiguous_file(d, seed)
        })?;
    }
    for (mode, mname) in [
        (HypotheticalMode::Append, "append"),
        (HypotheticalMode::Overwrite, "overwrite"),
    ] {
        for (pat, pname) in [
            (HypotheticalPattern::Worst, "worst"),
            (HypotheticalPattern::Random, "random"),
        ] {
            for approach in [false, true].into_iter().filter(|_| hypothetical) {
                let name = format!(
                    "{mname}-{pname}{}",
                    if approach { "-pseudo-approach" } else { "" }
                );
                go(&name, 1 << 30, None, &|d| hyp(d, mode, pat, approach, seed))?;
            }
        }
    }
    // --quick keeps the artifact's 10,000 records: a smaller database is another workload
    // (fragmented/contiguous modeled 0.52 at 1,000 records, 0.63 at 10,000, both recorded
    // on a disk-backed loop device).
    let records = sqlite::RECORDS;
    for contiguous in [true, false].into_iter().filter(|_| wanted(Family::Sqlite)) {
        let name = if contiguous {
            "sqlite-contiguous"
        } else {
            "sqlite"
        };
        go(name, 3 << 30, None, &|d| {
            let r = sqlite::run(&SqliteSpec {
                dir: d.to_path_buf(),
                records,
                dummy_bytes: sqlite::DUMMY_BYTES,
                contiguous,
                read_back: true,
                seed,
            })?;
            Ok((r.read.expect("read_back asked"), r.achieved.fragments))
        })?;
    }
    let files = if spec.quick { 1000 } else { 10_000 };
    for contiguous in [true, false]
        .into_iter()
        .filter(|_| wanted(Family::Fileserver))
    {
        let name = if contiguous {
            "fileserver-contiguous"
        } else {
            "fileserver"
        };
        let size = if spec.quick { 512 << 20 } else { 4 << 30 };
        go(name, size, Some(FILESERVER_READERS), &|d| {
            let mut fs = FileserverSpec::artifact(d.to_path_buf());
            fs.files = files;
            fs.appends = 2 * files;
            fs.contiguous = contiguous;
            fs.read_back = true;
            fs.seed = seed;
            let r = fileserver::run(&fs)?;
            Ok((r.read.expect("read_back asked"), r.fragments))
        })?;
    }
    let by = |n: &str| runs.iter().find(|r| r.name == n).expect("every run ran");
    let paper = |w: &str, s: &str| {
        PAPER
            .iter()
            .find(|p| p.0 == w && p.1 == s)
            .map(|p| p.2)
            .expect("every row has a paper figure")
    };
    let mut rows = Vec::new();
    // Reports give MB/s (10^6 bytes); the paper's table is in MiB/s.
    let mib = |mb_s: f64| mb_s * 1e6 / (1u64 << 20) as f64;
    let mut push = |workload: &'static str,
                    state: &'static str,
                    modeled: f64,
                    contiguous: f64,
                    real: Option<f64>| {
        let ratio = |a: f64, b: f64| if b > 0.0 { round4(a / b) } else { 0.0 };
        rows.push(Row {
            workload,
            state,
            modeled_mib_s: round1(mib(modeled)),
            real_mib_s: real.map(|r| round1(mib(r))),
            paper_mib_s: paper(workload, state),
            modeled_ratio: ratio(modeled, contiguous),
            paper_ratio: ratio(paper(workload, state), paper(workload, "contiguous")),
        })
    };
    // (workload, its contiguous run, the real figure beside the modeled approach).
    let mut table: Vec<(&'static str, &Run, Option<f64>)> = Vec::new();
    if hypothetical {
        for w in [
            "append-worst",
            "append-random",
            "overwrite-worst",
            "overwrite-random",
        ] {
            let pseudo = by(&format!("{w}-pseudo-approach")).read.mb_s;
            table.push((w, by("hypothetical-contiguous"), Some(pseudo)));
        }
    }
    for (f, w) in [
        (Family::Sqlite, "sqlite"),
        (Family::Fileserver, "fileserver"),
    ] {
        if wanted(f) {
            table.push((w, by(&format!("{w}-contiguous")), None));
        }
    }
    for (w, c, real_approach) in table {
        let f = by(w);
        let base = c.write_order.read_mb_s;
        push(w, "contiguous", base, base, Some(c.read.mb_s));
        let frag = f.write_order.read_mb_s;
        push(w, "fragmented", frag, base, Some(f.read.mb_s));
        push(w, "approach", f.approach.read_mb_s, base, real_approach);
    }
    Ok(Fast24Report {
        version: 1,
        kind: "fragkit-fast24",
        rows,
        runs,
        quick: spec.quick,
        images_in: spec.images_in.clone(),
    })
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// Runs `bench fast24` records for `only` (the progress bar's length).
pub fn runs(only: &[Family]) -> u64 {
    let all = Family::ALL;
    let fams = if only.is_empty() { &all[..] } else { only };
    fams.iter().map(|f| f.runs()).sum()
}
