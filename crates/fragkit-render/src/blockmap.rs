//! What a block map shows: segments of blocks (file fragments, free space, metadata) in
//! drawing order, and how they fall into boxes of a grid.

use std::collections::HashSet;
use std::path::PathBuf;

use fragkit_core::scan::FileEntry;
use fragkit_sys::fsmap::{FsmapRecord, Owner};

use super::canvas::Rgb;
use super::config::{ColorConfig, ImgConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Free,
    Metadata(&'static str),
    /// Blocks owned by something outside the drawn files (other files, directories).
    Other,
    /// Nothing known (no GETFSMAP here).
    Unmapped,
    /// Data of file `file`; `alt` (0/1) alternates between a fragmented file's fragments.
    File {
        class: usize,
        fragmented: bool,
        alt: u8,
    },
}

/// A run of blocks drawn with one colour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// First block in drawing coordinates (physical block, minus blocks of runs not drawn).
    pub start: u64,
    pub blocks: u64,
    pub kind: Kind,
    /// Physical address in bytes (what hovering shows).
    pub physical: u64,
    pub bytes: u64,
    /// For file data: index into `BlockMap::files`, file offset, fragment k of n (1-based).
    pub file: Option<(u32, u64, u32, u32)>,
}

impl Segment {
    pub fn end(&self) -> u64 {
        self.start + self.blocks
    }
}

#[derive(Debug, Clone)]
pub struct BlockMap {
    pub title: String,
    pub notes: Vec<String>,
    pub block_size: u64,
    /// Drawing coordinate of the first box.
    pub origin: u64,
    /// Blocks covered, from origin.
    pub span: u64,
    /// Sorted by start; they do not overlap.
    pub segments: Vec<Segment>,
    pub files: Vec<PathBuf>,
    /// Contiguous runs longer than img.cnf max_length, left out: (runs, blocks).
    pub skipped: (u64, u64),
    /// Gaps between segments are free space (whole-device maps) rather than unknown.
    pub gaps_are_free: bool,
}

/// The grid: which segment each box shows.
pub struct Grid {
    pub blocks_per_box: u64,
    pub columns: u32,
    pub rows: u32,
    /// Segment index per box; u32::MAX = gap.
    pub cells: Vec<u32>,
}

impl BlockMap {
    /// Colour of a segment (or of a gap, `None`).
    pub fn color(&self, colors: &ColorConfig, seg: Option<&Segment>) -> Rgb {
        match seg.map(|s| s.kind) {
            None if self.gaps_are_free => colors.free,
            None | Some(Kind::Unmapped) => colors.unmapped,
            Some(Kind::Free) => colors.free,
            Some(Kind::Metadata(_)) => colors.metadata,
            Some(Kind::Other) => colors.other,
            Some(Kind::File {
                class,
                fragmented,
                alt,
            }) => {
                let c = colors.class_colors(class);
                if fragmented {
                    c.fragmented[alt as usize & 1]
                } else {
                    c.contiguous
                }
            }
        }
    }

    /// Words for a segment, as hovering shows them.
    pub fn describe(&self, seg: &Segment) -> String {
        let bs = self.block_size;
        let loc = format!(
            "blocks {}..{} ({} bytes at {})",
            seg.physical / bs,
            (seg.physical + seg.bytes).div_ceil(bs).saturating_sub(1),
            seg.bytes,
            seg.physical
        );
        match (seg.kind, seg.file) {
            (Kind::File { .. }, Some((f, off, k, n))) => format!(
                "{} | offset {} | fragment {k} of {n} | {loc}",
                self.files[f as usize].display(),
                off
            ),
            (Kind::Free, _) => format!("free space | {loc}"),
            (Kind::Metadata(what), _) => format!("metadata: {what} | {loc}"),
            (Kind::Other, _) => format!("other files / directories | {loc}"),
            _ => format!("unknown | {loc}"),
        }
    }

