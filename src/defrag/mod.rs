//! `fragkit defrag`: plan (pick | bypass | full) → migrate with each file system's atomic
//! primitive → verify, and report what it cost and what it bought.

pub mod migrate;
pub mod plan;
pub mod safety;
pub mod verify;

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use crate::age::fstune::SysfsTunable;
use crate::layout::walk::map_path;
use crate::metrics::FileMetrics;
use crate::scan::scan_paths;
use crate::sys::fiemap;
use crate::sys::fsinfo::F2FS_MAGIC;
use migrate::{Goal, Method, RangeOutcome, Target};
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
}

#[derive(Debug, Clone, Serialize)]
pub struct RangeResult {
    pub offset: u64,
    pub length: u64,
    /// planned (dry run) | moved | skipped | failed
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The migrator's own reason when it skipped the range (`reason` says it in words).
    #[serde(skip)]
    pub skip: Option<migrate::SkipReason>,
    /// true: checksum equal after reading back from disk; false: differs; null: not
    /// checked (--no-verify) or inconclusive (file changed concurrently).
    pub verified: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileResult {
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
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DefragSummary {
    pub files_scanned: u64,
    pub files_planned: u64,
    pub files_changed: u64,
    pub files_refused: u64,
    pub ranges_planned: u64,
    pub ranges_moved: u64,
    pub ranges_skipped: u64,
    pub ranges_failed: u64,
    pub bytes_planned: u64,
    pub bytes_moved: u64,
    pub extra_before: u64,
    pub extra_after: u64,
    pub verify_failures: u64,
    pub budget_exhausted: bool,
    pub elapsed_ms: u64,
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
    /// File-system knobs set for the run (f2fs ipu_policy for --method rewrite).
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

/// Knobs held for the run, one per device; dropping restores them (error paths too).
#[derive(Default)]
struct HeldTunables(Vec<(u64, SysfsTunable)>);

impl HeldTunables {
    /// F2FS overwrites in place under most ipu_policy values; the rewrite method needs
    /// every write out of place, so switch in-place updates off on `path`'s device.
    fn f2fs_out_of_place(&mut self, dev: u64, path: &Path) -> Result<()> {
        if self.0.iter().any(|(d, _)| *d == dev) {
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
        self.0.push((dev, t));
        Ok(())
    }

    /// Put every knob back and say what was done.
    fn restore(self) -> Vec<TunableChange> {
        self.0
            .into_iter()
            .map(|(_, t)| {
                let (knob, from, to) = (
                    t.knob().to_path_buf(),
                    t.old().to_string(),
                    t.new_value().to_string(),
                );
                let restored = match t.restore() {
                    Ok(()) => true,
                    Err(e) => {
                        eprintln!("fragkit: {}: restoring {from}: {e}", knob.display());
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
    let started = Instant::now();
    let scan = scan_paths(paths, &[opts.request_size]).map_err(anyhow::Error::msg)?;
    for e in &scan.errors {
        eprintln!("fragkit: {}: {}", e.path.display(), e.message);
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
        ..Default::default()
    };
    let mut files = Vec::new();
    let mut moved_total = 0u64;
    let mut done_bytes = 0u64;
    let mut tunables = HeldTunables::default();
    for (entry, plan) in scan.files.iter().zip(&plans) {
        let before = &entry.metrics.requests[0];
        summary.extra_before += before.extra();
        if plan.ranges.is_empty() {
            summary.extra_after += before.extra();
            if !plan.skipped.is_empty() {
                files.push(file_result(
                    entry,
                    plan,
                    None,
                    None,
                    Vec::new(),
                    entry.metrics.clone(),
                ));
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
                .map(|r| RangeResult {
                    offset: r.offset,
                    length: r.length,
                    status: "planned",
                    reason: None,
                    skip: None,
                    verified: None,
                })
                .collect();
            summary.extra_after += before.extra().saturating_sub(plan.extra_removed());
            files.push(file_result(
                entry,
                plan,
                None,
                None,
                ranges,
                entry.metrics.clone(),
            ));
            continue;
        }
        let path = &entry.file.path;
        let key = (entry.file.dev, entry.file.ino);
        let refused = if writers.contains(&key) {
            Some("open for writing by another process; --force migrates anyway (the kernel primitive stays atomic, but verification may see that writer's changes)".to_string())
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
                summary.files_refused += 1;
                summary.extra_after += before.extra();
                files.push(file_result(
                    entry,
                    plan,
                    None,
                    Some(reason),
                    Vec::new(),
                    entry.metrics.clone(),
                ));
                continue;
            }
        };
        let migrator = migrate::for_fs(entry.file.fs.magic, opts.method, opts.unshare)?;
        if opts.method == Method::Rewrite && entry.file.fs.magic == F2FS_MAGIC {
            tunables.f2fs_out_of_place(entry.file.dev, path)?;
        }
        let mut results = Vec::new();
        let mut checks = Vec::new();
        let mut file_moved = 0u64;
        for r in &plan.ranges {
            if opts.budget.is_some_and(|b| moved_total + r.length > b) {
                summary.budget_exhausted = true;
                results.push(RangeResult {
                    offset: r.offset,
                    length: r.length,
                    status: "skipped",
                    reason: Some("--budget reached".into()),
                    skip: None,
                    verified: None,
                });
                continue;
            }
            let bs = entry.file.fs.block_size as u64;
            let goal = goal_for(&opts.mode, opts.request_size);
            let run =
                |off, len| migrate_one(&*migrator, &file, &dir, off, len, bs, goal, opts.verify);
            let first = run(r.offset, r.length);
            let no_room = first
                .0
                .skip
                .is_some_and(|w| matches!(w, migrate::SkipReason::NoContiguousSpace(_)));
            let mut pieces = vec![first];
            // No good space for the whole range: each R-window only needs its own run.
            if no_room && r.length > opts.request_size {
                pieces.clear();
                let mut off = r.offset;
                while off < r.offset + r.length {
                    let len = (opts.request_size - off % opts.request_size)
                        .min(r.offset + r.length - off);
                    pieces.push(run(off, len));
                    off += len;
                }
            }
            for (res, check) in pieces {
                match res.status {
                    "moved" => {
                        summary.ranges_moved += 1;
                        file_moved += res.length;
                        moved_total += res.length;
                    }
                    "failed" => summary.ranges_failed += 1,
                    _ => summary.ranges_skipped += 1,
                }
                results.push(res);
                checks.push(check);
            }
            done_bytes += r.length;
            progress(done_bytes, total_planned);
            if let Some(rate) = opts.max_rate {
                // Sleep until the average rate is back under the limit.
                let should_take = Duration::from_secs_f64(moved_total as f64 / rate as f64);
                let took = started.elapsed();
                if should_take > took {
                    std::thread::sleep(should_take - took);
                }
            }
        }
        if opts.verify && file_moved > 0 {
            let failed = verify_moved(&file, &mut results, &checks);
            summary.verify_failures += failed;
            summary.ranges_failed += failed;
            summary.ranges_moved -= failed;
        }
        summary.bytes_moved += file_moved;
        let after = map_path(path, false)
            .map(|f| FileMetrics::compute(&f.layout, &[opts.request_size]))
            .unwrap_or_else(|_| entry.metrics.clone());
        if file_moved > 0 {
            summary.files_changed += 1;
        }
        summary.extra_after += after.requests[0].extra();
        files.push(file_result(
            entry,
            plan,
            Some(migrator.primitive()),
            None,
            results,
            after,
        ));
    }
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

fn goal_for(mode: &Mode, request_size: u64) -> Goal {
    match mode {
        Mode::Full => Goal::FewerFragments,
        Mode::Pick { .. } | Mode::Bypass => Goal::WholeWindows(request_size),
    }
}

fn file_result(
    entry: &crate::scan::FileEntry,
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
    }
}

/// Open the scanned file read-write without following symlinks, check it is still the
/// inode that was scanned and may be touched; also open its directory for temp files.
fn open_target(path: &Path, key: (u64, u64)) -> std::result::Result<(File, File), String> {
    let open = |write: bool| {
        OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
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
    let ro = open(false).map_err(|e| format!("cannot open: {e}"))?;
    same_inode(&ro)?;
    if let Some(reason) = safety::refusal(&ro) {
        return Err(reason);
    }
    let file = open(true).map_err(|e| format!("cannot open read-write: {e}"))?;
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

fn stamp(f: &File) -> Option<(i64, i64, i64, i64, u64)> {
    f.metadata().ok().map(|m| {
        (
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
            m.size(),
        )
    })
}

/// Migrate one range; returns its result and, when verifying, the checksum taken before
/// and the file's content stamp at that moment (checked in one pass per file afterwards).
#[allow(clippy::too_many_arguments)]
fn migrate_one(
    migrator: &dyn migrate::Migrator,
    file: &File,
    dir: &File,
    offset: u64,
    length: u64,
    block_size: u64,
    goal: Goal,
    verify: bool,
) -> (RangeResult, Option<Checked>) {
    let mut res = RangeResult {
        offset,
        length,
        status: "moved",
        reason: None,
        skip: None,
        verified: None,
    };
    let fail = |mut r: RangeResult, why: String| {
        r.status = "failed";
        r.reason = Some(why);
        (r, None)
    };
    let extents = match fiemap::read_extents(std::os::fd::AsFd::as_fd(file), false) {
        Ok(e) => e,
        Err(e) => return fail(res, e.to_string()),
    };
    let size = file.metadata().map(|m| m.size()).unwrap_or(0);
    // mtime/ctime change with writes, not with a migration of unchanged data.
    let stamp_before = stamp(file);
    let before = if verify {
        match verify::hash_range(file, offset, length) {
            Ok(h) => Some(h),
            Err(e) => return fail(res, format!("reading before migration: {e}")),
        }
    } else {
        None
    };
    let target = Target {
        file,
        dir,
        size,
        block_size,
        extents: &extents,
        goal,
    };
    match migrator.migrate(&target, offset, length) {
        Ok(RangeOutcome::Moved { .. }) => {}
        Ok(RangeOutcome::Skipped(why)) => {
            res.status = "skipped";
            res.reason = Some(why.to_string());
            res.skip = Some(why);
            return (res, None);
        }
        Err(e) => return fail(res, format!("{}: {e:#}", migrator.primitive())),
    }
    let checked = before.map(|hash| Checked {
        hash,
        stamp: stamp_before,
    });
    (res, checked)
}

/// What a moved range looked like before: compared after the file's last range.
struct Checked {
    hash: u64,
    stamp: Option<(i64, i64, i64, i64, u64)>,
}

/// Read every moved range back from the device (one writeback and cache drop per file)
/// and compare with its checksum from before.
fn verify_moved(file: &File, results: &mut [RangeResult], checks: &[Option<Checked>]) -> u64 {
    let mut failures = 0;
    if let Err(e) = verify::write_back(file) {
        for r in results.iter_mut().filter(|r| r.status == "moved") {
            r.reason = Some(format!("could not read back to verify: {e}"));
        }
        return 0;
    }
    let now = stamp(file);
    for (r, c) in results.iter_mut().zip(checks) {
        let Some(c) = c else { continue };
        match verify::hash_range(file, r.offset, r.length) {
            Ok(h) if h == c.hash => r.verified = Some(true),
            Ok(_) if now != c.stamp => {
                r.reason = Some("file changed concurrently; checksum not comparable".into())
            }
            Ok(_) => {
                r.verified = Some(false);
                r.status = "failed";
                r.reason = Some("VERIFY FAILED: data read back differs from before".into());
                failures += 1;
            }
            Err(e) => r.reason = Some(format!("could not read back to verify: {e}")),
        }
    }
    failures
}
