//! The watch's per-file memory, kept small enough for a million files in ~100 MiB.
//!
//! Every tracked file is one fixed-size record (72 bytes) in a dense array; its name lives
//! in one shared byte arena and its directory is an id into a (much smaller) table of
//! directory paths, so a path is stored once per directory, not once per file. Lookups by
//! path go through hash tables that hold only 4-byte slot numbers (the keys are read back
//! from the records). Extents are not kept here at all.
//!
//! Measured before this layout (a `HashMap<PathBuf, Box<record>>`): 387 bytes per file;
//! docs/watch.md has the figures and `bench/watch-memory.sh` reproduces them.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use hashbrown::HashTable;
use xxhash_rust::xxh3::xxh3_64;

use crate::store::FileSummary;

/// Marks a free slot in `recs` / `dirs`.
const FREE: u32 = u32::MAX;

/// One tracked file. Counters that cannot exceed 2^32 in practice (extents and fragments of
/// one file) are u32 and saturate; sizes and request counts stay u64.
#[derive(Debug, Clone, Copy)]
pub struct Rec {
    /// Row id in the history database.
    pub id: i64,
    pub ino: u64,
    pub size: u64,
    pub allocated: u64,
    pub split: u64,
    pub ideal: u64,
    pub extents: u32,
    pub fragments: u32,
    /// Full-rescan generation that last saw the file.
    pub seen: u32,
    dir: u32,
    name_off: u32,
    name_len: u16,
    dev: u16,
}

const _: () = assert!(std::mem::size_of::<Rec>() == 72);

fn sat32(v: u64) -> u32 {
    v.min(u32::MAX as u64) as u32
}

impl Rec {
    pub fn summary(&self) -> FileSummary {
        FileSummary {
            size: self.size,
            allocated: self.allocated,
            extents: self.extents as u64,
            fragments: self.fragments as u64,
            split: self.split,
            ideal: self.ideal,
        }
    }

    /// Store `s`; returns whether the record changed (as the record can hold it).
    pub(crate) fn set_summary(&mut self, s: &FileSummary) -> bool {
        let before = (
            self.size,
            self.allocated,
            self.extents,
            self.fragments,
            self.split,
            self.ideal,
        );
        self.size = s.size;
        self.allocated = s.allocated;
        self.extents = sat32(s.extents);
        self.fragments = sat32(s.fragments);
        self.split = s.split;
        self.ideal = s.ideal;
        before
            != (
                self.size,
                self.allocated,
                self.extents,
                self.fragments,
                self.split,
                self.ideal,
            )
    }
}

struct Dir {
    path: Box<Path>,
    /// Files recorded in this directory; the entry is freed at zero.
    files: u32,
}

/// Tracked files by path, in compact form.
#[derive(Default)]
pub struct FileIndex {
    recs: Vec<Rec>,
    free_recs: Vec<u32>,
    /// Slots of `recs`, hashed by (directory id, name).
    by_name: HashTable<u32>,
    names: Vec<u8>,
    /// Bytes of `names` no record points to any more (reclaimed by `compact_names`).
    dead_name_bytes: usize,
    dirs: Vec<Dir>,
    free_dirs: Vec<u32>,
    /// Slots of `dirs`, hashed by path.
    dir_by_path: HashTable<u32>,
    devs: Vec<u64>,
    /// Fragmented files, most fragments first: the worst files without a pass over all.
    fragmented: BTreeSet<(std::cmp::Reverse<u32>, u32)>,
    len: usize,
}

fn file_hash(dir: u32, name: &[u8]) -> u64 {
    // The directory id goes in as a seed-like prefix: same name, other directory, other hash.
    xxh3_64(name) ^ (dir as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn name_of<'a>(names: &'a [u8], r: &Rec) -> &'a [u8] {
    &names[r.name_off as usize..r.name_off as usize + r.name_len as usize]
}

fn split(path: &Path) -> (&Path, &[u8]) {
    let parent = path.parent().unwrap_or(Path::new(""));
    let name = path.file_name().unwrap_or(path.as_os_str());
    (parent, name.as_bytes())
}

