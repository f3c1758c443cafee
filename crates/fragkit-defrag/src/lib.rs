//! `fragkit defrag`: plan (pick | bypass | full) → migrate with each file system's atomic
//! primitive → verify, and report what it cost and what it bought.

// A closed stdout or stderr must never panic a command: print through writers that
// return errors (stdout) or `stderr_line!` (diagnostics).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod advise;
pub mod judge;
pub mod migrate;
pub mod movelog;
pub mod plan;
pub mod safety;
pub mod space;
pub mod verify;

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use fragkit_core::layout::walk::{self, map_path, WalkOptions};
use fragkit_core::metrics::FileMetrics;
use fragkit_core::scan::scan_roots;
use fragkit_sys::fiemap;
use fragkit_sys::fsinfo::{EXT4_MAGIC, F2FS_MAGIC};
use fragkit_sys::tunable::SysfsTunable;
use judge::Judgement;
use migrate::{Goal, Method, RangeOutcome, Skip, SkipKind, Target};
use plan::{Mode, SkippedRange};

#[derive(Debug, Clone)]
pub struct DefragOptions {
    pub mode: Mode,
    /// R: the I/O size whose split requests the plan removes.
    pub request_size: u64,
    pub method: Method,
    pub verify: bool,
    pub dry_run: bool,
    /// Bytes per second of migration at most.
    pub max_rate: Option<u64>,
    /// Stop planning further ranges once this many bytes were moved.
    pub budget: Option<u64>,
    pub unshare: bool,
    /// Defragment files that other processes have open for writing.
    pub force: bool,
    /// Allow --method rewrite (not crash-safe).
    pub allow_unsafe: bool,
    /// Files defragmented at once (1: one after the other).
    pub jobs: usize,
    /// Set by SIGINT/SIGTERM: no range starts after it; the ones in flight finish, are
    /// made durable and verified, and the report lists the rest as interrupted.
    pub interrupt: Option<&'static AtomicBool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RangeResult {
    pub offset: u64,
    pub length: u64,
    /// planned (dry run) | moved | skipped | failed
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why it was skipped, as a kind (see `migrate::SkipKind`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip: Option<SkipKind>,
    /// The range's counts before and after (judged before the move was committed, or on
    /// the result where the kernel chose the space).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judged: Option<Judgement>,
    /// Full mode: how many pieces the free-space plan (GETFSMAP, best fit) said the range
    /// could be put in; `judged.fragments_after` is what the allocator gave.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planned_pieces: Option<usize>,
    /// true: checksum equal after reading back from disk; false: differs; null: not
    /// checked (--no-verify) or inconclusive (file changed concurrently).
    pub verified: Option<bool>,
}

impl RangeResult {
    /// A range with nothing measured yet.
    fn new(offset: u64, length: u64, status: &'static str) -> RangeResult {
        RangeResult {
            offset,
            length,
            status,
            reason: None,
            skip: None,
            judged: None,
            planned_pieces: None,
            verified: None,
        }
    }

