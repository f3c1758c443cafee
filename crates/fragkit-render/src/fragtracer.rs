//! FragTracer's three artefacts for a set of files (Sensors 2023, section 3; formats in
//! docs/map.md): fragInfo.txt (every extent), fragProc.tbl (written extents sorted by start
//! LBA) and fragImg.png (one box per block of those extents, in LBA order, coloured by
//! color.cnf; runs longer than img.cnf max_length not drawn).
//!
//! LBAs, offsets and lengths are in file-system blocks (FIGETBSZ), as filefrag reports
//! them, which is what FragTracer collected. Callers: `fragkit map --fragtracer`, and
//! `watch`, which rewrites the artefacts every tick.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use fragkit_core::layout::model::{Extent, ExtentFlags};
use fragkit_core::scan::FileEntry;

use super::blockmap::{BlockMap, Kind, Segment};
use super::config::{ColorConfig, ImgConfig};

pub(crate) const INFO_FILE: &str = "fragInfo.txt";
pub(crate) const PROC_FILE: &str = "fragProc.tbl";
pub(crate) const IMAGE_FILE: &str = "fragImg.png";

/// One line of fragProc.tbl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcRow {
    /// Index into the files given.
    pub file: usize,
    pub start_lba: u64,
    pub length: u64,
    pub flags: ExtentFlags,
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ArtefactSummary {
    pub files: u64,
    pub extents: u64,
    pub proc_rows: u64,
    /// Extents left out of fragProc.tbl: unwritten, or with no place on disk yet (delalloc).
    pub dropped_extents: u64,
    pub skipped_runs: u64,
    pub info: PathBuf,
    pub proc: PathBuf,
    pub image: PathBuf,
}

/// A name for the tables: the path below `root` (the file name if `root` is the file),
/// with tab, newline and backslash escaped so every record stays one line of columns.
pub(crate) fn table_name(path: &Path, root: &Path) -> String {
    let rel = path
        .strip_prefix(root)
        .ok()
        .filter(|r| !r.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new(path.file_name().unwrap_or(path.as_os_str())));
    rel.to_string_lossy()
        .replace('\\', "\\\\")
        .replace('\t', "\\t")
        .replace('\n', "\\n")
}

fn flag_text(f: ExtentFlags) -> String {
    let n = f.names();
    if n.is_empty() {
        "-".into()
    } else {
        n.join(",")
    }
}

fn blocks(bytes: u64, bs: u64) -> u64 {
    bytes.div_ceil(bs)
}

/// Does a row of fragProc.tbl come from this extent? FragTracer drops unwritten extents;
/// extents with no place on disk yet (delalloc, unknown, inline) have no LBA to sort by.
pub(crate) fn kept_in_proc(e: &Extent) -> bool {
    e.costs_read_io()
}

pub fn write_info(out: &mut impl Write, files: &[&FileEntry], root: &Path) -> std::io::Result<()> {
    writeln!(
        out,
        "# fragInfo.txt (FragTracer format, written by fragkit): one FIEMAP extent per line"
    )?;
    writeln!(
        out,
        "# units: file-system blocks (as filefrag); end_offset and end_lba are inclusive"
    )?;
    writeln!(
        out,
        "# file\textent\tstart_offset\tend_offset\tstart_lba\tend_lba\tlength\tflags"
    )?;
    for f in files {
        let bs = f.file.layout.block_size.max(1) as u64;
        let name = table_name(&f.file.path, root);
        for (i, e) in f.file.layout.extents.iter().enumerate() {
            let len = blocks(e.length, bs);
            writeln!(
                out,
                "{name}\t{i}\t{}\t{}\t{}\t{}\t{len}\t{}",
                e.logical / bs,
                (e.logical / bs + len).saturating_sub(1),
                e.physical / bs,
                (e.physical / bs + len).saturating_sub(1),
                flag_text(e.flags)
            )?;
        }
    }
    Ok(())
}

