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
    /// Trace real file I/O with eBPF into a per-file access profile (needs root)
    Trace(TraceArgs),
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
pub enum TraceFormat {
    /// Without --summary: the profile as JSON; with it: a table of the hottest ranges
    Table,
    /// Without --summary: the profile; with it: the summary as one JSON object
    Json,
}

fn percent(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 100.0 => Ok(v),
        _ => Err(format!("'{s}' is not a percentage in (0, 100]")),
    }
}

fn seconds(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('s').parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!(
            "duration '{s}': expected a positive number of seconds, e.g. 10 or 2.5"
        )),
    }
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  fragkit trace -o app.json -- ./app --flag\n  fragkit trace --pid 1234 --duration 30 --summary\n  fragkit trace --mount /data --comm rocksdb -d 60 -o db.json"
)]
pub struct TraceArgs {
    /// Trace only this process and the children it forks (repeatable)
    #[arg(long, short = 'p', value_name = "PID")]
    pub pid: Vec<u32>,
    /// Trace only processes with this name (as in /proc/PID/comm; at most 15 bytes)
    #[arg(long, value_name = "NAME")]
    pub comm: Option<String>,
    /// Trace only processes in this cgroup v2 directory or below it
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<PathBuf>,
    /// Trace only files on the file system mounted at (or containing) this path
    #[arg(long, value_name = "MOUNTPOINT")]
    pub mount: Option<PathBuf>,
    /// Stop after this many seconds (default: when CMD exits, or on Ctrl-C / SIGTERM)
    #[arg(long, short = 'd', value_name = "SECS", value_parser = seconds)]
    pub duration: Option<f64>,
    /// Write the profile (JSON) to this file
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the hottest files and ranges with their current fragmentation
    #[arg(long)]
    pub summary: bool,
    /// Output format of what goes to stdout
    #[arg(long, short = 'f', value_enum, default_value_t = TraceFormat::Table)]
    pub format: TraceFormat,
    /// Keep only the hottest PCT percent of ranges by access count
    #[arg(long, value_name = "PCT", default_value = "100", value_parser = percent)]
    pub hot_pct: f64,
    /// Keep only ranges accessed at least N times
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub min_count: u64,
    /// Request size R for the summary's extra requests per access (K, M, G suffixes)
    #[arg(long = "request-size", short = 'r', value_name = "R", default_value = "128K", value_parser = request_size)]
    pub request_size: u64,
    /// Ranges the summary lists
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
    /// Command to launch and trace (with its children), after `--`
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}