    /// A range left alone, for the reason given.
    fn skipped(offset: u64, length: u64, why: Skip) -> RangeResult {
        RangeResult {
            reason: Some(why.detail),
            skip: Some(why.kind),
            ..RangeResult::new(offset, length, "skipped")
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct FileResult {
    #[serde(flatten, serialize_with = "fragkit_core::units::path_fields")]
    pub path: PathBuf,
    pub fs: String,
    pub primitive: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    pub ranges: Vec<RangeResult>,
    pub not_planned: Vec<SkippedRange>,
    pub bytes_planned: u64,
    pub bytes_moved: u64,
    pub fragments_before: u64,
    pub fragments_after: u64,
    pub split_before: u64,
    pub split_after: u64,
    pub ideal: u64,
    /// Set when the file came out worse than it went in (more split requests, or more
    /// fragments without fewer split requests; in full mode, more fragments).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worse: Option<String>,
    /// Set when the file's layout after the run could not be read (it was deleted or
    /// renamed meanwhile): the `_after` figures are then the ones from before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vanished: Option<String>,
    /// Whether the file's atime, mtime and ctime were, after the run, what they were before
    /// its first move (as xfs_fsr and e4defrag leave them); null when nothing moved.
    pub times_kept: Option<bool>,
    /// The times that changed: by the primitive (xfs's commit without CAP_SYS_ADMIN,
    /// `--method rewrite`) or by another process meanwhile.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub times_changed: Vec<&'static str>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DefragSummary {
    pub files_scanned: u64,
    pub files_planned: u64,
    pub files_changed: u64,
    pub files_refused: u64,
    /// Files whose layout after the run could not be read (deleted or renamed meanwhile).
    pub files_vanished: u64,
    pub ranges_planned: u64,
    pub ranges_moved: u64,
    pub ranges_skipped: u64,
    pub ranges_failed: u64,
    pub bytes_planned: u64,
    pub bytes_moved: u64,
    pub extra_before: u64,
    pub extra_after: u64,
    pub verify_failures: u64,
    /// Files that came out worse (see FileResult::worse); 0 is the promise.
    pub files_worse: u64,
    /// Ranges skipped for a reason other than --budget.
    pub ranges_not_improvable: u64,
    /// Ranges moved where the file system chose the space (btrfs, f2fs, rewrite) and
    /// placed them no better: done and not taken back, but not what was asked.
    pub ranges_moved_not_better: u64,
    pub budget_exhausted: bool,
    /// SIGINT or SIGTERM ended the run early; the ranges not started are skipped as
    /// `interrupted` (and counted in ranges_not_improvable: the exit status is 1).
    pub interrupted: bool,
    /// Time spent making results durable (fsync per changed file).
    pub sync_ms: u64,
    /// Commits (syncfs) asked for so that windows without a whole donor could be tried
    /// again with the blocks earlier moves freed (ext4, xfs; pick and bypass).
    pub commits_for_space: u64,
    /// How the before-checksums were read, in chunks of up to 1 MiB: from the page cache
    /// after readahead (the source read from the device once), after a second readahead
    /// (pages gone before the read), or with O_DIRECT (still not cached).
    pub checksum_chunks_cached: u64,
    pub checksum_chunks_readahead_again: u64,
    pub checksum_chunks_direct: u64,
    /// `--unshare`: bytes of shared (reflinked or snapshot) extents inside moved ranges,
    /// whose sharing the move broke; they were counted against `--budget` like any move.
    pub shared_bytes_unshared: u64,
    /// Changed files whose atime, mtime or ctime the run left changed (see
    /// FileResult::times_changed).
    pub files_times_changed: u64,
    pub elapsed_ms: u64,
}

impl DefragSummary {
    /// Add one file's counts (a worker's tally) to the run's.
    fn add(&mut self, f: &DefragSummary) {
        self.files_changed += f.files_changed;
        self.files_refused += f.files_refused;
        self.files_vanished += f.files_vanished;
        self.ranges_moved += f.ranges_moved;
        self.ranges_skipped += f.ranges_skipped;
        self.ranges_failed += f.ranges_failed;
        self.bytes_moved += f.bytes_moved;
        self.extra_after += f.extra_after;
        self.verify_failures += f.verify_failures;
        self.files_worse += f.files_worse;
        self.ranges_not_improvable += f.ranges_not_improvable;
        self.ranges_moved_not_better += f.ranges_moved_not_better;
        self.budget_exhausted |= f.budget_exhausted;
        self.interrupted |= f.interrupted;
        self.sync_ms += f.sync_ms;
        self.checksum_chunks_cached += f.checksum_chunks_cached;
        self.checksum_chunks_readahead_again += f.checksum_chunks_readahead_again;
        self.checksum_chunks_direct += f.checksum_chunks_direct;
        self.shared_bytes_unshared += f.shared_bytes_unshared;
        self.files_times_changed += f.files_times_changed;
    }

    /// Exit status: 0 everything asked was done (or nothing needed doing), 1 some target
    /// was refused, skipped, failed, moved no better or came out worse (each listed in the
    /// report).
    pub fn exit_code(&self) -> i32 {
        let incomplete = self.files_refused
            + self.files_vanished
            + self.ranges_failed
            + self.verify_failures
            + self.files_worse
            + self.ranges_not_improvable
            + self.ranges_moved_not_better;
        i32::from(incomplete > 0)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DefragReport {
    pub version: u32,
    pub mode: &'static str,
    pub request_size: u64,
    pub method: &'static str,
    pub dry_run: bool,
    pub files: Vec<FileResult>,
    pub summary: DefragSummary,
    /// File-system knobs set for the run (f2fs ipu_policy for --method rewrite, ext4
    /// mb_max_to_scan for full mode).
    pub tunables: Vec<TunableChange>,
}

/// A file-system knob defrag changed for the run, and whether it reads its old value again.
#[derive(Debug, Clone, Serialize)]
pub struct TunableChange {
    pub knob: PathBuf,
    pub from: String,
    pub to: String,
    pub restored: bool,
}

/// Knobs held for the run, by device and knob name; dropping restores them (error paths
/// too).
#[derive(Default)]
struct HeldTunables(Vec<(u64, &'static str, SysfsTunable)>);

impl HeldTunables {
    fn holds(&self, dev: u64, name: &str) -> bool {
        self.0.iter().any(|(d, n, _)| *d == dev && *n == name)
    }

    /// Full mode on ext4: the allocator may look at every free extent for the run, so that
    /// donors get the free runs the GETFSMAP plan counted (a donor planned as 531 pieces
    /// came out in 6,108 without it; docs/defrag.md).
    fn ext4_scan_every_free_extent(&mut self, dev: u64, path: &Path, blocks: u64) -> Result<()> {
        const KNOB: &str = "mb_max_to_scan";
        if self.holds(dev, KNOB) {
            return Ok(());
        }
        let what = "full mode lets ext4's allocator look at every free extent: setting /sys/fs/ext4/<dev>/mb_max_to_scan";
        if let Some(t) = SysfsTunable::ext4_scan_every_free_extent(path, blocks)
            .with_context(|| format!("{}: {what} (needs root)", path.display()))?
        {
            self.0.push((dev, KNOB, t));
        }
        Ok(())
    }

    /// F2FS overwrites in place under most ipu_policy values; the rewrite method needs
    /// every write out of place, so switch in-place updates off on `path`'s device.
    fn f2fs_out_of_place(&mut self, dev: u64, path: &Path) -> Result<()> {
        if self.holds(dev, "ipu_policy") {
            return Ok(());
        }
        let what = "--method rewrite on f2fs needs out-of-place writes: setting /sys/fs/f2fs/<dev>/ipu_policy";
        let t = SysfsTunable::set_fs(
            path,
            "f2fs",
            "ipu_policy",
            migrate::f2fs::OUT_OF_PLACE_POLICY,
        )
        .with_context(|| format!("{}: {what} (needs root)", path.display()))?
        .ok_or_else(|| anyhow!("{}: {what}: no such knob for its device", path.display()))?;
        self.0.push((dev, "ipu_policy", t));
        Ok(())
    }

    /// Put every knob back and say what was done.
    fn restore(self) -> Vec<TunableChange> {
        self.0
            .into_iter()
            .map(|(_, _, t)| {
                let (knob, from, to) = (
                    t.knob().to_path_buf(),
                    t.old().to_string(),
                    t.new_value().to_string(),
                );
                let restored = match t.restore() {
                    Ok(()) => true,
                    Err(e) => {
                        fragkit_sys::stderr_line!(
                            "fragkit: {}: restoring {from}: {e}",
                            knob.display()
                        );
                        false
                    }
                };
                TunableChange {
                    knob,
                    from,
                    to,
                    restored,
                }
            })
            .collect()
    }
}

/// Progress events for a progress bar: bytes of planned ranges finished so far.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

pub fn run(
    paths: &[PathBuf],
    opts: &DefragOptions,
    progress: Progress<'_>,
) -> Result<DefragReport> {
    if opts.method == Method::Rewrite && !opts.allow_unsafe {
        bail!("--method rewrite is FragPicker's punch-and-rewrite, which loses data on a crash; add --unsafe to run it anyway (for comparisons only)");
    }
    for p in paths {
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) {
            bail!(
                "{}: is a symlink; defrag never follows symlinks, name the file itself",
                p.display()
            );
        }
    }
    if !opts.dry_run && !nix::unistd::geteuid().is_root() {
        bail!("defrag needs root (the migration ioctls and GETFSMAP do); run it as root, or add --dry-run to only plan");
    }
    let started = Instant::now();
    // A path that cannot be scanned is reported and skipped (exit 1), as scan does; the
    // others are still defragmented.
    let mut roots = Vec::new();
    let mut unusable = Vec::new();
    for p in paths {
        match walk::check_root(p) {
            Ok(r) => roots.push(r),
            Err(e) => unusable.push(e.into_path_error()),
        }
    }
    let mut scan = scan_roots(
        &roots,
        &WalkOptions::default(),
        &[opts.request_size],
        &|_| {},
    );
    scan.errors.splice(0..0, unusable);
    // The same inode reached twice (a path named twice, a bind mount, a directory and a
    // file inside it) is one file: moved once, listed under the first path.
    let mut seen = HashSet::new();
    scan.files.retain(|f| {
        let first = seen.insert((f.file.dev, f.file.ino));
        if !first {
            fragkit_sys::stderr_line!(
                "fragkit: {}: the same file as one named before; defragmented once",
                f.file.path.display()
            );
        }
        first
    });
    for e in &scan.errors {
        fragkit_sys::stderr_line!("fragkit: {}: {}", e.path.display(), e.message);
    }
    let plans = plan::plan_files(&scan.files, &opts.mode, opts.request_size);
    let writers = if opts.force || opts.dry_run {
        Default::default()
    } else {
        safety::files_open_for_write()
    };
    let total_planned: u64 = plans.iter().map(|p| p.bytes()).sum();
    let mut summary = DefragSummary {
        files_scanned: scan.files.len() as u64,
        // A path that could not be scanned is a target not done.
        files_refused: scan.errors.len() as u64,
        ..Default::default()
    };
    let mut tunables = HeldTunables::default();
    let mut committed: Vec<u64> = Vec::new();
    // Every file's place in the report is its place in the plan, whatever worker ran it:
    // files with nothing to do are filled in now, the others by the workers below.
    let mut slots: Vec<Option<FileResult>> = Vec::new();
    let mut jobs: Vec<FileJob<'_>> = Vec::new();
    for (entry, plan) in scan.files.iter().zip(&plans) {
        let before = &entry.metrics.requests[0];
        summary.extra_before += before.extra();
        if plan.ranges.is_empty() {
            summary.extra_after += before.extra();
            if !plan.skipped.is_empty() {
                slots.push(Some(file_result(
                    entry,
                    plan,
                    None,
                    None,
                    Vec::new(),
                    entry.metrics.clone(),
                )));
            }
            continue;
        }
        summary.files_planned += 1;
        summary.ranges_planned += plan.ranges.len() as u64;
        summary.bytes_planned += plan.bytes();
        if opts.dry_run {
            let ranges = plan
                .ranges
                .iter()
                .map(|r| RangeResult::new(r.offset, r.length, "planned"))
                .collect();
            summary.extra_after += before.extra().saturating_sub(plan.extra_removed());
            slots.push(Some(file_result(
                entry,
                plan,
                None,
                None,
                ranges,
                entry.metrics.clone(),
            )));
            continue;
        }
        // ext4 gives blocks freed in the running journal transaction back to the allocator
        // only at commit, yet GETFSMAP already lists them free: files deleted just before
        // the run would be planned into space no donor can get. One commit per file system
        // before any worker plans; later frees are the run's own. (A failed syncfs leaves
        // the plan as without it: judged after the move.)
        if matches!(opts.mode, Mode::Full) && !committed.contains(&entry.file.dev) {
            let _ = fragkit_sys::sync::syncfs(&entry.file.path);
            committed.push(entry.file.dev);
            if entry.file.fs.magic == EXT4_MAGIC && !opts.dry_run {
                tunables.ext4_scan_every_free_extent(
                    entry.file.dev,
                    &entry.file.path,
                    entry.file.fs.blocks,
                )?;
            }
        }
        // Knobs are per device and held for the whole run: set before any worker starts.
        if opts.method == Method::Rewrite && entry.file.fs.magic == F2FS_MAGIC {
            tunables.f2fs_out_of_place(entry.file.dev, &entry.file.path)?;
        }
        jobs.push(FileJob {
            slot: slots.len(),
            entry,
            plan,
        });
        slots.push(None);
    }
    let shared = Shared {
        opts,
        writers: &writers,
        started,
        total_planned,
        progress,
        committed: AtomicU64::new(0),
        moved: AtomicU64::new(0),
        // Blocks freed just before the run may be uncommitted too: the first need commits.
        uncommitted_frees: AtomicU64::new(1),
        commit_after: Mutex::new(1),
        commits_for_space: AtomicU64::new(0),
        done: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    };
    let outcomes = run_jobs(&shared, &jobs, opts.jobs);
    for (job, outcome) in jobs.iter().zip(outcomes) {
        // A fatal error stops the run; files after it in the plan were not started.
        let Some(outcome) = outcome else { continue };
        let (result, tally) = outcome?;
        summary.add(&tally);
        slots[job.slot] = Some(result);
    }
    let files: Vec<FileResult> = slots.into_iter().flatten().collect();
    summary.commits_for_space = shared.commits_for_space.load(Ordering::SeqCst);
    summary.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(DefragReport {
        version: 1,
        mode: opts.mode.name(),
        request_size: opts.request_size,
        method: match opts.method {
            Method::Auto => "auto",
            Method::Rewrite => "rewrite",
        },
        dry_run: opts.dry_run,
        files,
        summary,
        tunables: tunables.restore(),
    })
}

/// The run's commits for space, asked for through one file of the file system.
struct FileSystemCommit<'a> {
    shared: &'a Shared<'a>,
    file: &'a File,
}

impl migrate::CommitFrees for FileSystemCommit<'_> {
    fn commit(&self) -> bool {
        self.shared.commit_frees(self.file)
    }

    fn helped(&self, whole: bool) {
        self.shared.commit_helped(whole);
    }
}

/// One file with ranges to move, and its place in the report.
struct FileJob<'a> {
    slot: usize,
    entry: &'a fragkit_core::scan::FileEntry,
    plan: &'a plan::FilePlan,
}

/// What the workers share: the options, and the run-wide counters that keep --budget and
/// --max-rate global.
struct Shared<'a> {
    opts: &'a DefragOptions,
    writers: &'a HashSet<(u64, u64)>,
    started: Instant,
    total_planned: u64,
    progress: Progress<'a>,
    /// Bytes moved plus bytes of moves in flight: a range starts only if this stays within
    /// --budget, so workers together never move more than the budget.
    committed: AtomicU64,
    /// Bytes moved (for --max-rate).
    moved: AtomicU64,
    /// Bytes moved since the last commit this run asked for: the old blocks they left are
    /// free only once the journal (ext4) or log (xfs) commits.
    uncommitted_frees: AtomicU64,
    /// How many such bytes the next commit waits for: 1 at first and after a commit that
    /// helped, doubled after one that did not (free space with no whole run left would
    /// otherwise commit for every window). Its lock keeps two workers from committing at
    /// once, and only they wait on it: a worker finishing a move does not.
    commit_after: Mutex<u64>,
    /// Commits [`Shared::commit_frees`] made.
    commits_for_space: AtomicU64,
    /// Bytes of planned ranges finished (for progress).
    done: AtomicU64,
    /// A fatal error: workers take no further file.
    stop: AtomicBool,
}

impl Shared<'_> {
    /// Claim `len` bytes of the budget for a move about to start; false: it would exceed it.
    fn reserve(&self, len: u64) -> bool {
        let Some(budget) = self.opts.budget else {
            return true;
        };
        self.committed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| {
                (c + len <= budget).then_some(c + len)
            })
            .is_ok()
    }