    /// Place segments into boxes. A box covering several segments shows the one with the
    /// most blocks in it (file data wins ties over free space).
    pub fn grid(&self, img: &ImgConfig) -> Grid {
        let mut n = 1u64;
        while self.span.div_ceil(n) > img.max_boxes {
            n *= 2;
        }
        let boxes = self.span.div_ceil(n).max(1);
        let mut cells = vec![u32::MAX; boxes as usize];
        let mut best = vec![0u64; boxes as usize];
        for (i, s) in self.segments.iter().enumerate() {
            if s.blocks == 0 || s.end() <= self.origin {
                continue;
            }
            let a = s.start.max(self.origin) - self.origin;
            let b = s.end() - self.origin;
            let (b0, b1) = (a / n, ((b - 1) / n).min(boxes - 1));
            for bx in b0..=b1 {
                let cover = b.min((bx + 1) * n) - a.max(bx * n);
                let k = bx as usize;
                let beats = cover > best[k]
                    || (cover == best[k]
                        && matches!(s.kind, Kind::File { .. })
                        && cells[k] != u32::MAX
                        && !matches!(self.segments[cells[k] as usize].kind, Kind::File { .. }));
                if beats {
                    best[k] = cover;
                    cells[k] = i as u32;
                }
            }
        }
        let columns = img.columns.min(boxes as u32).max(1);
        Grid {
            blocks_per_box: n,
            columns,
            rows: boxes.div_ceil(columns as u64) as u32,
            cells,
        }
    }

    /// Leave out file runs longer than `max_length` blocks and close the gaps they leave
    /// (FragTracer's img.cnf rule: long sequential regions are not drawn).
    pub fn skip_long_runs(&mut self, max_length: u64) {
        if max_length == 0 {
            return;
        }
        let mut removed = 0u64;
        let mut out = Vec::with_capacity(self.segments.len());
        for mut s in std::mem::take(&mut self.segments) {
            if matches!(s.kind, Kind::File { .. }) && s.blocks > max_length {
                removed += s.blocks;
                self.skipped.0 += 1;
                self.skipped.1 += s.blocks;
                continue;
            }
            s.start -= removed;
            out.push(s);
        }
        self.segments = out;
        self.span = self.span.saturating_sub(removed);
    }
}

/// File fragments of `files` as segments at their physical blocks.
pub(crate) fn file_segments(files: &[FileEntry], colors: &ColorConfig, bs: u64) -> Vec<Segment> {
    let mut out = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let frags = f.file.layout.fragments();
        let class = colors.class_of(&f.file.path);
        let n = frags.len() as u32;
        for (k, fr) in frags.iter().enumerate() {
            out.push(Segment {
                start: fr.physical / bs,
                blocks: fr.length.div_ceil(bs).max(1),
                kind: Kind::File {
                    class,
                    fragmented: n > 1,
                    alt: (k % 2) as u8,
                },
                physical: fr.physical,
                bytes: fr.length,
                file: Some((i as u32, fr.logical, k as u32 + 1, n)),
            });
        }
    }
    out
}

