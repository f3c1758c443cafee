//! The tick: drain events, re-map what changed, update totals and history.

use std::collections::{HashMap, HashSet, VecDeque};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::index::FileIndex;
use super::{Change, Source};
use crate::store::{FileSummary, Store, Totals};
use fragkit_core::layout::model::FileLayout;
use fragkit_core::layout::walk::{self, Root, ScannedFile, WalkOptions, WalkStats};
use fragkit_core::metrics::FileMetrics;

/// Files whose block runs the engine keeps for the live map, and runs kept per file.
pub(crate) const MAP_FILES: usize = 256;
pub(crate) const MAP_RUNS: usize = 512;
/// Ticks of totals kept in memory for the live page.
pub(crate) const LIVE_SERIES: usize = 900;

#[derive(Debug, Clone)]
pub struct Config {
    /// Canonical roots (directories or files).
    pub roots: Vec<PathBuf>,
    pub request_size: u64,
    /// Full rescan period (None: only at start and after lost events).
    pub rescan: Option<Duration>,
    /// Paths never tracked, nor anything below them (the history database and its
    /// journal files, the --fragtracer directory).
    pub ignore: Vec<PathBuf>,
}

/// A file met by a walk: path, dev, inode, summary, runs for the live map, and whether
/// parts of it still wait for delayed allocation.
type Found = (
    PathBuf,
    u64,
    u64,
    FileSummary,
    Option<Vec<(u64, u64)>>,
    bool,
);

/// Data still in the page cache without blocks (delayed allocation): FIEMAP shows no place
/// for it yet, and writeback will place it without any event the watch could hear.
fn awaits_allocation(layout: &FileLayout) -> bool {
    use fragkit_core::layout::model::ExtentFlags;
    layout
        .extents
        .iter()
        .any(|e| e.flags.contains(ExtentFlags::DELALLOC) || e.flags.contains(ExtentFlags::UNKNOWN))
}

/// One file's placement for the live map: (physical byte, length) per fragment.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MapEntry {
    pub path: String,
    pub runs: Vec<(u64, u64)>,
}

/// What one tick did.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct TickReport {
    pub tick: u64,
    pub t: f64,
    pub events: u64,
    pub changed_files: u64,
    pub mapped_files: u64,
    pub full_rescan: bool,
    pub tick_ms: f64,
}

pub struct Engine {
    pub cfg: Config,
    pub store: Store,
    source: Source,
    /// Every tracked file, compactly (72 bytes + its name; see `index`).
    pub files: FileIndex,
    pub totals: Totals,
    pub by_ext: HashMap<String, Totals>,
    pub by_dir: HashMap<PathBuf, Totals>,
    dirty_groups: HashSet<(bool, PathBuf)>,
    /// Recently changed files' runs, oldest first (bounded by MAP_FILES).
    pub maps: VecDeque<MapEntry>,
    pub series: VecDeque<(f64, Totals)>,
    pub tick: u64,
    pub full_rescans: u64,
    pub last: TickReport,
    generation: u32,
    last_full: Instant,
    overflowed: bool,
    changes: Vec<Change>,
    /// Files whose last map had delayed-allocation extents: mapped again every tick until
    /// writeback has placed them (`sync`, or the kernel's ~30 s dirty expiry), as writeback
    /// raises no event.
    pending: HashSet<PathBuf>,
    /// File records changed (mapped differently, created, renamed, deleted) since the
    /// current tick began; the start-up scan counts before the first tick.
    pub changed: u64,
    /// Size of the first root's file system, for the live map's scale.
    pub fs_bytes: u64,
    /// The history could not be written at the last tick: each tick tries a small write
    /// first, and when it goes through, a full rescan rebuilds what was undone.
    history_down: bool,
}

/// A tick could not write the history (disk full, I/O error): its writes were undone and
/// the engine forgot its records, which the next tick that can write rebuilds by a full
/// rescan. The watch goes on; what it publishes stays at the last tick written.
#[derive(Debug)]
pub struct HistoryUnwritable {
    pub db: PathBuf,
    pub cause: String,
}

impl std::fmt::Display for HistoryUnwritable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: cannot write the history: {}",
            self.db.display(),
            self.cause
        )
    }
}

impl std::error::Error for HistoryUnwritable {}

/// Whether an error came from SQLite (the history), not from the file system watched.
fn is_store_error(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| c.downcast_ref::<rusqlite::Error>().is_some())
}

pub fn now() -> f64 {
    fragkit_core::units::unix_now()
}