    /// A move that reserved `reserved` bytes finished having moved `moved` of them.
    fn settle(&self, reserved: u64, moved: u64) {
        if self.opts.budget.is_some() {
            self.committed.fetch_sub(reserved - moved, Ordering::SeqCst);
        }
        self.moved.fetch_add(moved, Ordering::SeqCst);
        self.uncommitted_frees.fetch_add(moved, Ordering::SeqCst);
    }

    /// A planned range is finished (moved, skipped or failed): progress moves on.
    fn advance(&self, length: u64) {
        let done = self.done.fetch_add(length, Ordering::SeqCst) + length;
        (self.progress)(done, self.total_planned);
    }

    /// Commit the file system of `file` (syncfs) if moves since the last commit left
    /// enough old blocks that only a commit makes allocatable; whether it did. ext4 hands
    /// blocks freed in the running transaction back to mballoc at commit (xfs keeps them
    /// busy until the log commits), so a range that found no whole donor may find one
    /// after it.
    fn commit_frees(&self, file: &File) -> bool {
        let mut needed = self.commit_after.lock().unwrap_or_else(|e| e.into_inner());
        let uncommitted = self.uncommitted_frees.load(Ordering::SeqCst);
        if uncommitted == 0 || uncommitted < *needed {
            return false;
        }
        // Moves that finish during the commit count towards the next one.
        self.uncommitted_frees
            .fetch_sub(uncommitted, Ordering::SeqCst);
        let done = nix::unistd::syncfs(std::os::fd::AsRawFd::as_raw_fd(file)).is_ok();
        if done {
            self.commits_for_space.fetch_add(1, Ordering::SeqCst);
            // Until told it helped, the next commit waits for twice as many freed bytes.
            *needed = uncommitted.max(*needed).saturating_mul(2);
        }
        done
    }