impl FileIndex {
    pub fn new() -> FileIndex {
        FileIndex::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn dir_id(&self, dir: &Path) -> Option<u32> {
        let h = xxh3_64(dir.as_os_str().as_bytes());
        self.dir_by_path
            .find(h, |&d| &*self.dirs[d as usize].path == dir)
            .copied()
    }

    /// The slot of the file at `path`.
    pub fn get(&self, path: &Path) -> Option<u32> {
        let (dir, name) = split(path);
        let d = self.dir_id(dir)?;
        self.by_name
            .find(file_hash(d, name), |&s| {
                let r = &self.recs[s as usize];
                r.dir == d && name_of(&self.names, r) == name
            })
            .copied()
    }

    pub fn rec(&self, slot: u32) -> &Rec {
        &self.recs[slot as usize]
    }

    pub fn dev(&self, slot: u32) -> u64 {
        self.devs[self.recs[slot as usize].dev as usize]
    }

    pub fn path(&self, slot: u32) -> PathBuf {
        let r = &self.recs[slot as usize];
        self.dirs[r.dir as usize]
            .path
            .join(OsStr::from_bytes(name_of(&self.names, r)))
    }

    /// Update a file's counters; returns whether they changed.
    pub(crate) fn set_summary(&mut self, slot: u32, s: &FileSummary) -> bool {
        let r = &mut self.recs[slot as usize];
        let old = r.fragments;
        let changed = r.set_summary(s);
        let new = r.fragments;
        if old != new {
            self.fragmented.remove(&(std::cmp::Reverse(old), slot));
            if new > 1 {
                self.fragmented.insert((std::cmp::Reverse(new), slot));
            }
        }
        changed
    }

    pub(crate) fn set_seen(&mut self, slot: u32, gen: u32) {
        self.recs[slot as usize].seen = gen;
    }

    fn intern_dir(&mut self, dir: &Path) -> u32 {
        if let Some(d) = self.dir_id(dir) {
            self.dirs[d as usize].files += 1;
            return d;
        }
        let entry = Dir {
            path: dir.into(),
            files: 1,
        };
        let d = match self.free_dirs.pop() {
            Some(d) => {
                self.dirs[d as usize] = entry;
                d
            }
            None => {
                self.dirs.push(entry);
                (self.dirs.len() - 1) as u32
            }
        };
        let dirs = &self.dirs;
        self.dir_by_path
            .insert_unique(xxh3_64(dir.as_os_str().as_bytes()), d, |&x| {
                xxh3_64(dirs[x as usize].path.as_os_str().as_bytes())
            });
        d
    }

    fn release_dir(&mut self, d: u32) {
        let entry = &mut self.dirs[d as usize];
        entry.files -= 1;
        if entry.files > 0 {
            return;
        }
        let h = xxh3_64(entry.path.as_os_str().as_bytes());
        if let Ok(e) = self.dir_by_path.find_entry(h, |&x| x == d) {
            e.remove();
        }
        self.dirs[d as usize].path = Path::new("").into();
        self.free_dirs.push(d);
    }

    fn intern_dev(&mut self, dev: u64) -> anyhow::Result<u16> {
        if let Some(i) = self.devs.iter().position(|&d| d == dev) {
            return Ok(i as u16);
        }
        anyhow::ensure!(
            self.devs.len() < u16::MAX as usize,
            "watch: more than 65535 file systems under the watched roots"
        );
        self.devs.push(dev);
        Ok((self.devs.len() - 1) as u16)
    }

    fn push_name(&mut self, name: &[u8]) -> anyhow::Result<(u32, u16)> {
        if self.names.len() + name.len() > u32::MAX as usize {
            self.compact_names();
        }
        anyhow::ensure!(
            self.names.len() + name.len() <= u32::MAX as usize,
            "watch: more than 4 GiB of file names under the watched roots"
        );
        anyhow::ensure!(
            name.len() <= u16::MAX as usize,
            "{}: file name too long",
            String::from_utf8_lossy(name)
        );
        let off = self.names.len() as u32;
        self.names.extend_from_slice(name);
        Ok((off, name.len() as u16))
    }

    /// Drop the bytes of names no record uses (after many deletes and renames).
    fn compact_names(&mut self) {
        let live = self.names.len() - self.dead_name_bytes;
        let mut names = Vec::with_capacity(live);
        for r in self.recs.iter_mut().filter(|r| r.dir != FREE) {
            let off = names.len() as u32;
            names.extend_from_slice(&self.names[r.name_off as usize..][..r.name_len as usize]);
            r.name_off = off;
        }
        self.names = names;
        self.dead_name_bytes = 0;
    }

    fn forget_name(&mut self, len: u16) {
        self.dead_name_bytes += len as usize;
        if self.dead_name_bytes > (1 << 20) && self.dead_name_bytes * 2 > self.names.len() {
            self.compact_names();
        }
    }

    /// Record a new file (the caller checked that `path` is not recorded). Returns its slot.
    pub fn insert(
        &mut self,
        path: &Path,
        dev: u64,
        ino: u64,
        id: i64,
        s: &FileSummary,
        seen: u32,
    ) -> anyhow::Result<u32> {
        let (dir, name) = split(path);
        let dev = self.intern_dev(dev)?;
        let (name_off, name_len) = self.push_name(name)?;
        let dir = self.intern_dir(dir);
        let mut r = Rec {
            id,
            ino,
            size: 0,
            allocated: 0,
            split: 0,
            ideal: 0,
            extents: 0,
            fragments: 0,
            seen,
            dir,
            name_off,
            name_len,
            dev,
        };
        r.set_summary(s);
        let slot = match self.free_recs.pop() {
            Some(slot) => {
                self.recs[slot as usize] = r;
                slot
            }
            None => {
                anyhow::ensure!(
                    self.recs.len() < FREE as usize,
                    "watch: more than 2^32 files"
                );
                self.recs.push(r);
                (self.recs.len() - 1) as u32
            }
        };
        let (recs, names) = (&self.recs, &self.names);
        self.by_name
            .insert_unique(file_hash(dir, name), slot, |&x| {
                let r = &recs[x as usize];
                file_hash(r.dir, name_of(names, r))
            });
        if r.fragments > 1 {
            self.fragmented
                .insert((std::cmp::Reverse(r.fragments), slot));
        }
        self.len += 1;
        Ok(slot)
    }

    /// Take a slot out of the name table (its record stays as it is; the caller accounts
    /// for its name's bytes once the record no longer points at them).
    fn unlink(&mut self, slot: u32) {
        let r = self.recs[slot as usize];
        let h = file_hash(r.dir, name_of(&self.names, &r));
        if let Ok(e) = self.by_name.find_entry(h, |&x| x == slot) {
            e.remove();
        }
        self.release_dir(r.dir);
    }

    /// Forget a file; returns its last record.
    pub fn remove(&mut self, slot: u32) -> Rec {
        let r = self.recs[slot as usize];
        self.unlink(slot);
        if r.fragments > 1 {
            self.fragmented
                .remove(&(std::cmp::Reverse(r.fragments), slot));
        }
        self.recs[slot as usize].dir = FREE;
        self.free_recs.push(slot);
        self.len -= 1;
        self.forget_name(r.name_len);
        r
    }

    /// Give a recorded file another path (the caller checked `to` is free); same slot.
    pub fn rename(&mut self, slot: u32, to: &Path) -> anyhow::Result<()> {
        let old_len = self.recs[slot as usize].name_len;
        self.unlink(slot);
        let (dir, name) = split(to);
        let (name_off, name_len) = self.push_name(name)?;
        let dir = self.intern_dir(dir);
        let r = &mut self.recs[slot as usize];
        (r.dir, r.name_off, r.name_len) = (dir, name_off, name_len);
        let (recs, names) = (&self.recs, &self.names);
        self.by_name
            .insert_unique(file_hash(dir, name), slot, |&x| {
                let r = &recs[x as usize];
                file_hash(r.dir, name_of(names, r))
            });
        self.forget_name(old_len);
        Ok(())
    }

    /// Live slots with their records.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Rec)> {
        self.recs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.dir != FREE)
            .map(|(i, r)| (i as u32, r))
    }

    /// Files anywhere below the directory `dir`.
    pub fn below(&self, dir: &Path) -> Vec<u32> {
        let dirs: std::collections::HashSet<u32> = self
            .dirs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.files > 0 && d.path.starts_with(dir))
            .map(|(i, _)| i as u32)
            .collect();
        if dirs.is_empty() {
            return Vec::new();
        }
        self.iter()
            .filter(|(_, r)| dirs.contains(&r.dir))
            .map(|(s, _)| s)
            .collect()
    }

    /// The `n` files with most fragments (ties in slot order).
    pub fn worst(&self, n: usize) -> impl Iterator<Item = u32> + '_ {
        self.fragmented.iter().take(n).map(|&(_, s)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(fragments: u64) -> FileSummary {
        FileSummary {
            size: 4096 * fragments,
            allocated: 4096 * fragments,
            extents: fragments,
            fragments,
            split: fragments,
            ideal: 1,
        }
    }

    #[test]
    fn insert_find_rename_remove() {
        let mut ix = FileIndex::new();
        let a = ix
            .insert(Path::new("/r/d1/a.db"), 7, 11, 1, &s(3), 0)
            .unwrap();
        let b = ix.insert(Path::new("/r/d1/b"), 7, 12, 2, &s(1), 0).unwrap();
        let c = ix
            .insert(Path::new("/r/d2/a.db"), 8, 13, 3, &s(5), 0)
            .unwrap();
        assert_eq!(ix.len(), 3);
        assert_eq!(ix.get(Path::new("/r/d1/a.db")), Some(a));
        assert_eq!(ix.get(Path::new("/r/d2/a.db")), Some(c));
        assert_eq!(ix.get(Path::new("/r/d3/a.db")), None);
        assert_eq!(ix.path(b), Path::new("/r/d1/b"));
        assert_eq!(ix.dev(c), 8);
        assert_eq!(ix.worst(10).collect::<Vec<_>>(), vec![c, a]);

        ix.rename(a, Path::new("/r/d3/renamed.db")).unwrap();
        assert_eq!(ix.get(Path::new("/r/d1/a.db")), None);
        assert_eq!(ix.get(Path::new("/r/d3/renamed.db")), Some(a));
        assert_eq!(ix.rec(a).id, 1);
        let mut below = ix.below(Path::new("/r/d1"));
        below.sort();
        assert_eq!(below, vec![b]);
        assert_eq!(ix.below(Path::new("/r")).len(), 3);
        // "/r/d" is not a directory prefix of "/r/d1".
        assert!(ix.below(Path::new("/r/d")).is_empty());

        assert!(ix.set_summary(c, &s(1)));
        assert!(!ix.set_summary(c, &s(1)));
        assert_eq!(ix.worst(10).collect::<Vec<_>>(), vec![a]);
        let gone = ix.remove(a);
        assert_eq!(gone.id, 1);
        assert!(ix.worst(10).next().is_none());
        assert_eq!(ix.get(Path::new("/r/d3/renamed.db")), None);
        // The freed slot is reused.
        let d = ix
            .insert(Path::new("/r/d3/new"), 7, 14, 4, &s(2), 0)
            .unwrap();
        assert_eq!(d, a);
        assert_eq!(ix.len(), 3);
        assert_eq!(ix.iter().count(), 3);
    }

    #[test]
    fn names_compact_after_churn() {
        let mut ix = FileIndex::new();
        let keep = ix.insert(Path::new("/r/keep"), 1, 1, 1, &s(1), 0).unwrap();
        // 200k renames of one file leave ~4 MB of dead names, reclaimed on the way.
        let x = ix.insert(Path::new("/r/x"), 1, 2, 2, &s(1), 0).unwrap();
        for i in 0..200_000u32 {
            ix.rename(x, Path::new(&format!("/r/name-{i:012}")))
                .unwrap();
        }
        assert!(ix.names.len() < 3 << 20, "{}", ix.names.len());
        assert_eq!(ix.path(keep), Path::new("/r/keep"));
        assert_eq!(
            ix.get(Path::new("/r/name-000000199999")),
            Some(x),
            "found after compaction"
        );
        // Directories emptied by renames are freed.
        ix.rename(x, Path::new("/s/t/u")).unwrap();
        ix.remove(keep);
        assert_eq!(ix.dirs.iter().filter(|d| d.files > 0).count(), 1);
        assert_eq!(ix.dir_by_path.len(), 1);
    }
}
