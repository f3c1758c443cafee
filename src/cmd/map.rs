//! `fragkit map PATH --out map.png` and `fragkit map PATH --fragtracer DIR`

use std::io::{BufWriter, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::cli::{MapArgs, MapFormat};
use crate::freespace;
use crate::layout::walk::{self, WalkOptions};
use crate::render::blockmap::physical_map;
use crate::render::{fragtracer, picture, ColorConfig, ImgConfig};
use crate::report;
use crate::report::map::{self as out, PictureSummary, Summary};
use crate::scan::{scan_roots, ScanResult, DEFAULT_REQUEST_SIZE};
use crate::sys::fsinfo::{self, FsInfo};

enum PicFormat {
    Png,
    Svg,
    Html,
}

fn pic_format(out: &Path) -> Result<PicFormat> {
    match out
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .as_deref()
    {
        Some("png") => Ok(PicFormat::Png),
        Some("svg") => Ok(PicFormat::Svg),
        Some("html") | Some("htm") => Ok(PicFormat::Html),
        _ => bail!(
            "--out {}: expected a file name ending in .png, .svg or .html",
            out.display()
        ),
    }
}

/// The root directory of the file system `path` is on (walk up while st_dev stays).
fn mount_root(path: &Path) -> Result<PathBuf> {
    let mut p = std::fs::canonicalize(path).with_context(|| format!("{}", path.display()))?;
    if !p.is_dir() {
        p.pop();
    }
    let dev = std::fs::metadata(&p)?.dev();
    while let Some(parent) = p.parent() {
        if std::fs::metadata(parent)?.dev() != dev {
            break;
        }
        p = parent.to_path_buf();
    }
    Ok(p)
}

fn scan_with_progress(root: &Path, sync: bool) -> Result<ScanResult> {
    let r = walk::check_root(root).map_err(|e| anyhow::anyhow!("{e}"))?;
    let bar = crate::report::progress::files_spinner();
    let opts = WalkOptions {
        sync,
        ..WalkOptions::default()
    };
    let progress = |n: u64| {
        if n.is_multiple_of(64) {
            bar.set_position(n)
        }
    };
    let result = scan_roots(&[r], &opts, &[DEFAULT_REQUEST_SIZE], &progress);
    bar.finish_and_clear();
    for e in &result.errors {
        fragkit_sys::stderr_line!("fragkit: {}: {}", e.path.display(), e.message);
    }
    Ok(result)
}

pub fn run(args: MapArgs) -> Result<i32> {
    let started = Instant::now();
    if args.out.is_none() && args.fragtracer.is_none() {
        bail!("nothing to write: expected --out FILE (.png, .svg, .html) and/or --fragtracer DIR");
    }
    let format = args.out.as_deref().map(pic_format).transpose()?;
    let colors = match &args.color_config {
        Some(p) => ColorConfig::load(p)?,
        None => ColorConfig::default(),
    };
    let mut img = match &args.img_config {
        Some(p) => ImgConfig::load(p)?,
        None => ImgConfig::default(),
    };
    if let Some(n) = args.max_length {
        img.max_length = n;
    }
    let root = if args.whole_fs {
        mount_root(&args.path)?
    } else {
        args.path.clone()
    };
    let result = scan_with_progress(&root, args.sync)?;
    let scanned = Instant::now();
    let files = result.files;

    let mut summary = Summary {
        version: 1,
        path: root.clone(),
        files: files.len() as u64,
        picture: None,
        fragtracer: None,
        scan_seconds: (scanned - started).as_secs_f64(),
        render_seconds: 0.0,
        seconds: 0.0,
    };
    if let Some(dir) = &args.fragtracer {
        summary.fragtracer = Some(fragtracer::write_artefacts(
            &files, &root, dir, &colors, &img,
        )?);
    }
    if let (Some(out), Some(format)) = (&args.out, format) {
        let f = std::fs::File::open(&root).with_context(|| format!("{}", root.display()))?;
        let info =
            FsInfo::of_fd(f.as_fd()).with_context(|| format!("{}: statfs", root.display()))?;
        let has_fsmap = matches!(info.magic, fsinfo::EXT4_MAGIC | fsinfo::XFS_MAGIC);
        let fsmap = if has_fsmap {
            // A map of some files needs GETFSMAP only over their span.
            let span = (!args.whole_fs).then(|| {
                files
                    .iter()
                    .flat_map(|f| f.file.layout.fragments())
                    .fold((u64::MAX, 0), |(lo, hi), fr| {
                        (lo.min(fr.physical), hi.max(fr.physical_end()))
                    })
            });
            match freespace::data_device_map(&root, span.filter(|s| s.0 < s.1)) {
                Ok(m) => Some(m),
                Err(e) if args.whole_fs => return Err(e),
                Err(_) => None,
            }
        } else if args.whole_fs {
            bail!(
                "--whole-fs: {} is on {}, which has no GETFSMAP (expected ext4 or xfs)",
                root.display(),
                info.type_name()
            );
        } else {
            None
        };
        let title = if let Some(t) = &args.title {
            t.clone()
        } else if args.whole_fs {
            format!("{} ({}): whole device", root.display(), info.type_name())
        } else {
            format!(
                "{} ({}): {} files",
                root.display(),
                info.type_name(),
                files.len()
            )
        };
        let bs = fsmap
            .as_ref()
            .map_or(info.block_size as u64, |(_, _, g, _)| g.block_size);
        let mut map = physical_map(
            title,
            &files,
            &colors,
            bs,
            fsmap
                .as_ref()
                .map(|(_, _, g, recs)| (recs.as_slice(), g.total_blocks)),
            args.whole_fs,
        );
        if fsmap.is_none() {
            map.notes.push(format!(
                "no GETFSMAP ({}): blocks between these files are drawn as unknown",
                if has_fsmap {
                    "needs root"
                } else {
                    "not ext4/xfs"
                }
            ));
        }
        map.skip_long_runs(img.max_length);
        let grid = map.grid(&img);
        let file =
            std::fs::File::create(out).with_context(|| format!("--out {}", out.display()))?;
        let mut w = BufWriter::new(file);
        match format {
            PicFormat::Png => picture::render_png(&map, &grid, &colors, &img).write_png(&mut w),
            PicFormat::Svg => picture::write_svg(&mut w, &map, &grid, &colors, &img),
            PicFormat::Html => picture::write_html(&mut w, &map, &grid, &colors, &img),
        }
        .and_then(|_| w.flush())
        .with_context(|| format!("writing {}", out.display()))?;
        summary.picture = Some(PictureSummary {
            out: out.clone(),
            whole_fs: args.whole_fs,
            fsmap: fsmap.is_some(),
            block_size: bs,
            blocks_per_box: grid.blocks_per_box,
            boxes: grid.cells.len() as u64,
            columns: grid.columns,
            rows: grid.rows,
            segments: map.segments.len() as u64,
            skipped_runs: map.skipped.0,
        });
    }
    summary.seconds = started.elapsed().as_secs_f64();
    summary.render_seconds = scanned.elapsed().as_secs_f64();
    report::to_stdout(|w| match args.format {
        MapFormat::Json => out::write_json(w, &summary),
        MapFormat::Table => out::write_table(w, &summary),
    })?;
    Ok(if result.errors.is_empty() { 0 } else { 1 })
}