    /// The attempt after a commit found a whole donor: commit again at the next need.
    fn commit_helped(&self, whole: bool) {
        if whole {
            *self.commit_after.lock().unwrap_or_else(|e| e.into_inner()) = 1;
        }
    }

    /// Sleep until the run's average rate is back under --max-rate (all workers together).
    fn pace(&self) {
        self.pace_with(0);
    }

    /// [`Shared::pace`] counting `in_range` more bytes: those of the range in progress
    /// moved so far, so that one large range is paced too, call by call.
    fn pace_with(&self, in_range: u64) {
        let Some(rate) = self.opts.max_rate else {
            return;
        };
        let moved = self.moved.load(Ordering::SeqCst) + in_range;
        self.wait_until(self.started, moved, rate);
    }

    /// Sleep until `bytes` read since `from` are under --max-rate.
    fn pace_reads(&self, from: Instant, bytes: u64) {
        if let Some(rate) = self.opts.max_rate {
            self.wait_until(from, bytes, rate);
        }
    }

    /// Sleep until `bytes` at `rate` bytes/s from `from` have had their time (in steps, so
    /// that an interrupt is not kept waiting behind a low rate).
    fn wait_until(&self, from: Instant, bytes: u64, rate: u64) {
        let should_take = Duration::from_secs_f64(bytes as f64 / rate as f64);
        const STEP: Duration = Duration::from_millis(50);
        loop {
            let took = from.elapsed();
            if should_take <= took || self.interrupted() {
                return;
            }
            std::thread::sleep((should_take - took).min(STEP));
        }
    }

    /// SIGINT or SIGTERM came: no further range starts.
    fn interrupted(&self) -> bool {
        self.opts
            .interrupt
            .is_some_and(|f| f.load(Ordering::SeqCst))
    }
}

type Outcome = Result<(FileResult, DefragSummary)>;

/// Defragment the jobs' files, `workers` at a time, each worker taking the next file in
/// plan order; one outcome per job in plan order (None: not started after a fatal error).
/// One worker runs on the calling thread: the serial run, unchanged.
fn run_jobs(shared: &Shared<'_>, jobs: &[FileJob<'_>], workers: usize) -> Vec<Option<Outcome>> {
    let outcomes: Vec<Mutex<Option<Outcome>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::SeqCst);
        if i >= jobs.len() || shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let outcome = defrag_file(shared, &jobs[i]);
        if outcome.is_err() {
            shared.stop.store(true, Ordering::SeqCst);
        }
        *outcomes[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
    };
    let workers = workers.clamp(1, jobs.len().max(1));
    if workers == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(work);
            }
        });
    }
    outcomes
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect()
}