/// A physical map of `files`: over their span, or (`whole`) over the whole device of
/// `fsmap` records (with the device's size in blocks), which also say what the other
/// blocks are.
pub fn physical_map(
    title: String,
    files: &[FileEntry],
    colors: &ColorConfig,
    block_size: u64,
    fsmap: Option<(&[FsmapRecord], u64)>,
    whole: bool,
) -> BlockMap {
    let bs = block_size.max(1);
    let mut segments = file_segments(files, colors, bs);
    let (mut lo, mut hi) = segments.iter().fold((u64::MAX, 0), |(lo, hi), s| {
        (lo.min(s.start), hi.max(s.end()))
    });
    let mut gaps_are_free = false;
    if let Some((records, total_blocks)) = fsmap {
        if whole {
            lo = 0;
            hi = total_blocks;
        }
        let inos: HashSet<u64> = files.iter().map(|f| f.file.ino).collect();
        // File data comes from FIEMAP (it knows offsets and fragments); cut it out of the
        // GETFSMAP records (ext4 reports file data as "unknown owner") so nothing overlaps.
        let mut taken: Vec<(u64, u64)> = segments.iter().map(|s| (s.start, s.end())).collect();
        taken.sort_unstable();
        for r in records {
            let (s, e) = (r.physical / bs, r.physical_end().div_ceil(bs));
            if e <= lo || s >= hi {
                continue;
            }
            let kind = match r.owner {
                Owner::Inode(ino) if inos.contains(&ino) => continue,
                // ext4 has no reverse map: used blocks (data, journal, dirs) have no owner.
                Owner::Inode(_) | Owner::Unknown => Kind::Other,
                Owner::Free => Kind::Free,
                Owner::Metadata(what) => Kind::Metadata(what),
            };
            let first = taken.partition_point(|t| t.1 <= s);
            let mut pos = s;
            for &(ts, te) in taken[first..].iter().take_while(|t| t.0 < e) {
                if ts > pos {
                    segments.push(piece(r, bs, pos, ts, kind));
                }
                pos = pos.max(te);
            }
            if pos < e {
                segments.push(piece(r, bs, pos, e, kind));
            }
        }
        // GETFSMAP covers every block: what it does not list (between records) is free.
        gaps_are_free = true;
    }
    if lo == u64::MAX {
        lo = 0;
        hi = 0;
    }
    segments.sort_by_key(|s| (s.start, s.blocks));
    BlockMap {
        title,
        notes: Vec::new(),
        block_size: bs,
        origin: lo,
        span: hi - lo,
        segments,
        files: files.iter().map(|f| f.file.path.clone()).collect(),
        skipped: (0, 0),
        gaps_are_free,
    }
}

/// The part [s, e) (blocks) of a GETFSMAP record as a segment.
fn piece(r: &FsmapRecord, bs: u64, s: u64, e: u64, kind: Kind) -> Segment {
    let physical = (s * bs).max(r.physical);
    Segment {
        start: s,
        blocks: e - s,
        kind,
        physical,
        bytes: (e * bs).min(r.physical_end()) - physical,
        file: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(start: u64, blocks: u64, kind: Kind) -> Segment {
        Segment {
            start,
            blocks,
            kind,
            physical: start * 4096,
            bytes: blocks * 4096,
            file: None,
        }
    }
    const FILE: Kind = Kind::File {
        class: 0,
        fragmented: true,
        alt: 0,
    };

    fn map(segments: Vec<Segment>, span: u64) -> BlockMap {
        BlockMap {
            title: String::new(),
            notes: vec![],
            block_size: 4096,
            origin: 0,
            span,
            segments,
            files: vec![],
            skipped: (0, 0),
            gaps_are_free: true,
        }
    }

    #[test]
    fn boxes_show_the_majority_and_file_wins_ties() {
        let m = map(
            vec![
                seg(0, 3, Kind::Free),
                seg(3, 3, FILE),
                seg(6, 2, Kind::Free),
            ],
            8,
        );
        let img = ImgConfig {
            max_length: 0,
            columns: 2,
            box_size: 4,
            max_boxes: 2,
        };
        let g = m.grid(&img);
        assert_eq!(g.blocks_per_box, 4);
        // Box 0: 3 free + 1 file -> free. Box 1: 2 file + 2 free -> file (tie).
        assert_eq!(g.cells, vec![0, 1]);
        assert_eq!((g.columns, g.rows), (2, 1));
    }

    #[test]
    fn long_runs_are_left_out_and_the_rest_moves_up() {
        let mut m = map(
            vec![
                seg(0, 2, FILE),
                seg(2, 100, FILE),
                seg(102, 5, Kind::Free),
                seg(107, 3, FILE),
            ],
            110,
        );
        m.skip_long_runs(50);
        assert_eq!(m.skipped, (1, 100));
        assert_eq!(m.span, 10);
        let starts: Vec<u64> = m.segments.iter().map(|s| s.start).collect();
        assert_eq!(starts, vec![0, 2, 7]);
        // Free space is never skipped, however long.
        let mut m = map(vec![seg(0, 1000, Kind::Free)], 1000);
        m.skip_long_runs(50);
        assert_eq!(m.skipped, (0, 0));
    }
}