/// fragProc.tbl's rows: written extents of every file, sorted by start LBA.
pub fn proc_rows(files: &[&FileEntry]) -> (Vec<ProcRow>, u64) {
    let mut rows = Vec::new();
    let mut dropped = 0;
    for (i, f) in files.iter().enumerate() {
        let bs = f.file.layout.block_size.max(1) as u64;
        for e in &f.file.layout.extents {
            if !kept_in_proc(e) {
                dropped += 1;
                continue;
            }
            rows.push(ProcRow {
                file: i,
                start_lba: e.physical / bs,
                length: blocks(e.length, bs),
                flags: e.flags,
            });
        }
    }
    rows.sort_by_key(|r| (r.start_lba, r.file));
    (rows, dropped)
}

pub(crate) fn write_proc(
    out: &mut impl Write,
    files: &[&FileEntry],
    root: &Path,
    rows: &[ProcRow],
) -> std::io::Result<()> {
    writeln!(out, "# fragProc.tbl (FragTracer format, written by fragkit): written extents sorted by start LBA")?;
    writeln!(out, "# units: file-system blocks; unwritten (preallocated) and unplaced (delalloc) extents dropped")?;
    writeln!(out, "# file\tstart_lba\tlength\tflags")?;
    for r in rows {
        writeln!(
            out,
            "{}\t{}\t{}\t{}",
            table_name(&files[r.file].file.path, root),
            r.start_lba,
            r.length,
            flag_text(r.flags)
        )?;
    }
    Ok(())
}

/// FragTracer's picture: the written data of `files` as contiguous runs in LBA order, one
/// box per block, packed without the gaps between them.
pub(crate) fn compact_map(files: &[&FileEntry], colors: &ColorConfig, title: String) -> BlockMap {
    let bs = files
        .first()
        .map_or(4096, |f| f.file.layout.block_size.max(1) as u64);
    let mut runs = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let data = f.file.layout.data_runs();
        let n = data.len() as u32;
        let class = colors.class_of(&f.file.path);
        for (k, r) in data.iter().enumerate() {
            runs.push(Segment {
                start: r.physical / bs,
                blocks: blocks(r.length, bs).max(1),
                kind: Kind::File {
                    class,
                    fragmented: n > 1,
                    alt: (k % 2) as u8,
                },
                physical: r.physical,
                bytes: r.length,
                file: Some((i as u32, r.logical, k as u32 + 1, n)),
            });
        }
    }
    runs.sort_by_key(|s| s.start);
    let mut pos = 0;
    for s in &mut runs {
        s.start = pos;
        pos += s.blocks;
    }
    BlockMap {
        title,
        notes: vec!["boxes are the written blocks of the files in LBA order, packed (gaps between files not shown)".into()],
        block_size: bs,
        origin: 0,
        span: pos,
        segments: runs,
        files: files.iter().map(|f| f.file.path.clone()).collect(),
        skipped: (0, 0),
        gaps_are_free: true,
    }
}

/// Write a file whole or not at all: a reader (or the next watch tick) never sees half.
fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<fs::File>) -> std::io::Result<()>,
) -> Result<()> {
    let tmp = path.with_extension("tmp~");
    let f = fs::File::create(&tmp).with_context(|| format!("{}", tmp.display()))?;
    let mut w = BufWriter::new(f);
    fill(&mut w)
        .and_then(|_| w.flush())
        .with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("{}", path.display()))?;
    Ok(())
}