/// Move one file's planned ranges, make them durable, verify them and judge the file:
/// its report entry and its counts.
fn defrag_file(sh: &Shared<'_>, job: &FileJob<'_>) -> Outcome {
    let (entry, plan, opts) = (job.entry, job.plan, sh.opts);
    let mut summary = DefragSummary::default();
    let before = &entry.metrics.requests[0];
    let path = &entry.file.path;
    let key = (entry.file.dev, entry.file.ino);
    let shared_planned = shared_bytes_in(&entry.file.layout.extents, &plan.ranges);
    let refused = if sh.writers.contains(&key) {
        Some("open for writing by another process; --force migrates anyway (the kernel primitive stays atomic, but verification may see that writer's changes)".to_string())
    } else if shared_planned > 0 && !opts.unshare {
        // One rule on every file system: moving a shared extent gives this file its own
        // copy, so the sharing ends and the space is used twice.
        Some(format!(
            "{} bytes of the planned ranges are in shared (reflinked or snapshot) extents ({} shared in the file); moving them would break the sharing and use that much more space; --unshare moves them anyway",
            shared_planned, entry.metrics.shared_bytes
        ))
    } else {
        None
    };
    let opened = match refused {
        Some(r) => Err(r),
        None => open_target(path, key),
    };
    let (file, dir) = match opened {
        Ok(fd) => fd,
        Err(reason) => {
            fragkit_sys::stderr_line!("fragkit: {}: {reason}", path.display());
            summary.files_refused += 1;
            summary.extra_after += before.extra();
            let result = file_result(
                entry,
                plan,
                None,
                Some(reason),
                Vec::new(),
                entry.metrics.clone(),
            );
            return Ok((result, summary));
        }
    };
    let migrator = migrate::for_fs(entry.file.fs.magic, opts.method, opts.unshare)?;
    let times_before = migrate::times(&file);
    let commit_frees = FileSystemCommit {
        shared: sh,
        file: &file,
    };
    let for_primitive = migrator.open_for_primitive(&file, &dir);
    let pace_range = |in_range: u64| sh.pace_with(in_range);
    let ctx = MoveCtx {
        path,
        migrator: &*migrator,
        file: &file,
        dir: &dir,
        for_primitive: for_primitive.as_ref(),
        block_size: entry.file.fs.block_size as u64,
        goal: goal_for(&opts.mode, opts.request_size),
        request_size: opts.request_size,
        verify: opts.verify,
        plan_free_space: matches!(opts.mode, Mode::Full),
        read_as_it_moves: opts.verify && migrator.feeds_before_checksum(),
        commit_frees: &commit_frees,
        sums: verify::Sums::new(&file),
        pace: opts
            .max_rate
            .is_some()
            .then_some(&pace_range as &(dyn Fn(u64) + Sync)),
    };
    // Donors are closed on a helper thread (the other CPU): closing one evicts its inode,
    // which frees the old fragments it took over (16% of a bypass run's CPU), while the
    // mover goes on with the next range (perf and bench/defrag-ab.sh, docs/defrag.md).
    // The helper is done before the file's fsync.
    let (mut moves, mut file_moved) = std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel::<File>();
        s.spawn(move || rx.into_iter().for_each(drop));
        let release = |f: File| {
            if let Err(back) = tx.send(f) {
                drop(back.0); // the helper is gone: close it here
            }
        };
        move_ranges(sh, &ctx, plan, &release, &mut summary)
    });
    if file_moved > 0 {
        // Durable before it is reported: MOVE_EXT and the btrfs/f2fs rewrites are
        // journalled or logged but not committed; fsync commits them. Not on ext4 by
        // itself: fsync commits the transaction the inode was last dirtied in, and
        // MOVE_EXT in a file whose extent tree has index blocks changes only leaf blocks,
        // not the inode. A power cut right after a `--no-verify` bypass run brought one of
        // four 128 MiB files back with 10,671 fragments where the report said 4,686 (the
        // jbd2 trace: two of four fsyncs returned without a commit); reading the range
        // first (verification) updated atime and so hid it. syncfs commits the running
        // transaction whatever the inode's state.
        let t = Instant::now();
        let durable = file.sync_all().and_then(|()| {
            if entry.file.fs.magic == EXT4_MAGIC {
                nix::unistd::syncfs(std::os::fd::AsRawFd::as_raw_fd(&file))
                    .map_err(std::io::Error::from)
            } else {
                Ok(())
            }
        });
        if let Err(e) = durable {
            for (x, _) in moves.iter_mut().filter(|(x, _)| x.status == "moved") {
                x.status = "failed";
                x.reason = Some(format!(
                    "making the move durable failed (fsync, syncfs on ext4): {e}"
                ));
                summary.ranges_moved -= 1;
                summary.ranges_failed += 1;
            }
            file_moved = 0;
        }
        summary.sync_ms += t.elapsed().as_millis() as u64;
    }
    if opts.verify && file_moved > 0 {
        // --max-rate holds for reading the moves back too.
        let from = Instant::now();
        let pace_reads = |read: u64| sh.pace_reads(from, read);
        let pace_reads = opts
            .max_rate
            .is_some()
            .then_some(&pace_reads as &(dyn Fn(u64) + Sync));
        let (failed, failed_bytes) = verify_moved(&ctx.sums, &file, path, &mut moves, pace_reads);
        summary.verify_failures += failed;
        summary.ranges_failed += failed;
        summary.ranges_moved -= failed;
        // Their blocks were moved, but a range that failed is not reported as moved.
        file_moved -= failed_bytes;
    }
    let results: Vec<RangeResult> = moves.into_iter().map(|(r, _)| r).collect();
    summary.bytes_moved += file_moved;
    // --unshare: the shared bytes inside the ranges that moved now have a copy of their own.
    let moved: Vec<(u64, u64)> = results
        .iter()
        .filter(|x| x.status == "moved")
        .map(|x| (x.offset, x.length))
        .collect();
    summary.shared_bytes_unshared += shared_bytes_in_spans(&entry.file.layout.extents, &moved);
    let reads = ctx.sums.before_reads();
    summary.checksum_chunks_cached += reads.cached;
    summary.checksum_chunks_readahead_again += reads.readahead_again;
    summary.checksum_chunks_direct += reads.direct;
    let (after, vanished) = match map_path(path, false) {
        Ok(f) => (FileMetrics::compute(&f.layout, &[opts.request_size]), None),
        Err(e) => {
            let why = format!(
                "its layout after the run could not be read ({e}): deleted or renamed meanwhile? the figures after are those from before"
            );
            fragkit_sys::stderr_line!("fragkit: {}: {why}", path.display());
            summary.files_vanished += 1;
            (entry.metrics.clone(), Some(why))
        }
    };
    let mut times_changed = Vec::new();
    if file_moved > 0 {
        summary.files_changed += 1;
        times_changed = migrate::times_changed(times_before, migrate::times(&file));
        if !times_changed.is_empty() {
            summary.files_times_changed += 1;
        }
    }
    summary.extra_after += after.requests[0].extra();
    let mut result = file_result(
        entry,
        plan,
        Some(migrator.primitive()),
        None,
        results,
        after,
    );
    result.vanished = vanished;
    result.times_kept = (file_moved > 0).then_some(times_changed.is_empty());
    result.times_changed = times_changed;
    result.worse = worse(&result, &opts.mode);
    if let Some(w) = &result.worse {
        summary.files_worse += 1;
        fragkit_sys::stderr_line!("fragkit: WORSE: {}: {w}", path.display());
    }
    Ok((result, summary))
}

