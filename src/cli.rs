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
    /// Make fragmentation on purpose: exact layouts, the seeds' workloads, PaF and profile aging
    Age {
        #[command(subcommand)]
        action: AgeAction,
    },
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

#[derive(Subcommand, Debug)]
pub enum AgeAction {
    /// A file whose fragments are F bytes with D bytes between them (fill-and-punch on
    /// ext4/xfs, interleaved O_DIRECT writes with a spacer on btrfs/f2fs)
    Layout(AgeLayoutArgs),
    /// FragPicker's synthetic workload: round-robin 4 KiB O_DIRECT appends across files
    FragpickerSynthetic(AgeFragpickerArgs),
    /// The FAST'24 hypothetical workload: chunk, fdatasync, dummy file, repeated
    Hypothetical(AgeHypotheticalArgs),
    /// Seagate's Populate-and-Fragment aging from a spec such as PAF:70.30:67005@264M
    Paf(AgePafArgs),
    /// Geriatrix-style profile aging with a layout-score and free-space time series
    Profile(AgeProfileArgs),
}

#[derive(Args, Debug)]
pub struct AgeLayoutArgs {
    /// The file to create (replaced if it exists)
    pub file: PathBuf,
    /// File size (K, M, G suffixes)
    #[arg(long, value_parser = units::parse_nonzero_size)]
    pub size: u64,
    /// Bytes per fragment F
    #[arg(long, value_parser = units::parse_nonzero_size)]
    pub frag_size: u64,
    /// Bytes between consecutive fragments D
    #[arg(long, value_parser = units::parse_nonzero_size)]
    pub frag_distance: u64,
    /// Seed of the data written
    #[arg(long, default_value_t = crate::age::DEFAULT_SEED)]
    pub seed: u64,
    /// Allow filling a file system that is not a fragkit scratch one (ext4/xfs technique)
    #[arg(long)]
    pub force: bool,
    #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
    pub format: InfoFormat,
}

#[derive(Args, Debug)]
pub struct AgeFragpickerArgs {
    /// Directory to create the files in
    pub dir: PathBuf,
    /// Number of files
    #[arg(long, default_value_t = 4)]
    pub files: usize,
    /// Size of each file (K, M, G suffixes; rounded down to whole rounds)
    #[arg(long, value_parser = units::parse_nonzero_size)]
    pub size: u64,
    /// Seed of the data written
    #[arg(long, default_value_t = crate::age::DEFAULT_SEED)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
    pub format: InfoFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HypotheticalMode {
    Append,
    Overwrite,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HypotheticalPattern {
    /// Dummy of S-G after each chunk: every chunk lands on the same die
    Worst,
    /// Dummy of a random multiple of G (1..32)
    Random,
    /// Dummy of S: chunks stay die-aligned
    Aligned,
}

#[derive(Args, Debug)]
pub struct AgeHypotheticalArgs {
    /// The target file to create (replaced if it exists)
    pub file: PathBuf,
    #[arg(long, value_enum, default_value_t = HypotheticalMode::Append)]
    pub mode: HypotheticalMode,
    #[arg(long, value_enum, default_value_t = HypotheticalPattern::Worst)]
    pub pattern: HypotheticalPattern,
    /// Chunk size G (the die granularity)
    #[arg(long, default_value = "32K", value_parser = units::parse_nonzero_size)]
    pub chunk: u64,
    /// Stripe size S
    #[arg(long, default_value = "256K", value_parser = units::parse_nonzero_size)]
    pub stripe: u64,
    /// Target file size
    #[arg(long, default_value = "8M", value_parser = units::parse_nonzero_size)]
    pub size: u64,
    /// Write with O_DIRECT (the artifact wrote buffered, with ext4 mounted nodelalloc)
    #[arg(long)]
    pub direct: bool,
    /// Leave the ext4 allocator tunables (mb_stream_req) as they are
    #[arg(long)]
    pub no_tune: bool,
    /// Keep the dummy files (default: delete them afterwards)
    #[arg(long)]
    pub keep_dummies: bool,
    #[arg(long, default_value_t = crate::age::DEFAULT_SEED)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
    pub format: InfoFormat,
}

#[derive(Args, Debug)]
pub struct AgePafArgs {
    /// PAF:AA.BB[,CC.DD...][:SEED]@SIZE[,SIZE...][<KBLOCKS]
    pub spec: String,
    /// Mount point of the file system to age (a fragkit scratch file system)
    #[arg(long)]
    pub target: PathBuf,
    /// Writer threads [default: number of CPUs]
    #[arg(long, short = 'j')]
    pub threads: Option<usize>,
    /// Seed when the spec has none
    #[arg(long)]
    pub seed: Option<u64>,
    /// Age a file system that is not a scratch one, or one already above the target fill
    #[arg(long)]
    pub force: bool,
    /// Plan and print the file set without writing anything
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
    pub format: InfoFormat,
}

#[derive(Args, Debug)]
pub struct AgeProfileArgs {
    /// Mount point of the file system to age (a fragkit scratch file system)
    #[arg(long)]
    pub target: PathBuf,
    /// Fullness to reach and keep, percent of capacity
    #[arg(long, default_value_t = 70.0)]
    pub fullness: f64,
    /// Size distribution: a shipped profile name (office, database) or a JSON file
    #[arg(long, default_value = "office")]
    pub sizes: String,
    /// Stop after writing this many times the capacity during churn
    #[arg(long, default_value_t = 1.0)]
    pub churn: f64,
    /// Time-series points recorded during churn
    #[arg(long, default_value_t = 10)]
    pub steps: u32,
    #[arg(long, default_value_t = crate::age::DEFAULT_SEED)]
    pub seed: u64,
    /// Age a file system that is not a scratch one
    #[arg(long)]
    pub force: bool,
    #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
    pub format: InfoFormat,
}