/// Write fragInfo.txt, fragProc.tbl and fragImg.png for `files` into `out_dir` (created if
/// missing). `root` is what names in the tables are relative to.
pub fn write_artefacts(
    files: &[FileEntry],
    root: &Path,
    out_dir: &Path,
    colors: &ColorConfig,
    img: &ImgConfig,
) -> Result<ArtefactSummary> {
    fs::create_dir_all(out_dir).with_context(|| format!("{}", out_dir.display()))?;
    let mut files: Vec<&FileEntry> = files.iter().collect();
    files.sort_by(|a, b| a.file.path.cmp(&b.file.path));
    let info = out_dir.join(INFO_FILE);
    let proc = out_dir.join(PROC_FILE);
    let image = out_dir.join(IMAGE_FILE);
    write_atomic(&info, |w| write_info(w, &files, root))?;
    let (rows, dropped) = proc_rows(&files);
    write_atomic(&proc, |w| write_proc(w, &files, root, &rows))?;
    let mut map = compact_map(
        &files,
        colors,
        format!("fragImg.png: {} ({} files)", root.display(), files.len()),
    );
    map.skip_long_runs(img.max_length);
    let grid = map.grid(img);
    let canvas = super::picture::render_png(&map, &grid, colors, img);
    write_atomic(&image, |w| canvas.write_png(w))?;
    Ok(ArtefactSummary {
        files: files.len() as u64,
        extents: files
            .iter()
            .map(|f| f.file.layout.extents.len() as u64)
            .sum(),
        proc_rows: rows.len() as u64,
        dropped_extents: dropped,
        skipped_runs: map.skipped.0,
        info,
        proc,
        image,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fragkit_core::layout::model::FileLayout;
    use fragkit_core::layout::walk::ScannedFile;
    use fragkit_core::metrics::FileMetrics;
    use fragkit_sys::fsinfo::FsInfo;

    fn entry(path: &str, extents: Vec<Extent>) -> FileEntry {
        let layout = FileLayout {
            size: extents.iter().map(|e| e.logical_end()).max().unwrap_or(0),
            allocated: 0,
            block_size: 4096,
            extents,
        };
        FileEntry {
            model: None,
            metrics: FileMetrics::compute(&layout, &[131072]),
            file: ScannedFile {
                path: PathBuf::from(path),
                dev: 0,
                ino: 1,
                nlink: 1,
                fs: FsInfo {
                    magic: 0xEF53,
                    block_size: 4096,
                    blocks: 0,
                    blocks_available: 0,
                    blocks_free: 0,
                    fragment_size: 4096,
                    fsid: [0, 0],
                },
                layout,
            },
        }
    }

    fn ext(logical: u64, physical: u64, length: u64, flags: ExtentFlags) -> Extent {
        Extent {
            logical: logical * 4096,
            physical: physical * 4096,
            length: length * 4096,
            flags,
        }
    }

    #[test]
    fn proc_rows_drop_unwritten_and_sort_by_lba() {
        let none = ExtentFlags(0);
        let a = entry(
            "/d/a.sst",
            vec![ext(0, 500, 4, none), ext(4, 100, 4, ExtentFlags::LAST)],
        );
        let b = entry(
            "/d/b.log",
            vec![
                ext(0, 300, 2, none),
                ext(
                    2,
                    900,
                    8,
                    ExtentFlags(ExtentFlags::UNWRITTEN.0 | ExtentFlags::LAST.0),
                ),
            ],
        );
        let (rows, dropped) = proc_rows(&[&a, &b]);
        assert_eq!(dropped, 1);
        let lbas: Vec<(usize, u64, u64)> = rows
            .iter()
            .map(|r| (r.file, r.start_lba, r.length))
            .collect();
        assert_eq!(lbas, vec![(0, 100, 4), (1, 300, 2), (0, 500, 4)]);
        let mut info = Vec::new();
        write_info(&mut info, &[&a, &b], Path::new("/d")).unwrap();
        let info = String::from_utf8(info).unwrap();
        assert!(
            info.contains("a.sst\t1\t4\t7\t100\t103\t4\tlast\n"),
            "{info}"
        );
        assert!(
            info.contains("b.log\t1\t2\t9\t900\t907\t8\tlast,unwritten\n"),
            "{info}"
        );
    }

    #[test]
    fn names_stay_one_column() {
        assert_eq!(
            table_name(Path::new("/d/x\ty\nz"), Path::new("/d")),
            "x\\ty\\nz"
        );
        assert_eq!(table_name(Path::new("/d/f"), Path::new("/d/f")), "f");
    }
}