/// Move a file's planned ranges in plan order (a range with no room as a whole is retried
/// window by window in pick and bypass); each range's result beside, when verifying and
/// moved, its checksum from before, and the bytes moved. Donors go to `release`.
fn move_ranges(
    sh: &Shared<'_>,
    ctx: &MoveCtx<'_>,
    plan: &plan::FilePlan,
    release: &(dyn Fn(File) + Sync),
    summary: &mut DefragSummary,
) -> (Vec<(RangeResult, Option<Checked>)>, u64) {
    let opts = sh.opts;
    // One entry per result, its checksum beside it: kept in two lists, a range skipped
    // for the budget between two moved ones paired every later result with the check of
    // the range before it (a skipped range reported VERIFY FAILED, the moved one unchecked).
    let mut moves = Vec::new();
    let mut file_moved = 0u64;
    // Pages an application read sit in large folios; the migration's own readahead would
    // find them cached and leave them so (see verify::drop_clean_pages).
    for r in &plan.ranges {
        ctx.sums.drop_clean_pages(r.offset, r.length);
    }
    for (i, r) in plan.ranges.iter().enumerate() {
        // Interrupted: listed, not started, and no readahead for ranges that never will be.
        if sh.interrupted() {
            summary.interrupted = true;
            summary.ranges_skipped += 1;
            summary.ranges_not_improvable += 1;
            moves.push((
                RangeResult::skipped(
                    r.offset,
                    r.length,
                    Skip::new(
                        SkipKind::Interrupted,
                        "interrupted (SIGINT/SIGTERM) before it started",
                    ),
                ),
                None,
            ));
            sh.advance(r.length);
            continue;
        }
        // The next range's readahead goes out now, so the device reads its fragments while
        // this range is hashed, moved and judged (the run waits on those reads: the
        // extent floor, docs/defrag.md). Its pages are order-0 and checked again before
        // they are hashed.
        if let Some(next) = plan.ranges.get(i + 1) {
            if ctx.read_as_it_moves {
                // Only the next range's start, never all of it at once.
                ctx.sums.prefetch_start(next.offset, next.length);
            } else {
                ctx.sums.prefetch(next.offset, next.length);
            }
        }
        if !sh.reserve(r.length) {
            summary.budget_exhausted = true;
            moves.push((
                RangeResult::skipped(
                    r.offset,
                    r.length,
                    Skip::new(SkipKind::Budget, "--budget reached"),
                ),
                None,
            ));
            continue;
        }
        let first = migrate_one(ctx, release, r.offset, r.length);
        let no_room = first.0.skip == Some(SkipKind::NotBetter);
        let mut pieces = vec![first];
        // Pick and bypass: no good space for the whole range, but each R-window only
        // needs its own run. (Full mode never splits: scattered windows are how a
        // whole-file defrag makes a file worse.)
        // Only the windows that are split: one already in one piece needs nothing and is
        // neither tried nor counted.
        if no_room && r.length > opts.request_size && matches!(ctx.goal, Goal::WholeWindows(_)) {
            pieces.clear();
            for &(off, end) in &r.split_windows {
                pieces.push(migrate_one(ctx, release, off, end - off));
            }
        }
        let mut range_moved = 0u64;
        for (res, check) in pieces {
            match res.status {
                "moved" => {
                    summary.ranges_moved += 1;
                    range_moved += res.length;
                    if res.judged.is_some_and(|j| !j.better()) {
                        summary.ranges_moved_not_better += 1;
                    }
                }
                "failed" => summary.ranges_failed += 1,
                _ => {
                    summary.ranges_skipped += 1;
                    if res.skip != Some(SkipKind::Budget) {
                        summary.ranges_not_improvable += 1;
                    }
                }
            }
            moves.push((res, check));
        }
        file_moved += range_moved;
        sh.settle(r.length, range_moved);
        sh.advance(r.length);
        sh.pace();
    }
    (moves, file_moved)
}

/// Bytes of extents flagged FIEMAP_EXTENT_SHARED inside the planned ranges.
fn shared_bytes_in(extents: &[fiemap::Extent], ranges: &[plan::PlannedRange]) -> u64 {
    let spans: Vec<(u64, u64)> = ranges.iter().map(|r| (r.offset, r.length)).collect();
    shared_bytes_in_spans(extents, &spans)
}

/// Bytes of extents flagged FIEMAP_EXTENT_SHARED inside the (offset, length) spans.
fn shared_bytes_in_spans(extents: &[fiemap::Extent], spans: &[(u64, u64)]) -> u64 {
    extents
        .iter()
        .filter(|e| e.flags.contains(fiemap::ExtentFlags::SHARED))
        .map(|e| {
            spans
                .iter()
                .map(|&(off, len)| {
                    let (a, b) = (e.logical.max(off), e.logical_end().min(off + len));
                    b.saturating_sub(a)
                })
                .sum::<u64>()
        })
        .sum()
}

fn goal_for(mode: &Mode, request_size: u64) -> Goal {
    match mode {
        Mode::Full => Goal::FewerFragments,
        Mode::Pick { .. } | Mode::Bypass => Goal::WholeWindows(request_size),
    }
}

fn file_result(
    entry: &fragkit_core::scan::FileEntry,
    plan: &plan::FilePlan,
    primitive: Option<&'static str>,
    refused: Option<String>,
    ranges: Vec<RangeResult>,
    after: FileMetrics,
) -> FileResult {
    let bytes_moved = ranges
        .iter()
        .filter(|r| r.status == "moved")
        .map(|r| r.length)
        .sum();
    FileResult {
        path: entry.file.path.clone(),
        fs: entry.file.fs.type_name(),
        primitive,
        refused,
        ranges,
        not_planned: plan.skipped.clone(),
        bytes_planned: plan.bytes(),
        bytes_moved,
        fragments_before: entry.metrics.fragments,
        fragments_after: after.fragments,
        split_before: entry.metrics.requests[0].split,
        split_after: after.requests[0].split,
        ideal: after.requests[0].ideal,
        worse: None,
        vanished: None,
        times_kept: None,
        times_changed: Vec::new(),
    }
}

/// Open the scanned file read-write without following symlinks, check it is still the
/// inode that was scanned and may be touched; also open its directory for temp files.
fn open_target(path: &Path, key: (u64, u64)) -> std::result::Result<(File, File), String> {
    // Without atime updates: reading the ranges to copy and check them leaves the file's
    // atime as it was (as xfs_fsr and e4defrag do).
    let open = |write: bool| {
        fragkit_sys::openat::open_without_atime(
            OpenOptions::new().read(true).write(write),
            libc::O_NOFOLLOW | libc::O_NONBLOCK,
            path,
        )
    };
    let same_inode = |f: &File| -> std::result::Result<(), String> {
        let m = f.metadata().map_err(|e| format!("cannot stat: {e}"))?;
        if !m.file_type().is_file() {
            return Err("not a regular file".into());
        }
        if (m.dev(), m.ino()) != key {
            return Err("replaced since the scan; not touched".into());
        }
        Ok(())
    };
    // Look first through a read-only descriptor: an immutable file refuses a writable open,
    // and the user should hear why.
    let ro = open(false).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            "vanished since the scan (deleted or renamed); not touched".to_string()
        }
        _ => format!("cannot open: {e}"),
    })?;
    same_inode(&ro)?;
    if let Some(reason) = safety::refusal(&ro) {
        return Err(reason);
    }
    let file = open(true).map_err(|e| match e.raw_os_error() {
        // The kernel refuses a writable open of an active swap file whatever its name or
        // the mount namespace it was enabled from (and of a running executable).
        Some(libc::ETXTBSY) => {
            "in use as a swap file or a running program (ETXTBSY): not touched".to_string()
        }
        _ => format!("cannot open read-write: {e}"),
    })?;
    same_inode(&file)?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)
        .map_err(|e| format!("cannot open its directory: {e}"))?;
    Ok((file, dir))
}

