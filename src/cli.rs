//! Command-line parsing only: every subcommand hands its arguments to one function in cmd/.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::units;

#[derive(Parser, Debug)]
#[command(
    name = "fragkit",
    version,
    about = "Measure, watch, reproduce, explain and fix file fragmentation on Linux",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Map files' extents and report fragmentation (files, directories, whole file systems)
    Scan(ScanArgs),
    /// Create or destroy scratch file systems on loop devices (needs root)
    Scratch {
        #[command(subcommand)]
        action: ScratchAction,
    },
    /// Free-space fragmentation from GETFSMAP: histogram, largest run, per group (ext4, xfs)
    Free(FreeArgs),
    /// Draw block maps (PNG, SVG, HTML) and write FragTracer's artefacts
    Map(MapArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ScanFormat {
    /// Human-readable table and summary
    Table,
    /// One JSON object: {"version", "files", "summary"}
    Json,
    /// One JSON object per file per line, then one {"summary": ...} line
    Ndjson,
    /// One CSV row per file
    Csv,
    /// Exactly what `filefrag -v` prints for each file
    Filefrag,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SortKey {
    Path,
    Fragments,
    Extents,
    /// Extra requests at the first --request-size
    Extra,
    /// Split ratio S(R)/I(R) at the first --request-size
    Ratio,
    Size,
}

fn request_size(s: &str) -> Result<u64, String> {
    let n = units::parse_nonzero_size(s).map_err(|e| format!("request size {e}"))?;
    if n % 512 != 0 {
        return Err(format!(
            "request size '{s}' is not a multiple of 512 bytes (a device request is whole sectors)"
        ));
    }
    Ok(n)
}

#[derive(Args, Debug)]
pub struct ScanArgs {
    /// Files or directories to scan (directories are walked recursively)
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format
    #[arg(long, short = 'f', value_enum, default_value_t = ScanFormat::Table)]
    pub format: ScanFormat,
    /// Request size R for S(R)/I(R); repeatable (K, M, G suffixes) [default: 128K]
    #[arg(long = "request-size", short = 'r', value_name = "R", value_parser = request_size)]
    pub request_sizes: Vec<u64>,
    /// Order of the listed files [default: extra for table, path otherwise]
    #[arg(long, value_enum)]
    pub sort: Option<SortKey>,
    /// Reverse the sort order
    #[arg(long)]
    pub reverse: bool,
    /// List at most N files (0 = all) [default: 25 for table, all otherwise]
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// List only files with at least N fragments (the summary still covers every file)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub min_fragments: u64,
    /// Scan only files with these extensions (comma-separated or repeated; e.g. db,log)
    #[arg(long = "ext", value_name = "EXT", value_delimiter = ',')]
    pub extensions: Vec<String>,
    /// Print only the summary
    #[arg(long)]
    pub summary_only: bool,
    /// Cross into other file systems mounted below a directory
    #[arg(long)]
    pub cross_mounts: bool,
    /// Flush delayed allocations first (FIEMAP_FLAG_SYNC; writes dirty data)
    #[arg(long)]
    pub sync: bool,
    /// Worker threads [default: number of CPUs]
    #[arg(long, short = 'j', value_name = "N")]
    pub threads: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FsType {
    Ext4,
    Xfs,
    Btrfs,
    F2fs,
}

#[derive(Subcommand, Debug)]
pub enum ScratchAction {
    /// Make an image file, attach it to a loop device, mkfs and mount it
    Create {
        /// File system type
        #[arg(long = "fs", value_enum, default_value_t = FsType::Ext4)]
        fs: FsType,
        /// Size of the image (K, M, G suffixes)
        #[arg(long, default_value = "1G", value_parser = units::parse_nonzero_size)]
        size: u64,
        /// Directory to hold the image and the mount point [default: a new dir under $TMPDIR]
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Extra mkfs arguments (e.g. "-b 4096"), split on spaces
        #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
        mkfs_args: Option<String>,
        /// Extra mount options (e.g. "nodelalloc")
        #[arg(long, value_name = "OPTS")]
        mount_options: Option<String>,
        /// Output format
        #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
        format: InfoFormat,
    },
    /// Unmount, detach and delete a scratch file system made by `scratch create`
    Destroy {
        /// The mount point printed by `scratch create`
        mountpoint: PathBuf,
    },
    /// List scratch file systems fragkit made that are still mounted
    List {
        #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
        format: InfoFormat,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InfoFormat {
    Table,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FreeFormat {
    /// Summary, e2freefrag-style histogram, per-group table
    Table,
    /// One JSON object with everything
    Json,
    /// The histogram (or, with --groups, one row per group)
    Csv,
}

#[derive(Args, Debug)]
pub struct FreeArgs {
    /// Mount point of an ext4 or xfs file system (btrfs: chunk usage only); needs root
    #[arg(value_name = "MOUNTPOINT")]
    pub mountpoint: PathBuf,
    /// Output format
    #[arg(long, short = 'f', value_enum, default_value_t = FreeFormat::Table)]
    pub format: FreeFormat,
    /// Table: list every group, not just the first 32
    #[arg(long)]
    pub all_groups: bool,
    /// CSV: one row per block/allocation group instead of the histogram
    #[arg(long)]
    pub groups: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MapFormat {
    /// One line saying what was drawn
    Table,
    /// One JSON object saying what was drawn
    Json,
}

#[derive(Args, Debug)]
pub struct MapArgs {
    /// File, directory or mount point whose files to draw
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// Picture to write: .png, .svg (hover shows file, offset, fragment) or .html
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Draw the whole device: metadata, free space and every file (GETFSMAP; ext4/xfs, root)
    #[arg(long)]
    pub whole_fs: bool,
    /// Write FragTracer's fragInfo.txt, fragProc.tbl and fragImg.png into DIR
    #[arg(long, value_name = "DIR")]
    pub fragtracer: Option<PathBuf>,
    /// Colour config: FragTracer color.cnf format, or TOML if the name ends in .toml
    #[arg(long, value_name = "FILE")]
    pub color_config: Option<PathBuf>,
    /// Image config: FragTracer img.cnf format, or TOML if the name ends in .toml
    #[arg(long, value_name = "FILE")]
    pub img_config: Option<PathBuf>,
    /// Do not draw contiguous runs longer than N blocks (overrides img.cnf max_length)
    #[arg(long, value_name = "N")]
    pub max_length: Option<u64>,
    /// Flush delayed allocations first (FIEMAP_FLAG_SYNC; writes dirty data)
    #[arg(long)]
    pub sync: bool,
    /// Title at the top of the picture [default: the path, file system and file count]
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    /// Output format of the summary on stdout
    #[arg(long, short = 'f', value_enum, default_value_t = MapFormat::Table)]
    pub format: MapFormat,
}
