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
    /// Watch directories live: history in SQLite, Prometheus /metrics and a live page
    Watch(WatchArgs),
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

fn listen_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    // A bare port means localhost.
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| {
        format!("'{s}' is not an address to listen on: expected IP:PORT (e.g. 127.0.0.1:9477) or a port")
    })
}

fn duration(s: &str) -> Result<std::time::Duration, String> {
    units::parse_duration(s)
}

fn interval(s: &str) -> Result<std::time::Duration, String> {
    let d = units::parse_duration(s)?;
    if d < std::time::Duration::from_millis(10) {
        return Err(format!(
            "interval '{s}' is too short: expected at least 10ms"
        ));
    }
    Ok(d)
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct WatchArgs {
    #[command(subcommand)]
    pub action: Option<WatchAction>,
    /// Directories (or files) to watch; each tick re-maps only what changed below them
    #[arg(required = true, value_name = "DIR")]
    pub paths: Vec<PathBuf>,
    /// Time between ticks (ms, s, m, h suffixes)
    #[arg(long, short = 'i', default_value = "1s", value_parser = interval)]
    pub interval: std::time::Duration,
    /// History database [default: $XDG_STATE_HOME/fragkit/watch.db, or ~/.local/state/fragkit/watch.db]
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Serve the live page (/) and Prometheus metrics (/metrics) on IP:PORT or PORT (localhost)
    #[arg(long, value_name = "ADDR", value_parser = listen_addr)]
    pub listen: Option<std::net::SocketAddr>,
    /// Allow --listen on an address other than loopback (the page shows file names)
    #[arg(long)]
    pub listen_any: bool,
    /// Write FragTracer's fragInfo.txt, fragProc.tbl and fragImg.png into OUTDIR each tick
    #[arg(long, value_name = "OUTDIR")]
    pub fragtracer: Option<PathBuf>,
    /// Full rescan period, the safety net for changes events cannot see (0 = never)
    #[arg(long, default_value = "10m", value_parser = duration)]
    pub rescan: std::time::Duration,
    /// Request size R for S(R)/I(R) and extra requests (K, M, G suffixes)
    #[arg(long = "request-size", short = 'r', value_name = "R", default_value = "128K", value_parser = request_size)]
    pub request_size: u64,
    /// Kernel interface for change events
    #[arg(long, value_enum, default_value_t = crate::watch::EventSource::Auto)]
    pub events: crate::watch::EventSource,
    /// Most per-file history rows kept (~55 bytes each); the oldest go first
    #[arg(long, value_name = "N", default_value_t = 4_000_000)]
    pub max_file_samples: u64,
    /// Stop after this long (default: until interrupted)
    #[arg(long, value_parser = duration)]
    pub duration: Option<std::time::Duration>,
    /// Format of the summary printed when the watch ends
    #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
    pub format: InfoFormat,
}

#[derive(Subcommand, Debug)]
pub enum WatchAction {
    /// Print (and plot) the history a watch recorded
    Report(WatchReportArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Table,
    Json,
    /// The totals series, one row per point
    Csv,
}

#[derive(Args, Debug)]
pub struct WatchReportArgs {
    /// History database written by `fragkit watch` [default: as for watch]
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Plot fragmentation over time into this PNG file
    #[arg(long, value_name = "FILE")]
    pub png: Option<PathBuf>,
    /// Also list the recorded samples of this file (current or former path)
    #[arg(long, value_name = "PATH")]
    pub file: Option<String>,
    #[arg(long, short = 'f', value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
}