/// What every range of one file is moved with.
struct MoveCtx<'a> {
    path: &'a Path,
    migrator: &'a dyn migrate::Migrator,
    file: &'a File,
    dir: &'a File,
    /// The migrator's own descriptor of the file, opened once for all its ranges.
    for_primitive: Option<&'a File>,
    block_size: u64,
    goal: Goal,
    request_size: u64,
    verify: bool,
    /// Full mode: plan the pieces from GETFSMAP's free space first (ext4, xfs).
    plan_free_space: bool,
    /// Verifying with a migrator that reads each range as it moves it: the
    /// before-checksum is fed by the migrator, and only the next range's start is read
    /// ahead.
    read_as_it_moves: bool,
    /// The run's commits for space: a range without a whole donor gets one more attempt
    /// after one (where donors are used: ext4's MOVE_EXT and xfs's staging file).
    commit_frees: &'a dyn migrate::CommitFrees,
    /// The file's readahead and checksums (its O_DIRECT descriptor opened once).
    sums: verify::Sums<'a>,
    /// --max-rate inside a range: waits before a step that brings the range's bytes moved
    /// to the given count. None: no rate.
    pace: Option<&'a (dyn Fn(u64) + Sync)>,
}

/// Full mode's free-space plan for a range now in `now` fragments: the piece sizes, or the
/// skip when free space cannot hold it in fewer pieces. None: no GETFSMAP here (btrfs,
/// f2fs); the result is judged after the move instead.
fn free_space_plan(
    ctx: &MoveCtx<'_>,
    length: u64,
    now: usize,
) -> std::result::Result<Option<Vec<u64>>, Skip> {
    let runs = match space::free_runs(ctx.file) {
        Ok(r) => r,
        Err(fragkit_sys::fsmap::FsmapError::Unsupported) => return Ok(None),
        Err(e) => {
            return Err(Skip::new(
                SkipKind::NoBetterLayout,
                format!("cannot read free space: {e}"),
            ))
        }
    };
    let largest = runs.first().copied().unwrap_or(0);
    match space::best_fit_pieces(&runs, length, ctx.block_size) {
        Some(p) if p.len() < now => Ok(Some(p)),
        _ => Err(Skip::new(
            SkipKind::NoBetterLayout,
            format!(
                "no better layout possible: largest free run {} KiB (the range is {} in {now} fragments)",
                largest / 1024,
                fragkit_core::units::HumanBytes(length)
            ),
        )),
    }
}

/// Migrate one range; returns its result and, when verifying, the checksum taken before
/// and the file's content stamp at that moment (checked in one pass per file afterwards).
fn migrate_one(
    ctx: &MoveCtx<'_>,
    release: &(dyn Fn(File) + Sync),
    offset: u64,
    length: u64,
) -> (RangeResult, Option<Checked>) {
    let file = ctx.file;
    let mut res = RangeResult::new(offset, length, "moved");
    let fail = |mut r: RangeResult, why: String| {
        r.status = "failed";
        r.reason = Some(why);
        (r, None)
    };
    let skip = |mut r: RangeResult, why: Skip| {
        r.status = "skipped";
        r.reason = Some(why.detail);
        r.skip = Some(why.kind);
        (r, None)
    };
    let (lo, hi) = migrate::judged_span(offset, length, ctx.request_size, ctx.block_size);
    let extents = match fiemap::read_extents_span(std::os::fd::AsFd::as_fd(file), false, lo, hi) {
        Ok(e) => e,
        Err(e) => return fail(res, e.to_string()),
    };
    let pieces = if ctx.plan_free_space {
        let now = fragkit_core::layout::model::clip_fragments(
            &fragkit_core::layout::model::FileLayout {
                size: offset + length,
                allocated: 0,
                block_size: ctx.block_size as u32,
                extents: extents.clone(),
            }
            .fragments(),
            offset,
            offset + length,
        )
        .len();
        match free_space_plan(ctx, length, now) {
            Ok(p) => p,
            Err(why) => return skip(res, why),
        }
    } else {
        None
    };
    res.planned_pieces = pieces.as_ref().map(Vec::len);
    let size = file.metadata().map(|m| m.size()).unwrap_or(0);
    // mtime/ctime change with writes, not with a migration of unchanged data.
    let stamp_before = migrate::stamp(file);
    // A migrator that reads as it moves takes the checksum window by window (below).
    let fed = ctx.read_as_it_moves;
    let before_hash = if fed {
        match ctx.sums.before_hash(offset, length) {
            Ok(b) => Some(b),
            Err(e) => return fail(res, format!("reading before migration: {e}")),
        }
    } else {
        None
    };
    // Before each step of a migrator that moves in steps: the before-checksum up to the
    // step's end, then --max-rate's wait for the step's bytes.
    let before_step = |upto: u64| {
        if let Some(b) = &before_hash {
            b.read_to(upto)?;
        }
        if let Some(pace) = ctx.pace {
            pace(upto.saturating_sub(offset));
        }
        Ok(())
    };
    let before = if fed {
        None
    } else if ctx.verify {
        match ctx.sums.hash_before(offset, length) {
            Ok(h) => Some(h),
            Err(e) => return fail(res, format!("reading before migration: {e}")),
        }
    } else {
        // The migration reads the range anyway: ask for all of it at once.
        ctx.sums.prefetch(offset, length);
        None
    };
    let target = Target {
        file,
        dir: ctx.dir,
        for_primitive: ctx.for_primitive,
        size,
        block_size: ctx.block_size,
        extents: &extents,
        goal: ctx.goal,
        request_size: ctx.request_size,
        pieces: pieces.as_deref(),
        release: Some(release),
        commit_frees: ctx.commit_frees,
        before_step: (fed || ctx.pace.is_some())
            .then_some(&before_step as &dyn Fn(u64) -> std::io::Result<()>),
    };
    movelog::begin(ctx.path, offset, length);
    let outcome = ctx.migrator.migrate(&target, offset, length);
    movelog::end(ctx.path, offset, length, outcome_word(&outcome));
    let mut stamp_to_verify = stamp_before;
    match outcome {
        Ok(RangeOutcome::Moved {
            judged, restamped, ..
        }) => {
            res.judged = Some(judged);
            if let Some(r) = restamped {
                // The primitive changed the times itself: another writer shows as a change
                // between our stamp and its start; after it, the times it left are the base.
                if r.began != stamp_before {
                    res.reason = Some("file changed concurrently; checksum not comparable".into());
                    return (res, None);
                }
                stamp_to_verify = r.ended;
            }
            if !judged.better() {
                // Only where the kernel chose the space (btrfs, f2fs, rewrite): the move
                // is done and cannot be taken back; say so.
                res.reason = Some(format!(
                    "MOVED BUT NOT BETTER: the file system placed it so: {}",
                    judged.describe()
                ));
            }
        }
        Ok(RangeOutcome::Skipped(why)) => return skip(res, why),
        Err(e) => return fail(res, format!("{}: {e:#}", ctx.migrator.primitive())),
    }
    let before = match before_hash.map(verify::BeforeHash::finish) {
        None => before,
        Some(Ok(h)) => Some(h),
        // Moved, but not all of it was read first: nothing to compare it with.
        Some(Err(e)) => {
            res.reason = Some(format!("moved without a checksum from before: {e}"));
            None
        }
    };
    let checked = before.map(|hash| Checked {
        hash,
        stamp: stamp_to_verify,
    });
    (res, checked)
}