/// Lower-case extension, "" when none: the per-extension group key.
pub(crate) fn extension_of(p: &Path) -> String {
    p.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

fn parent_of(p: &Path) -> PathBuf {
    p.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn summarize(layout: &FileLayout, request_size: u64) -> FileSummary {
    let m = FileMetrics::compute(layout, &[request_size]);
    FileSummary {
        size: m.size,
        allocated: m.allocated,
        extents: m.extents,
        fragments: m.fragments,
        split: m.requests[0].split,
        ideal: m.requests[0].ideal,
    }
}

fn runs_of(layout: &FileLayout) -> Vec<(u64, u64)> {
    layout
        .fragments()
        .iter()
        .take(MAP_RUNS)
        .map(|f| (f.physical, f.length))
        .collect()
}

impl Engine {
    pub fn new(cfg: Config, store: Store, source: Source) -> Engine {
        let fs_bytes = cfg
            .roots
            .first()
            .and_then(|r| nix::sys::statvfs::statvfs(r.as_path()).ok())
            .map(|s| s.blocks() * s.fragment_size())
            .unwrap_or(0);
        Engine {
            cfg,
            store,
            source,
            files: FileIndex::new(),
            totals: Totals::default(),
            by_ext: HashMap::new(),
            by_dir: HashMap::new(),
            dirty_groups: HashSet::new(),
            maps: VecDeque::new(),
            series: VecDeque::new(),
            tick: 0,
            full_rescans: 0,
            last: TickReport::default(),
            generation: 0,
            last_full: Instant::now(),
            overflowed: false,
            changes: Vec::new(),
            pending: HashSet::new(),
            changed: 0,
            fs_bytes,
            history_down: false,
        }
    }

    /// Forget every record (after a tick's writes were undone): the next full rescan
    /// finds each file again, by inode, in the history.
    fn forget_records(&mut self) {
        self.files = FileIndex::new();
        self.totals = Totals::default();
        self.by_ext.clear();
        self.by_dir.clear();
        self.dirty_groups.clear();
        self.maps.clear();
        self.pending.clear();
        self.overflowed = true;
    }

    pub fn source_name(&self) -> &'static str {
        self.source.name()
    }

    /// Between ticks: let the change source wait up to `timeout` (see `Source::wait`).
    pub fn wait_for_events(&mut self, timeout: Duration) -> Result<()> {
        Ok(self.source.wait(timeout)?)
    }

    /// A path longer than the kernel takes: the walk reaches it (it opens directory by
    /// directory) but nothing can map it again by name, so it is skipped and named once.
    fn too_long(&self, p: &Path) -> bool {
        match crate::skipped::too_long_prefix(p) {
            Some(first) => {
                crate::skipped::skip(first, &crate::skipped::too_long(first));
                true
            }
            None => false,
        }
    }

    fn wanted(&self, p: &Path) -> bool {
        self.cfg.roots.iter().any(|r| p.starts_with(r))
            && !self.cfg.ignore.iter().any(|i| p.starts_with(i))
    }

    fn group_add(&mut self, path: &Path, s: &FileSummary, add: bool) {
        let ext = extension_of(path);
        let dir = parent_of(path);
        let e = self.by_ext.entry(ext.clone()).or_default();
        let d = self.by_dir.entry(dir.clone()).or_default();
        if add {
            self.totals.add(s);
            e.add(s);
            d.add(s);
        } else {
            self.totals.sub(s);
            e.sub(s);
            d.sub(s);
        }
        self.dirty_groups.insert((true, PathBuf::from(ext)));
        self.dirty_groups.insert((false, dir));
    }

    fn remember_map(&mut self, path: &Path, layout: &FileLayout) {
        let key = path.to_string_lossy().into_owned();
        self.maps.retain(|m| m.path != key);
        if self.maps.len() >= MAP_FILES {
            self.maps.pop_front();
        }
        self.maps.push_back(MapEntry {
            path: key,
            runs: runs_of(layout),
        });
    }

    fn forget_map(&mut self, path: &Path) {
        let key = path.to_string_lossy();
        self.maps.retain(|m| m.path != key);
    }

    /// A file was mapped: record it if new or changed. Returns whether anything changed.
    fn update(&mut self, path: &Path, dev: u64, ino: u64, s: FileSummary, t: f64) -> Result<bool> {
        let gen = self.generation;
        if let Some(slot) = self.files.get(path) {
            let r = *self.files.rec(slot);
            if self.files.dev(slot) == dev && r.ino == ino {
                self.files.set_seen(slot, gen);
                if !self.files.set_summary(slot, &s) {
                    return Ok(false);
                }
                // Totals move by what the record holds (u32 counters saturate).
                let new = self.files.rec(slot).summary();
                self.group_add(path, &r.summary(), false);
                self.group_add(path, &new, true);
                self.store.sample(r.id, t, &s)?;
                self.changed += 1;
                return Ok(true);
            }
            // Another file now has this name (replaced by a rename or recreated).
            self.remove(path, t)?;
        }
        let same_file = |ix: &FileIndex, slot: u32| ix.dev(slot) == dev && ix.rec(slot).ino == ino;
        let id = match self.store.file_by_inode(dev, ino)? {
            Some((id, old)) => {
                let old = PathBuf::from(old);
                if old != path {
                    let at_old = self.files.get(&old).filter(|&o| same_file(&self.files, o));
                    if at_old.is_some() && old.exists() {
                        // A second hard link to a tracked file: counted once, under its first name.
                        return Ok(false);
                    }
                    // Moved while its events were not seen: history follows the inode.
                    if let Some(o) = at_old {
                        let r = self.files.remove(o);
                        self.group_add(&old, &r.summary(), false);
                    }
                    self.store.rename(
                        id,
                        &old.to_string_lossy(),
                        path,
                        &extension_of(path),
                        &parent_of(path).to_string_lossy(),
                        t,
                    )?;
                }
                id
            }
            None => self.store.new_file(
                path,
                dev,
                ino,
                &extension_of(path),
                &parent_of(path).to_string_lossy(),
                t,
            )?,
        };
        self.store.sample(id, t, &s)?;
        let slot = self.files.insert(path, dev, ino, id, &s, gen)?;
        let held = self.files.rec(slot).summary();
        self.group_add(path, &held, true);
        self.changed += 1;
        Ok(true)
    }

    /// A path is gone: the file, or every file below it if it was a directory.
    fn remove(&mut self, path: &Path, t: f64) -> Result<u64> {
        let gone: Vec<(u32, PathBuf)> = match self.files.get(path) {
            Some(slot) => vec![(slot, path.to_path_buf())],
            None => {
                let below = self.files.below(path);
                below.into_iter().map(|s| (s, self.files.path(s))).collect()
            }
        };
        for (slot, p) in &gone {
            let r = self.files.remove(*slot);
            self.group_add(p, &r.summary(), false);
            self.store.delete(r.id, t)?;
            self.forget_map(p);
        }
        self.changed += gone.len() as u64;
        Ok(gone.len() as u64)
    }

    /// Renamed: the file (or every file below a directory) keeps its id and history.
    fn rename(&mut self, from: &Path, to: &Path, t: f64) -> Result<()> {
        let moved: Vec<(u32, PathBuf, PathBuf)> = match self.files.get(from) {
            Some(slot) => vec![(slot, from.to_path_buf(), to.to_path_buf())],
            None => self
                .files
                .below(from)
                .into_iter()
                .filter_map(|slot| {
                    let old = self.files.path(slot);
                    let new = to.join(old.strip_prefix(from).ok()?);
                    Some((slot, old, new))
                })
                .collect(),
        };
        for (slot, old, new) in moved {
            if self.files.get(&new).is_some_and(|other| other != slot) {
                self.remove(&new, t)?;
            }
            let r = *self.files.rec(slot);
            self.group_add(&old, &r.summary(), false);
            self.group_add(&new, &r.summary(), true);
            self.store.rename(
                r.id,
                &old.to_string_lossy(),
                &new,
                &extension_of(&new),
                &parent_of(&new).to_string_lossy(),
                t,
            )?;
            self.files.rename(slot, &new)?;
            self.changed += 1;
            let key = old.to_string_lossy().into_owned();
            if let Some(m) = self.maps.iter_mut().find(|m| m.path == key) {
                m.path = new.to_string_lossy().into_owned();
            }
        }
        Ok(())
    }

    /// Map every file under the roots (in parallel); files not found any more are removed.
    /// Returns the number of files whose record changed.
    pub fn full_scan(&mut self, t: f64) -> Result<u64> {
        self.generation = self.generation.wrapping_add(1);
        let roots: Vec<Root> = self
            .cfg
            .roots
            .iter()
            .filter_map(|p| walk::check_root(p).ok())
            .collect();
        let (mut changed, _) = self.scan_tree(roots, t)?;
        let gen = self.generation;
        let gone: Vec<PathBuf> = self
            .files
            .iter()
            .filter(|(_, r)| r.seen != gen)
            .map(|(slot, _)| self.files.path(slot))
            .collect();
        for p in gone {
            changed += self.remove(&p, t)?;
        }
        // Files a previous run left live in the database but that are not here now
        // (a sorted id list: 8 bytes a file, not a hash set's ~20).
        let mut live: Vec<i64> = self.files.iter().map(|(_, r)| r.id).collect();
        live.sort_unstable();
        for id in self.store.live_ids()? {
            if live.binary_search(&id).is_err() {
                self.store.delete(id, t)?;
            }
        }
        self.full_rescans += 1;
        self.last_full = Instant::now();
        Ok(changed)
    }

    /// Walk `roots` on a helper thread and record every file as it arrives, so a huge tree
    /// never sits in memory twice. Returns (records changed, files mapped).
    fn scan_tree(&mut self, roots: Vec<Root>, t: f64) -> Result<(u64, u64)> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let r = self.cfg.request_size;
        let (tx, rx) = crossbeam_channel::bounded::<Found>(4096);
        let mut result = Ok((0u64, 0u64));
        // Every file the walker opens raises FAN_OPEN: read those as they come and drop
        // them, so a big tree cannot overflow the queue and look changed at the next tick.
        self.source.mapping_tree(true);
        let mut since_pump = 0u32;
        std::thread::scope(|scope| {
            scope.spawn(move || {
                // Runs for the live map: the first MAP_FILES fragmented and MAP_FILES other
                // files met, so a huge tree never holds all its extents at once.
                let (fragmented, others) = (AtomicUsize::new(0), AtomicUsize::new(0));
                let visit = |f: ScannedFile| {
                    let s = summarize(&f.layout, r);
                    let counter = if s.is_fragmented() {
                        &fragmented
                    } else {
                        &others
                    };
                    let keep = counter.fetch_add(1, Ordering::Relaxed) < MAP_FILES;
                    let runs = keep.then(|| runs_of(&f.layout));
                    let waiting = awaits_allocation(&f.layout);
                    let _ = tx.send((f.path, f.dev, f.ino, s, runs, waiting));
                };
                // What the walk could not read (a directory without permission): named
                // once, skipped, the watch goes on.
                for e in walk::walk(
                    &roots,
                    &WalkOptions::default(),
                    &WalkStats::default(),
                    &visit,
                ) {
                    crate::skipped::skip(&e.path, &e.message);
                }
            });
            for (path, dev, ino, s, runs, waiting) in rx {
                since_pump += 1;
                if since_pump >= 1024 {
                    since_pump = 0;
                    if let Err(e) = self.source.pump() {
                        result = Err(e.into());
                    }
                }
                let Ok((changed, mapped)) = &mut result else {
                    continue; // keep draining so the walker can finish
                };
                *mapped += 1;
                if !self.wanted(&path) || self.too_long(&path) {
                    continue;
                }
                if waiting {
                    self.pending.insert(path.clone());
                }
                match self.update(&path, dev, ino, s, t) {
                    Ok(true) => {
                        *changed += 1;
                        if let Some(runs) = runs {
                            self.forget_map(&path);
                            if self.maps.len() >= MAP_FILES {
                                self.maps.pop_front();
                            }
                            self.maps.push_back(MapEntry {
                                path: path.to_string_lossy().into_owned(),
                                runs,
                            });
                        }
                    }
                    Ok(false) => {}
                    Err(e) => result = Err(e),
                }
            }
        });
        let pumped = self.source.pump();
        self.source.mapping_tree(false);
        pumped?;
        result
    }

    /// One tick: drain events, re-map changed paths, write history. When the history
    /// cannot be written the error is a [`HistoryUnwritable`] and the watch may go on.
    pub fn run_tick(&mut self) -> Result<TickReport> {
        let unwritable = |store: &Store, e: anyhow::Error| {
            anyhow::Error::new(HistoryUnwritable {
                db: store.path().to_path_buf(),
                cause: format!("{:#}", e),
            })
        };
        if self.history_down {
            // Events are dropped: the full rescan that follows a good write sees all.
            let mut changes = std::mem::take(&mut self.changes);
            self.source.drain(&mut changes)?;
            changes.clear();
            self.changes = changes;
            if let Err(e) = self.store.probe() {
                return Err(unwritable(&self.store, e));
            }
            self.history_down = false;
        }
        match self.tick_inner() {
            Err(e) if is_store_error(&e) => {
                self.store.rollback();
                self.forget_records();
                self.history_down = true;
                Err(unwritable(&self.store, e))
            }
            r => r,
        }
    }

    fn tick_inner(&mut self) -> Result<TickReport> {
        let start = Instant::now();
        let t = now();
        self.tick += 1;
        self.changed = 0;
        let mut changes = std::mem::take(&mut self.changes);
        changes.clear();
        self.source.drain(&mut changes)?;
        let events = changes.len() as u64;
        self.store.begin()?;
        let mut dirty: HashSet<PathBuf> = HashSet::new();
        let mut changed = 0u64;
        let mut mapped = 0u64;
        for c in changes.drain(..) {
            match c {
                Change::Changed(p) => {
                    dirty.insert(p);
                }
                Change::Moved { from, to } => {
                    let (fw, tw) = (self.wanted(&from), self.wanted(&to));
                    if fw && tw {
                        self.rename(&from, &to, t)?;
                        changed += 1;
                    } else if fw {
                        dirty.insert(from);
                    }
                    if tw {
                        dirty.insert(to);
                    }
                }
                Change::Overflow => self.overflowed = true,
            }
        }
        self.changes = changes;
        // Files that were waiting for writeback: look again (a gone one is removed below).
        dirty.extend(self.pending.drain());
        let full = self.overflowed
            || self
                .cfg
                .rescan
                .is_some_and(|every| self.last_full.elapsed() >= every);
        if full {
            self.overflowed = false;
            changed += self.full_scan(t)?;
        } else {
            let mut dirty: Vec<PathBuf> = dirty.into_iter().filter(|p| self.wanted(p)).collect();
            dirty.sort();
            for p in dirty {
                if self.too_long(&p) {
                    continue;
                }
                match std::fs::symlink_metadata(&p) {
                    Err(_) => changed += self.remove(&p, t)?,
                    Ok(m) if m.is_dir() => {
                        // A directory created or moved in: map what is inside.
                        if let Ok(root) = walk::check_root(&p) {
                            let (c, m) = self.scan_tree(vec![root], t)?;
                            changed += c;
                            mapped += m;
                        }
                    }
                    Ok(m) if m.is_file() => match walk::map_path(&p, false) {
                        Ok(f) => {
                            mapped += 1;
                            if awaits_allocation(&f.layout) {
                                self.pending.insert(p.clone());
                            }
                            let s = summarize(&f.layout, self.cfg.request_size);
                            if self.update(&p, m.dev(), m.ino(), s, t)? {
                                changed += 1;
                                self.remember_map(&p, &f.layout);
                            }
                        }
                        // Vanished between the stat and the open: gone.
                        Err(_) if !p.exists() => changed += self.remove(&p, t)?,
                        Err(_) => {}
                    },
                    Ok(_) => {}
                }
            }
        }
        for (is_ext, name) in std::mem::take(&mut self.dirty_groups) {
            let (g, kind) = if is_ext {
                let key = name.to_string_lossy().into_owned();
                let g = self.by_ext.get(&key).copied().unwrap_or_default();
                if g.files == 0 {
                    self.by_ext.remove(&key);
                }
                (g, "ext")
            } else {
                let g = self.by_dir.get(&name).copied().unwrap_or_default();
                if g.files == 0 {
                    self.by_dir.remove(&name);
                }
                (g, "dir")
            };
            self.store.group(kind, &name.to_string_lossy(), t, &g)?;
        }
        let tick_ms = start.elapsed().as_secs_f64() * 1e3;
        self.store.tick(t, &self.totals, changed, tick_ms)?;
        self.store.commit()?;
        self.store.prune(t, false)?;
        self.series.push_back((t, self.totals));
        if self.series.len() > LIVE_SERIES {
            self.series.pop_front();
        }
        self.last = TickReport {
            tick: self.tick,
            t,
            events,
            changed_files: changed,
            mapped_files: mapped,
            full_rescan: full,
            tick_ms,
        };
        Ok(self.last)
    }

    /// The `n` most fragmented files (fragments, then path; which of several files tied
    /// at the cut-off make it is arbitrary). O(n), from the index's ordered set.
    pub fn worst(&self, n: usize) -> Vec<(PathBuf, FileSummary)> {
        let mut v: Vec<(PathBuf, FileSummary)> = self
            .files
            .worst(n)
            .map(|slot| (self.files.path(slot), self.files.rec(slot).summary()))
            .collect();
        v.sort_by(|a, b| b.1.fragments.cmp(&a.1.fragments).then(a.0.cmp(&b.0)));
        v
    }

    /// What the engine holds for the file at `path`.
    pub(crate) fn summary_of(&self, path: &Path) -> Option<FileSummary> {
        self.files
            .get(path)
            .map(|slot| self.files.rec(slot).summary())
    }
}