fn outcome_word(o: &Result<RangeOutcome>) -> &'static str {
    match o {
        Ok(RangeOutcome::Moved { .. }) => "moved",
        Ok(RangeOutcome::Skipped(_)) => "skipped",
        Err(_) => "failed",
    }
}

/// Whether a file came out worse, and how: more split requests at R; or more fragments
/// without fewer split requests (pick and bypass may cut a run to save a request); in full
/// mode, any more fragments.
fn worse(f: &FileResult, mode: &Mode) -> Option<String> {
    let more_frags = f.fragments_after > f.fragments_before;
    let more_split = f.split_after > f.split_before;
    let is_worse = more_split
        || (more_frags && (matches!(mode, Mode::Full) || f.split_after >= f.split_before));
    is_worse.then(|| {
        format!(
            "came out worse: fragments {}→{}, split requests {}→{}",
            f.fragments_before, f.fragments_after, f.split_before, f.split_after
        )
    })
}

/// What a moved range looked like before: compared after the file's last range.
struct Checked {
    hash: u64,
    stamp: Option<migrate::Stamp>,
}

/// Read every moved range back from the device (one writeback and cache drop per file)
/// and compare with its checksum from before; the ranges that failed and their bytes.
/// `pace`: called with the bytes read back so far, with the next read's, before it is
/// sent (--max-rate).
fn verify_moved(
    sums: &verify::Sums<'_>,
    file: &File,
    path: &Path,
    moves: &mut [(RangeResult, Option<Checked>)],
    pace: Option<&(dyn Fn(u64) + Sync)>,
) -> (u64, u64) {
    let (mut failures, mut failed_bytes) = (0, 0);
    if let Err(e) = verify::write_back(file) {
        for (r, _) in moves.iter_mut().filter(|(r, _)| r.status == "moved") {
            r.reason = Some(format!("could not read back to verify: {e}"));
        }
        return (0, 0);
    }
    // Every checked range read back in one pass (reads of several ranges in flight).
    let wanted: Vec<(u64, u64)> = moves
        .iter()
        .filter(|(_, c)| c.is_some())
        .map(|(r, _)| (r.offset, r.length))
        .collect();
    movelog::verifying(path, wanted.len());
    let mut hashes = sums.hash_after_all(&wanted, pace).into_iter();
    // Stamped after the reads: a write that landed in them shows here (a stamp taken
    // before the reads missed writes made between it and the read: a false VERIFY
    // FAILED with a concurrent writer, tests/defrag_fs.rs concurrent_writer_ext4).
    let now = migrate::stamp(file);
    for (r, c) in moves.iter_mut() {
        let Some(c) = c else { continue };
        let Some(hashed) = hashes.next() else { break };
        match hashed {
            Ok(h) if h == c.hash => r.verified = Some(true),
            Ok(_) if now != c.stamp => {
                r.reason = Some("file changed concurrently; checksum not comparable".into())
            }
            Ok(_) => {
                r.verified = Some(false);
                r.status = "failed";
                r.reason = Some("VERIFY FAILED: data read back differs from before".into());
                failures += 1;
                failed_bytes += r.length;
            }
            // An I/O error on moved data is what a corrupted block gives where the file
            // system checks its data (btrfs's checksums): the data is not there to read.
            Err(e) if e.raw_os_error() == Some(libc::EIO) => {
                r.verified = Some(false);
                r.status = "failed";
                r.reason = Some(format!(
                    "VERIFY FAILED: the data cannot be read back ({e}); the device or the file system's checksums reject it"
                ));
                failures += 1;
                failed_bytes += r.length;
            }
            Err(e) => r.reason = Some(format!("could not read back to verify: {e}")),
        }
    }
    (failures, failed_bytes)
}

#[cfg(test)]
mod tests {
    use super::DefragSummary;

    #[test]
    fn exit_status_is_1_for_each_kind_of_incomplete_work() {
        let done = DefragSummary {
            ranges_moved: 3,
            bytes_moved: 1 << 20,
            ..Default::default()
        };
        assert_eq!(done.exit_code(), 0);
        let budget_only = DefragSummary {
            ranges_skipped: 2,
            budget_exhausted: true,
            ..done.clone()
        };
        assert_eq!(budget_only.exit_code(), 0, "--budget is what was asked");
        for set in [
            |s: &mut DefragSummary| s.files_refused = 1,
            |s: &mut DefragSummary| s.ranges_failed = 1,
            |s: &mut DefragSummary| s.verify_failures = 1,
            |s: &mut DefragSummary| s.files_worse = 1,
            |s: &mut DefragSummary| s.ranges_not_improvable = 1,
            |s: &mut DefragSummary| s.ranges_moved_not_better = 1,
        ] {
            let mut s = done.clone();
            set(&mut s);
            assert_eq!(s.exit_code(), 1, "{s:?}");
        }
    }
}
