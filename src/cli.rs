//! Command-line parsing only: every subcommand hands its arguments to one function in cmd/.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::age::hypothetical::{HypotheticalLayout, HypotheticalMode, HypotheticalPattern};
use crate::scratch::FsType;
use crate::units;

/// Defines a clap value enum that mirrors a domain enum variant for variant, so clap stays
/// in this file: the argument keeps the domain type and is parsed through `$arg::parser()`;
/// the variants' doc comments are the help text of the values.
macro_rules! value_enum_for {
    ($(#[$m:meta])* $arg:ident => $domain:ty { $($(#[$vm:meta])* $v:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
        pub enum $arg {
            $($(#[$vm])* $v),*
        }

        impl From<$arg> for $domain {
            fn from(a: $arg) -> Self {
                match a {
                    $($arg::$v => <$domain>::$v),*
                }
            }
        }

        impl $arg {
            fn parser() -> impl clap::builder::TypedValueParser<Value = $domain> {
                use clap::builder::TypedValueParser;
                clap::builder::EnumValueParser::<$arg>::new().map(<$domain>::from)
            }
        }
    };
}

value_enum_for! {
    /// `--fs`: the file systems fragkit builds scratch images of.
    FsArg => FsType { Ext4, Xfs, Btrfs, F2fs }
}

value_enum_for! {
    /// `age hypothetical --mode`: how the chunks are written.
    ModeArg => HypotheticalMode { Append, Overwrite }
}

value_enum_for! {
    /// `age hypothetical --pattern`: where the dummy writes between chunks put the next chunk.
    PatternArg => HypotheticalPattern {
        /// Dummy of S-G after each chunk: every chunk lands on the same die
        Worst,
        /// Dummy of a random multiple of G (1..32)
        Random,
        /// Dummy of S: chunks stay die-aligned
        Aligned,
    }
}

value_enum_for! {
    /// `age hypothetical --layout`: how faithfully the workload follows the artifact.
    LayoutArg => HypotheticalLayout {
        /// The artifact's program: O_APPEND target, dummies beside it, thread not pinned
        Artifact,
        /// Dummies in a subdirectory, writer pinned to one CPU: every gap is the dummy
        Ideal,
    }
}

#[cfg(feature = "watch")]
value_enum_for! {
    /// `watch --events`: which kernel interface reports changes.
    EventsArg => crate::watch::EventSource {
        /// fanotify when root, else inotify
        Auto,
        /// fanotify, one mark per file system (needs root)
        Fanotify,
        /// inotify, one watch per directory
        Inotify,
    }
}

value_enum_for! {
    /// `lab --app`: the real application the lab drives.
    AppArg => crate::lab::app::App {
        /// RocksDB through db_bench (rocksdb-tools): fillrandom + overwrite build the
        /// database, readrandom with O_DIRECT reads it (YCSB-C)
        Rocksdb,
        /// SQLite through the library: FAST'24's database (age sqlite), read by full table
        /// scans (bench sqlite)
        Sqlite,
    }
}

value_enum_for! {
    /// `lab --workload`: what the lab reads from the fragmented files.
    WorkloadArg => crate::lab::Workload {
        /// Whole files read front to back in 128 KiB O_DIRECT requests (FragPicker's sequential read)
        Seq,
        /// 128 KiB O_DIRECT reads with 128 KiB skipped after each (FragPicker's stride read):
        /// only half of every file is hot
        Stride,
        /// A database's page reads: 16 KiB O_DIRECT random reads of 16 KiB-aligned pages over
        /// the first quarter of each file (its hot key range)
        Db,
    }
}

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
    /// Migrate fragmented ranges with each file system's atomic primitive (pick, bypass, full)
    Defrag(DefragArgs),
    /// What fragmentation costs each file on a modeled device (split requests, die
    /// collisions or seeks) and the cheapest fix, ranked; --apply carries it out
    Advise(AdviseArgs),
    /// Measure I/O on files and devices with the device's own request counters
    Bench {
        #[command(subcommand)]
        action: BenchAction,
    },
    /// Characterise a device: alignment (die granularity, stripe) and per-request overhead
    Probe {
        #[command(subcommand)]
        action: ProbeAction,
    },
    /// Free-space fragmentation from GETFSMAP: histogram, largest run, per group (ext4, xfs)
    Free(FreeArgs),
    /// Draw block maps (PNG, SVG, HTML) and write FragTracer's artefacts
    Map(MapArgs),
    /// Trace file I/O syscalls with eBPF into a per-file access profile (not mmap, io_uring or AIO; needs root)
    Trace(TraceArgs),
    /// Make fragmentation on purpose: exact layouts, the seeds' workloads, PaF and profile aging
    Age {
        #[command(subcommand)]
        action: AgeAction,
    },
    /// Replay a recorded block trace (`trace --block`) on a modeled SSD: dies, channels,
    /// an FTL placing writes in write order; modeled read MB/s and die collisions
    Ssd(SsdArgs),
    /// Watch directories live: history in SQLite, Prometheus /metrics and a live page
    #[cfg(feature = "watch")]
    Watch(WatchArgs),
    /// The whole story on a scratch file system: fragment, scan, map, bench, trace, defrag
    /// (pick vs full vs the fs's own tool, each on a clone), bench again, report.html (root)
    Lab(LabArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    #[command(
        after_help = "Examples:\n  fragkit completions bash > ~/.local/share/bash-completion/completions/fragkit\n  fragkit completions zsh > ~/.zfunc/_fragkit\n  fragkit completions fish > ~/.config/fish/completions/fragkit.fish"
    )]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command into --dir
    #[command(
        after_help = "Examples:\n  fragkit man | man -l -\n  fragkit man --dir /usr/local/share/man/man1"
    )]
    Man {
        /// Write fragkit.1 and fragkit-COMMAND.1 pages into this directory instead
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
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
    /// Exactly what `filefrag -v PATH...` prints, on stdout and stderr, with its exit status (directories are not walked: each is mapped as its own inode, as filefrag does)
    Filefrag,
}

value_enum_for! {
    /// `scan --sort`: what a listing is ordered by (most first, then path).
    SortArg => crate::scan::SortKey {
        Path,
        Fragments,
        Extents,
        /// Extra requests at the first --request-size
        Extra,
        /// Split ratio S(R)/I(R) at the first --request-size
        Ratio,
        Size,
    }
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
    #[arg(long, value_parser = SortArg::parser())]
    pub sort: Option<crate::scan::SortKey>,
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
    /// Also each file's modeled sequential read (in requests of the first R, one at a
    /// time) on an SSD (fast24, nvme-a, nvme-b, sata-a, sata-b, or g,S; see `fragkit
    /// ssd`): time now, time if contiguous, die collisions
    #[arg(long, value_name = "PRESET|g,S")]
    pub model: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum ScratchAction {
    /// Make an image file, attach it to a loop device, mkfs and mount it
    Create {
        /// File system type
        #[arg(long = "fs", value_parser = FsArg::parser(), default_value = "ext4")]
        fs: FsType,
        /// Size of the image (K, M, G suffixes)
        #[arg(long, default_value = "1G", value_parser = units::parse_nonzero_size)]
        size: u64,
        /// Directory to hold the image and the mount point [default: a new dir under $TMPDIR, or /tmp when unset]
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Extra mkfs arguments (e.g. "-b 4096"), split on spaces
        #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
        mkfs_args: Option<String>,
        /// Extra mount options (e.g. "nodelalloc")
        #[arg(long, value_name = "OPTS")]
        mount_options: Option<String>,
        /// ext4: put the journal on its own loop device of this size (as FAST'24's
        /// setdevice.sh), so the data device sees no journal writes
        #[arg(long, value_name = "SIZE", value_parser = units::parse_nonzero_size)]
        external_journal: Option<u64>,
        /// Output format
        #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
        format: InfoFormat,
    },
    /// Copy a scratch file system block for block (frozen meanwhile) and mount the copy:
    /// the same layout twice, e.g. to compare two defragmenters from one starting point
    Clone {
        /// The mount point of the scratch file system to copy
        mountpoint: PathBuf,
        /// Directory to hold the copy's image and mount point [default: a new dir under $TMPDIR, or /tmp when unset]
        #[arg(long)]
        dir: Option<PathBuf>,
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
    /// Tear down the scratch file system in DIR once process OWNER ends without doing so
    /// (started by the commands that make one, e.g. `bench paf --mpi`, so a rank killed by
    /// its launcher leaves nothing behind)
    #[command(hide = true)]
    Guard {
        /// The process that made the scratch file system
        #[arg(long)]
        owner: u32,
        /// The scratch directory (holding the marker, the image and the mount point)
        dir: PathBuf,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InfoFormat {
    Table,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Table,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DefragMode {
    /// FragPicker: hot ranges from a `fragkit trace` profile that span >1 fragment
    Pick,
    /// FragPicker-B: every --io-size window that spans >1 fragment
    Bypass,
    /// Conventional: whole files (each hole-free stretch) in more than one fragment
    Full,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DefragMethod {
    /// The file system's atomic primitive (MOVE_EXT, COMMIT_RANGE, DEFRAG_RANGE, DEFRAGMENT)
    Auto,
    /// FragPicker's read+punch+rewrite (f2fs: read+rewrite out of place, ipu_policy 0 for
    /// the run); not crash-safe, needs --unsafe (comparisons only)
    Rewrite,
}

fn mb_per_s(s: &str) -> Result<u64, String> {
    units::parse_rate_mb_s(s)
}

#[derive(Args, Debug)]
pub struct DefragArgs {
    /// Files or directories to defragment
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Which ranges to migrate
    #[arg(long, value_enum, default_value_t = DefragMode::Bypass)]
    pub mode: DefragMode,
    /// Profile from `fragkit trace` (pick mode)
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Migrate the hottest N percent of traced ranges (pick mode)
    #[arg(long, default_value_t = 100.0, value_name = "PCT")]
    pub hot_pct: f64,
    /// The application's I/O size R whose split requests to remove
    #[arg(long, default_value = "128K", value_parser = request_size)]
    pub io_size: u64,
    /// Print the plan (ranges, bytes, extra requests removed); change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Skip checksumming each range before and after (on by default)
    #[arg(long)]
    pub no_verify: bool,
    /// Limit migration to this many MB/s (interference bound)
    #[arg(long, value_name = "MB/s", value_parser = mb_per_s)]
    pub max_rate: Option<u64>,
    /// Move at most this many bytes (wear bound; K, M, G suffixes)
    #[arg(long, value_parser = units::parse_nonzero_size)]
    pub budget: Option<u64>,
    /// Move shared (reflinked or snapshot) extents too, on any file system: each gets a
    /// copy of its own, so the sharing ends and the space is used again (counted against
    /// --budget). Without it a file whose planned ranges hold shared extents is refused
    #[arg(long)]
    pub unshare: bool,
    /// Also defragment files other processes have open for writing
    #[arg(long)]
    pub force: bool,
    /// Migration mechanism
    #[arg(long, value_enum, default_value_t = DefragMethod::Auto)]
    pub method: DefragMethod,
    /// Allow the non-crash-safe rewrite method
    #[arg(long = "unsafe")]
    pub r#unsafe: bool,
    /// Files defragmented at once [default: the number of CPUs for pick and bypass; 1 for
    /// full mode, which places files by a free-space plan, and for --method rewrite]
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
}

#[derive(Args, Debug)]
pub struct AdviseArgs {
    /// Files, directories or mount points to advise on
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The device to price reads on: an SSD preset (`fragkit ssd --presets`), g,S,
    /// measured:FILE (the g and S `fragkit probe alignment DEV --format json` saved in FILE
    /// found), or the disk model (hdd, hdd@OFFSET)
    #[arg(
        long,
        value_name = "PRESET|g,S|measured:FILE|hdd",
        default_value = "fast24"
    )]
    pub device: String,
    /// Accesses to price, from `fragkit trace -o` [default: one sequential read of each file]
    #[arg(long, value_name = "FILE", conflicts_with = "trace_for")]
    pub profile: Option<PathBuf>,
    /// Record the accesses to price: trace for this long (needs root)
    #[arg(long, value_name = "SECS", value_parser = seconds, requires = "comm")]
    pub trace_for: Option<std::time::Duration>,
    /// With --trace-for: the command name whose file I/O to record
    #[arg(long, value_name = "NAME", requires = "trace_for")]
    pub comm: Option<String>,
    /// Pick mode's share of the profile's hottest ranges
    #[arg(long, default_value = "100", value_name = "PCT", value_parser = percent)]
    pub hot_pct: f64,
    /// The application's request size R
    #[arg(long, short = 'r', default_value = "128K", value_parser = request_size)]
    pub io_size: u64,
    /// How many more times the priced accesses happen before the files change: a fix is
    /// advised when it saves more modeled time over this many than its own reads and
    /// writes cost
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub reads: u64,
    /// Carry out the advice (defrag each file with its recommended mode, needs root), then
    /// measure again and print predicted against achieved
    #[arg(long)]
    pub apply: bool,
    /// With --apply: move at most this many bytes (K, M, G suffixes)
    #[arg(long, value_parser = units::parse_nonzero_size, requires = "apply")]
    pub budget: Option<u64>,
    /// With --apply: limit migration to this many MB/s
    #[arg(long, value_name = "MB/s", value_parser = mb_per_s, requires = "apply")]
    pub max_rate: Option<u64>,
    /// Files listed in the table (0: all)
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
}

#[derive(Subcommand, Debug)]
pub enum BenchAction {
    /// Read files (or a block device) and report MB/s, IOPS, latency and device counters
    Read(BenchIoArgs),
    /// Write files and report MB/s, IOPS, latency and the bytes the device wrote
    Write(BenchIoArgs),
    /// Run a command and report the requests and bytes it caused on a device
    Writes(BenchWritesArgs),
    /// FragPicker's frag size × frag distance sweep on a scratch fs: device requests, MB/s, CC, NLRS
    Sweep(BenchSweepArgs),
    /// FAST'24's degree of fragmentation: one file in 1..256 fragments, read at QD 1 and deep
    Dof(BenchDofArgs),
    /// Seagate's capacity × fragmentation × transfer-size O_DIRECT matrix on PaF structures (resumable)
    Paf(BenchPafArgs),
    /// FAST'24's result table on scratch ext4: hypothetical, SQLite and fileserver, each
    /// contiguous / fragmented / approach; modeled (fast24 SSD), real and paper MB/s (root)
    Fast24(BenchFast24Args),
    /// IOR's bandwidth method as MPI ranks (mpirun/srun): write then read per transfer size,
    /// timed from the first open to the last close, reads from another rank's file
    Ior(BenchIorArgs),
    /// FragPicker's read/update suite: sequential and stride (288 KiB gap) × read and
    /// update, 128 KiB O_DIRECT requests one at a time, mean of 5 runs; update OVERWRITES
    /// the files' data in place (as FragPicker's update benchmark does)
    Fragpicker(BenchFragpickerArgs),
    /// An application reading a SQLite database through the library: FAST'24's full table
    /// scan of a database `age sqlite` made, its pages dropped from the cache before each scan
    Sqlite(BenchSqliteArgs),
}

#[derive(Args, Debug)]
pub struct BenchSqliteArgs {
    /// The database (testdb.db, as `fragkit age sqlite` makes it)
    pub db: PathBuf,
    /// Full scans to run
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub scans: u64,
    /// Scan again and again for this long instead (e.g. 30, 30s, 2m)
    #[arg(long, value_parser = units::parse_duration, conflicts_with = "scans")]
    pub duration: Option<std::time::Duration>,
    /// Print "progress: N rows in SECS s" on stderr every N rows read (0: never)
    #[arg(long, default_value_t = 0, value_name = "ROWS")]
    pub progress: u64,
    #[arg(long, short = 'f', value_enum, default_value_t = InfoFormat::Table)]
    pub format: InfoFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FragpickerWorkload {
    /// read_seq: 128 KiB reads back to back
    SeqRead,
    /// read_stride: a 128 KiB read, then 288 KiB skipped
    StrideRead,
    /// write_seq: 128 KiB overwrites back to back
    SeqUpdate,
    /// write_stride: a 128 KiB overwrite, then 288 KiB skipped
    StrideUpdate,
}

#[derive(Args, Debug)]
pub struct BenchFragpickerArgs {
    /// Files to run the suite on (each workload over every file, reads first)
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Workloads to run, comma-separated [default: all four]
    #[arg(long, value_enum, value_delimiter = ',')]
    pub workloads: Vec<FragpickerWorkload>,
    /// Measured runs per workload and file (FragPicker: 5), after one unmeasured run
    #[arg(long, default_value_t = crate::bench::fragpicker::RUNS, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    #[arg(long, short = 'f', value_enum, default_value_t = BenchFormat::Table)]
    pub format: BenchFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchPattern {
    /// Back-to-back requests
    Seq,
    /// A request, then --gap bytes skipped
    Stride,
    /// Seeded random offsets, multiples of --align
    Random,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// io_uring (queue depths above 1)
    Uring,
    /// pread/pwrite, one request at a time
    Psync,
}

#[derive(Args, Debug)]
pub struct BenchFast24Args {
    /// Fileserver 1000 files instead of the artifact's 10000
    #[arg(long)]
    pub quick: bool,
    /// Run only these workload families (comma-separated) [default: all three]
    #[arg(long, value_enum, value_delimiter = ',', value_name = "FAMILY")]
    pub only: Vec<Fast24Family>,
    #[arg(long, default_value_t = crate::age::DEFAULT_SEED)]
    pub seed: u64,
    /// Keep each run's block trace in DIR for `fragkit ssd`
    #[arg(long, value_name = "DIR")]
    pub keep_traces: Option<PathBuf>,
    #[arg(long, short = 'f', value_enum, default_value_t = BenchFormat::Table)]
    pub format: BenchFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Fast24Family {
    /// The four hypothetical rows (append/overwrite × worst/random)
    Hypothetical,
    /// SQLite grown beside a dummy file, read by a full table scan
    Sqlite,
    /// filebench's fileserver appends, read whole
    Fileserver,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchFormat {
    Table,
    Json,
    Csv,
}

/// `--count` of `bench read|write` and `probe alignment`: every completion keeps its
/// latency (8 bytes), so the cap, 10^8 requests, holds 800 MB of them and takes ~100 s at
/// a million IOPS; a larger count would run out of memory or patience, never end well.
fn request_count(s: &str) -> Result<u64, String> {
    let max = fragkit_core::io::job::MAX_REQUESTS;
    match s.trim().parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("count '{s}': expected 1 to {max} requests")),
    }
}

fn queue_depth(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if (1..=65536).contains(&n) => Ok(n),
        _ => Err(format!(
            "queue depth '{s}': expected 1 to 65536 requests in flight"
        )),
    }
}

fn readers(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if (1..=65536).contains(&n) => Ok(n),
        _ => Err(format!(
            "readers '{s}': expected 1 to 65536 closed-loop readers"
        )),
    }
}

#[derive(Args, Debug)]
pub struct BenchIoArgs {
    /// Files (or, for read, block devices) to run the job on, one after another
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Request size (K, M, G suffixes)
    #[arg(long, default_value = "128K", value_parser = units::parse_nonzero_size)]
    pub bs: u64,
    /// Queue depth: requests in flight at once
    #[arg(long, default_value = "1", value_parser = queue_depth)]
    pub qd: u32,
    /// Access pattern
    #[arg(long, value_enum, default_value_t = BenchPattern::Seq)]
    pub pattern: BenchPattern,
    /// Bytes skipped after each request with --pattern stride
    #[arg(long, default_value = "0", value_parser = units::parse_size)]
    pub gap: u64,
    /// Random offsets are multiples of this [default: the request size]
    #[arg(long, value_parser = units::parse_nonzero_size)]
    pub align: Option<u64>,
    /// Seed of the random pattern
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// O_DIRECT: bypass the page cache (aligned buffers; sizes in logical blocks)
    #[arg(long)]
    pub direct: bool,
    /// Measured iterations (the page cache is dropped before each)
    #[arg(long, default_value_t = 3)]
    pub iterations: u32,
    /// Unmeasured iterations before them
    #[arg(long, default_value_t = 0)]
    pub warmup: u32,
    /// I/O engine
    #[arg(long, value_enum, default_value_t = EngineArg::Uring)]
    pub engine: EngineArg,
    /// Start of the region in each file
    #[arg(long, default_value = "0", value_parser = units::parse_size)]
    pub offset: u64,
    /// Length of the region [default: the file's size; required to write a new file]
    #[arg(long, value_parser = units::parse_nonzero_size)]
    pub size: Option<u64>,
    /// Requests per iteration, 1 to 100000000 [default: cover the region once]
    #[arg(long, value_parser = request_count)]
    pub count: Option<u64>,
    /// Keep the page cache between iterations (no root needed)
    #[arg(long)]
    pub no_drop_caches: bool,
    /// After each cache drop, do not read the file's mapping (extent tree, btrfs
    /// checksums) back before the timed pass: the pass then also pays those metadata
    /// reads, and on ext4 splits requests where contiguous extent records meet, as a cold start
    /// does [default: read it first and count its reads apart, so the pass's device
    /// requests are the layout's]
    #[arg(long, conflicts_with = "no_drop_caches")]
    pub cold_mapping: bool,
    /// Read jobs: also replay the first measured iteration's requests on a modeled SSD
    /// (fast24, nvme-a, nvme-b, sata-a, sata-b, or g,S; see `fragkit ssd`) and print its
    /// MB/s and die collisions beside the real figures, or on the modeled disk (hdd,
    /// hdd@OFFSET; see docs/hdd.md) with its seeks (needs --direct). Twice for both: one
    /// SSD and the disk
    #[arg(long, value_name = "PRESET|g,S|hdd")]
    pub model: Vec<String>,
    /// Output format
    #[arg(long, short = 'f', value_enum, default_value_t = BenchFormat::Table)]
    pub format: BenchFormat,
}

#[derive(Args, Debug)]
pub struct BenchWritesArgs {
    /// Block device to count on (name such as loop3 or a /dev path)
    #[arg(long, conflicts_with = "path")]
    pub device: Option<String>,
    /// Count on the device under this path's file system
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Do not sync before and after the command (buffered writes may then be missed)
    #[arg(long)]
    pub no_sync: bool,
    /// Write the command's stdout to FILE (default: onto this command's stderr, so that
    /// stdout holds only the report)
    #[arg(long, value_name = "FILE")]
    pub command_output: Option<PathBuf>,
    /// Output format
    #[arg(long, short = 'f', value_enum, default_value_t = BenchFormat::Table)]
    pub format: BenchFormat,
    /// The command to run, after `--`
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// A value list such as `4K..1M`, `10..80/10` or `1M,8M` (see units::parse_value_list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueList(pub Vec<u64>);

fn value_list(s: &str) -> Result<ValueList, String> {
    units::parse_value_list(s).map(ValueList)
}

#[derive(Args, Debug)]
pub struct BenchSweepArgs {
    /// Frag sizes F: a list or range (K, M suffixes; A..B doubles, A..B/STEP steps)
    #[arg(long, default_value = "4K..1M", value_parser = value_list)]
    pub frag_size: ValueList,
    /// Frag distances D: a list or range
    #[arg(long, default_value = "4K,64K,1M", value_parser = value_list)]
    pub frag_distance: ValueList,
    /// File system of the scratch fs fragkit makes (and destroys) for the sweep
    #[arg(long, value_parser = FsArg::parser(), default_value = "ext4")]
    pub fs: FsType,
    /// Size of the laid-out file
    #[arg(long, default_value = "8M", value_parser = units::parse_nonzero_size)]
    pub size: u64,
    /// Request size of the sequential O_DIRECT read
    #[arg(long, default_value = "128K", value_parser = units::parse_nonzero_size)]
    pub request_size: u64,
    /// Reads per point (caches dropped before each)
    #[arg(long, default_value_t = 3)]
    pub iterations: u32,
    /// Scratch image size [default: the largest layout's span plus room]
    #[arg(long, value_parser = units::parse_nonzero_size)]
    pub scratch_size: Option<u64>,
    /// Keep the scratch file system mounted afterwards
    #[arg(long)]
    pub keep: bool,
    /// Write a PNG plot of requests and MB/s against frag size
    #[arg(long, value_name = "PNG")]
    pub plot: Option<PathBuf>,
    #[arg(long, short = 'f', value_enum, default_value_t = BenchFormat::Table)]
    pub format: BenchFormat,
}

#[derive(Args, Debug)]
pub struct BenchDofArgs {
    /// Degrees of fragmentation (fragments per file): a list or range
    #[arg(long, default_value = "1..256", value_parser = value_list)]
    pub dof: ValueList,
    /// File size
    #[arg(long, default_value = "8M", value_parser = units::parse_nonzero_size)]
    pub size: u64,
    /// Bytes between consecutive fragments
    #[arg(long, default_value = "64K", value_parser = units::parse_nonzero_size)]
    pub frag_distance: u64,
    /// Request size of the O_DIRECT read (FAST'24: 1 MiB)
    #[arg(long, default_value = "1M", value_parser = units::parse_nonzero_size)]
    pub bs: u64,
    /// Queue depths (requests in flight) to compare
    #[arg(long, value_delimiter = ',', default_value = "1,32", value_parser = queue_depth)]
    pub qd: Vec<u32>,
    #[arg(long, value_parser = FsArg::parser(), default_value = "ext4")]
    pub fs: FsType,
    /// Reads per point (caches dropped before each)
    #[arg(long, default_value_t = 3)]
    pub iterations: u32,
    /// Scratch image size [default: from the largest layout]
    #[arg(long, value_parser = units::parse_nonzero_size)]
    pub scratch_size: Option<u64>,
    /// Write a PNG plot of MB/s and requests against DoF
    #[arg(long, value_name = "PNG")]
    pub plot: Option<PathBuf>,
    #[arg(long, short = 'f', value_enum, default_value_t = BenchFormat::Table)]
    pub format: BenchFormat,
}

#[derive(Args, Debug)]
pub struct BenchIorArgs {
    /// Directory for the test files (IOR -o), on the file system to measure
    pub dir: PathBuf,
    /// Transfer sizes, one request each (IOR -t): a list or range
    #[arg(long, default_value = "1M", value_parser = value_list)]
    pub xfer: ValueList,
    /// Bytes each rank writes and reads per iteration (IOR -b)
    #[arg(long, default_value = "64M", value_parser = units::parse_nonzero_size)]
    pub block: u64,
    /// O_DIRECT (IOR -B, --posix.odirect)
    #[arg(long)]
    pub direct: bool,
    /// Write phase (IOR -w); with neither --write nor --read both run
    #[arg(long)]
    pub write: bool,
    /// Read phase (IOR -r)
    #[arg(long)]
    pub read: bool,
    /// Repetitions per transfer size (IOR -i)
    #[arg(long, default_value_t = 5)]
    pub iterations: u32,
    /// One file per rank (IOR -F)
    #[arg(long, conflicts_with = "shared_file")]
    pub file_per_process: bool,
    /// One file for all ranks, rank r's block at r × --block (IOR's default)
    #[arg(long)]
    pub shared_file: bool,
    /// Read back one's own data (IOR without -C); by default each rank reads another
    /// rank's, one node away when there are several (IOR -C)
    #[arg(long)]
    pub no_reorder: bool,
    /// Nodes between a rank and the rank whose data it reads (IOR -Q), under the mapping of
    /// ranks to nodes learnt from their host names
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub reorder_offset: u32,
    /// Each rank reads a random other node's rank's data (IOR -Z)
    #[arg(long, conflicts_with = "no_reorder")]
    pub reorder_random: bool,
    /// Seed of --reorder-random (IOR -X); negative: its magnitude plus the iteration, so
    /// every iteration draws anew
    #[arg(
        long,
        default_value_t = 0,
        allow_negative_numbers = true,
        requires = "reorder_random"
    )]
    pub reorder_seed: i64,
    /// Segments (IOR -s): each rank's data is this many blocks, segment s of the shared
    /// file holding every rank's s-th block
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub segments: u64,
    /// Each block's transfers in a seeded random order, the same in every segment (IOR -z)
    #[arg(long)]
    pub random_offsets: bool,
    /// Stop each phase after this many seconds (IOR -D, stonewalling): bandwidth is over
    /// the bytes moved, and a reader of a stopped writer's data reads what was written
    #[arg(long, value_parser = units::parse_seconds)]
    pub deadline: Option<std::time::Duration>,
    /// Say the node map, whose data each rank reads and each phase as it ends; twice:
    /// every rank's bytes and times (IOR -v)
    #[arg(long, short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Keep the files after the last iteration (IOR -k)
    #[arg(long)]
    pub keep: bool,
    /// fsync at the end of each write phase, timed in it (IOR -e); without it the write
    /// phase ends at the last write, as IOR's default
    #[arg(long)]
    pub fsync: bool,
    #[arg(long, short = 'f', value_enum, default_value_t = BenchFormat::Table)]
    pub format: BenchFormat,
}

#[derive(Args, Debug)]
pub struct BenchPafArgs {
    /// Capacities filled by the PaF structure, percent: a list or range
    #[arg(long, default_value = "10..80/10", value_parser = value_list)]
    pub capacities: ValueList,
    /// Fragmentation: percent of the structure's files deleted at random
    #[arg(long, default_value = "0..70/10", value_parser = value_list)]
    pub frag: ValueList,
    /// Transfer (request) sizes of the O_DIRECT write and read
    #[arg(long, default_value = "1M..64M", value_parser = value_list)]
    pub xfer: ValueList,
    /// Runs per transfer size (MB/s mean and CoV over them)
    #[arg(long, default_value_t = 5)]
    pub iterations: u32,
    /// Results CSV: rows appended as each cell finishes; cells already in it are skipped
    #[arg(long, default_value = "fragkit-paf.csv")]
    pub csv: PathBuf,
    #[arg(long, value_parser = FsArg::parser(), default_value = "ext4")]
    pub fs: FsType,
    /// Scratch image size (a fresh one per cell) [default: 1G, or as much larger as every
    /// rank's --bench-size needs beside the largest capacity]
    #[arg(long, value_parser = units::parse_nonzero_size)]
    pub fs_size: Option<u64>,
    /// Size of the file written and read per transfer size
    #[arg(long, default_value = "128M", value_parser = units::parse_nonzero_size)]
    pub bench_size: u64,
    /// File size of the PaF population
    #[arg(long, default_value = "16M", value_parser = units::parse_nonzero_size)]
    pub file_size: u64,
    /// Seed of the PaF deletions
    #[arg(long, default_value_t = 67005)]
    pub seed: u64,
    /// Directory for heat-map PNGs (one per transfer size)
    #[arg(long, value_name = "DIR")]
    pub plot_dir: Option<PathBuf>,
    /// Run as MPI ranks (under mpirun/srun): every rank populates its share of each cell
    /// and writes and reads its own --bench-size file with IOR's method; rank 0 keeps the CSV
    #[arg(long)]
    pub mpi: bool,
    /// Also price each benchmarked file's writes and reads on the disk model (hdd or
    /// hdd@OFFSET, a Constellation ES.3 4 TB; see docs/hdd.md): modeled MB/s per row
    /// beside the measured ones (not with --mpi)
    #[arg(long, value_name = "hdd")]
    pub model: Option<String>,
    #[arg(long, short = 'f', value_enum, default_value_t = BenchFormat::Table)]
    pub format: BenchFormat,
}

#[derive(Subcommand, Debug)]
pub enum ProbeAction {
    /// 4 KiB random reads at alignments 4 KiB..1 MiB: infer die granularity and stripe
    Alignment(ProbeAlignmentArgs),
    /// The same bytes in 1..2048 requests at QD1 and QD32: per-request overhead
    Interface(ProbeInterfaceArgs),
}

#[derive(Args, Debug)]
pub struct ProbeAlignmentArgs {
    /// An unmounted block device, or a file
    #[arg(value_name = "DEVICE|FILE")]
    pub target: PathBuf,
    /// Read size
    #[arg(long, default_value = "4K", value_parser = units::parse_nonzero_size)]
    pub bs: u64,
    /// Requests in flight
    #[arg(long, default_value = "64", value_parser = queue_depth)]
    pub qd: u32,
    /// Alignments are multiples of this step
    #[arg(long, default_value = "4K", value_parser = units::parse_nonzero_size)]
    pub step: u64,
    /// Largest alignment
    #[arg(long, default_value = "1M", value_parser = units::parse_nonzero_size)]
    pub max: u64,
    /// Reads per alignment, 1 to 100000000
    #[arg(long, default_value = "4096", value_parser = request_count)]
    pub count: u64,
    /// Bytes of the target the reads spread over [default: all of it]
    #[arg(long, value_parser = units::parse_nonzero_size)]
    pub span: Option<u64>,
    /// Seed of the random offsets
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output format
    #[arg(long, short = 'f', value_enum, default_value_t = BenchFormat::Table)]
    pub format: BenchFormat,
}

#[derive(Args, Debug)]
pub struct ProbeInterfaceArgs {
    /// An unmounted block device, or a file
    #[arg(value_name = "DEVICE|FILE")]
    pub target: PathBuf,
    /// Bytes read in every run
    #[arg(long, default_value = "8M", value_parser = units::parse_nonzero_size)]
    pub bytes: u64,
    /// Largest number of requests the bytes are split into (powers of two from 1)
    #[arg(long, default_value_t = 2048)]
    pub max_requests: u64,
    /// Queue depths to compare (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "1,32", value_parser = queue_depth)]
    pub qd: Vec<u32>,
    /// Runs per point (trimmed mean reported)
    #[arg(long, default_value_t = 5)]
    pub iterations: u32,
    /// Output format
    #[arg(long, short = 'f', value_enum, default_value_t = BenchFormat::Table)]
    pub format: BenchFormat,
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

fn seconds(s: &str) -> Result<std::time::Duration, String> {
    units::parse_seconds(s)
}

#[derive(Args, Debug)]
#[command(
    after_help = "Traced: read, write, readv, writev, pread64, pwrite64, preadv, pwritev, preadv2, pwritev2 on regular files.\nNot traced: mmap page faults, io_uring, AIO (io_submit), sendfile, splice and copy_file_range: I/O through them is missing from the profile.\n\nExamples:\n  fragkit trace -o app.json -- ./app --flag\n  fragkit trace --pid 1234 --duration 30 --summary\n  fragkit trace --mount /data --comm rocksdb -d 60 -o db.json"
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
    pub duration: Option<std::time::Duration>,
    /// Write the profile (JSON) to this file
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the hottest files and ranges with their current fragmentation
    #[arg(long)]
    pub summary: bool,
    /// With --summary: also each range's modeled read time on an SSD (fast24, nvme-a,
    /// nvme-b, sata-a, sata-b, or g,S; see `fragkit ssd`), now and if contiguous
    #[arg(long, value_name = "PRESET|g,S", requires = "summary")]
    pub model: Option<String>,
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
    /// Record block requests on this whole block device instead of file calls (for
    /// `fragkit ssd`): time, sector, bytes, op; with --mount, each data request's file
    /// inode and offset from the file system's final layout. Needs -o
    #[arg(long, value_name = "DEV", requires = "output")]
    pub block: Option<PathBuf>,
    /// Command to launch and trace (with its children), after `--`
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct SsdArgs {
    /// Block trace written by `fragkit trace --block DEV -o FILE`
    #[arg(value_name = "TRACE", required_unless_present = "presets")]
    pub trace: Option<PathBuf>,
    /// Device: fast24, nvme-a, nvme-b, sata-a, sata-b, or g,S as measured by
    /// `fragkit probe alignment` (e.g. 32K,1M)
    #[arg(long, short = 'm', value_name = "PRESET|g,S", default_value = "fast24")]
    pub model: String,
    /// FAST'24's host-assisted placement: a write's die follows its file offset
    #[arg(long)]
    pub approach: bool,
    /// Device commands in flight at most (default: the preset's)
    #[arg(long, value_name = "N", value_parser = queue_depth)]
    pub queue_depth: Option<u32>,
    /// Replay the trace's reads as N closed-loop readers (each application request starts
    /// when one of N is free) instead of with the recording's overlap: for a read phase of
    /// N synchronous threads (bench fast24's fileserver: 10)
    #[arg(long, value_name = "N", value_parser = readers)]
    pub readers: Option<u32>,
    /// List the presets with every parameter and exit
    #[arg(long)]
    pub presets: bool,
    /// Output format
    #[arg(long, short = 'f', value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
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
    /// FAST'24's SQLite workload: 16 KiB records inserted while a dummy file gets 100 KiB
    /// + fdatasync after each, then a full table scan
    Sqlite(AgeSqliteArgs),
    /// filebench's fileserver personality (fileserver.f: threads create, write, append,
    /// read, delete and stat files of a set), or with `--mix artifact` FAST'24's
    /// fileserver_append.f / fileserver_read.f (32 KiB appends, then O_DIRECT reads)
    Fileserver(AgeFileserverArgs),
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
    /// Relocate alternate 4 KiB pieces afterwards (EXT4_IOC_MOVE_EXT), as FragPicker's ext4
    /// fragmentor does, so ext4's preallocation does not hide the interleaving [auto: on ext4]
    #[arg(long, value_enum, default_value_t = FragmentorArg::Auto)]
    pub fragmentor: FragmentorArg,
    #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
    pub format: InfoFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FragmentorArg {
    Auto,
    On,
    Off,
}

#[derive(Args, Debug)]
pub struct AgeHypotheticalArgs {
    /// The target file to create (replaced if it exists)
    pub file: PathBuf,
    #[arg(long, value_parser = ModeArg::parser(), default_value = "append")]
    pub mode: HypotheticalMode,
    #[arg(long, value_parser = PatternArg::parser(), default_value = "worst")]
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
    /// artifact: the artifact's program (O_APPEND target, dummies beside it, thread not
    /// pinned); ideal: dummies in a subdirectory, writer pinned, every gap the dummy
    #[arg(long, value_parser = LayoutArg::parser(), default_value = "artifact")]
    pub layout: HypotheticalLayout,
    /// The artifact's pseudo approach: pad every dummy to a multiple of the stripe S so
    /// each chunk starts on the next die (FAST'24 Fig. 11)
    #[arg(long)]
    pub approach: bool,
    /// Read the target back afterwards (page cache dropped, O_DIRECT 1 MiB reads), timed
    #[arg(long)]
    pub read_back: bool,
    /// Record the run's block requests (and the read-back) to FILE for `fragkit ssd`
    #[arg(long, value_name = "FILE")]
    pub block_trace: Option<PathBuf>,
    #[arg(long, default_value_t = crate::age::DEFAULT_SEED)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
    pub format: InfoFormat,
}

#[derive(Args, Debug)]
pub struct AgeSqliteArgs {
    /// Directory to create testdb.db and dummy.data in
    pub dir: PathBuf,
    /// Records of 16 KiB to insert
    #[arg(long, default_value_t = crate::age::sqlite::RECORDS)]
    pub records: u64,
    /// Bytes appended to the dummy file (then fdatasync) after each insert
    #[arg(long, default_value = "100K", value_parser = units::parse_nonzero_size)]
    pub dummy: u64,
    /// No dummy file: the database grows alone (the artifact's contiguous case)
    #[arg(long)]
    pub contiguous: bool,
    /// Scan the table afterwards (page cache dropped), timed
    #[arg(long)]
    pub read_back: bool,
    /// Record the run's block requests (and the scan) to FILE for `fragkit ssd`
    #[arg(long, value_name = "FILE")]
    pub block_trace: Option<PathBuf>,
    #[arg(long, default_value_t = crate::age::DEFAULT_SEED)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
    pub format: InfoFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FileserverMix {
    /// filebench's fileserver.f: all 11 flowops (create, write, append, read, delete, stat)
    Filebench,
    /// FAST'24's artifact: fileserver_append.f then fileserver_read.f (what bench fast24 runs)
    Artifact,
}

#[derive(Args, Debug)]
pub struct AgeFileserverArgs {
    /// Directory to create bigfileset in
    pub dir: PathBuf,
    /// Which flowops: filebench's whole fileserver.f, or the FAST'24 artifact's appends
    #[arg(long, value_enum, default_value_t = FileserverMix::Filebench)]
    pub mix: FileserverMix,
    /// Files in the set
    #[arg(long, default_value_t = 10_000)]
    pub files: u64,
    /// Size of each file when created (filebench: the mean of gamma-distributed sizes)
    #[arg(long, default_value = "128K", value_parser = units::parse_nonzero_size)]
    pub file_size: u64,
    /// Threads [default: 50 filebench, 10 artifact]
    #[arg(long)]
    pub threads: Option<usize>,
    /// Bytes per append (filebench: appends are uniform in 0..this) [default: 16K filebench,
    /// 32K artifact]
    #[arg(long, value_parser = units::parse_nonzero_size)]
    pub append: Option<u64>,
    /// filebench: gamma shape of the file sizes (0: every file --file-size)
    #[arg(long, default_value_t = 1.5)]
    pub size_gamma: f64,
    /// filebench: percent of the files that exist before the run
    #[arg(long, default_value_t = 80)]
    pub prealloc: u32,
    /// filebench: I/O size of the whole-file writes and reads
    #[arg(long, default_value = "1M", value_parser = units::parse_nonzero_size)]
    pub iosize: u64,
    /// filebench: loops of the 11 flowops, all threads together [default: --files]
    #[arg(long)]
    pub loops: Option<u64>,
    /// artifact: appends in all [default: two per file]
    #[arg(long)]
    pub appends: Option<u64>,
    /// artifact: write the final sizes one file after another instead (the artifact's rsync copy)
    #[arg(long)]
    pub contiguous: bool,
    /// artifact: read every file whole afterwards (O_DIRECT 1 MiB, page cache dropped), timed
    #[arg(long)]
    pub read_back: bool,
    /// Record the run's block requests to FILE for `fragkit ssd`
    #[arg(long, value_name = "FILE")]
    pub block_trace: Option<PathBuf>,
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

#[cfg(feature = "watch")]
fn listen_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    // A bare port means localhost.
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| {
        format!("'{s}' is not an address to listen on: expected IP:PORT (e.g. 127.0.0.1:9477) or a port")
    })
}

#[cfg(feature = "watch")]
fn duration(s: &str) -> Result<std::time::Duration, String> {
    units::parse_duration(s)
}

#[cfg(feature = "watch")]
fn interval(s: &str) -> Result<std::time::Duration, String> {
    let d = units::parse_duration(s)?;
    if d < std::time::Duration::from_millis(10) {
        return Err(format!(
            "interval '{s}' is too short: expected at least 10ms"
        ));
    }
    Ok(d)
}

#[cfg(feature = "watch")]
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
    /// Write FragTracer's fragInfo.txt, fragProc.tbl and fragImg.png into OUTDIR at start and
    /// after each tick that changed a file (each write maps the whole tree)
    #[arg(long, value_name = "OUTDIR")]
    pub fragtracer: Option<PathBuf>,
    /// Full rescan period, the safety net for changes events cannot see (0 = never)
    #[arg(long, default_value = "10m", value_parser = duration)]
    pub rescan: std::time::Duration,
    /// Request size R for S(R)/I(R) and extra requests (K, M, G suffixes)
    #[arg(long = "request-size", short = 'r', value_name = "R", default_value = "128K", value_parser = request_size)]
    pub request_size: u64,
    /// Kernel interface for change events
    #[arg(long, value_parser = EventsArg::parser(), default_value = "auto")]
    pub events: crate::watch::EventSource,
    /// Most per-file history rows kept (~61 bytes each); the oldest go first
    #[arg(long, value_name = "N", default_value_t = 4_000_000)]
    pub max_file_samples: u64,
    /// Stop after this long (default: until interrupted)
    #[arg(long, value_parser = duration)]
    pub duration: Option<std::time::Duration>,
    /// Format of the summary printed when the watch ends
    #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
    pub format: InfoFormat,
}

#[cfg(feature = "watch")]
#[derive(Subcommand, Debug)]
pub enum WatchAction {
    /// Print (and plot) the history a watch recorded
    Report(WatchReportArgs),
}

#[cfg(feature = "watch")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WatchReportFormat {
    Table,
    Json,
    /// The totals series, one row per point
    Csv,
}

#[cfg(feature = "watch")]
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
    #[arg(long, short = 'f', value_enum, default_value_t = WatchReportFormat::Table)]
    pub format: WatchReportFormat,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  fragkit lab                                  # ext4, 2 GiB, seq workload -> ./fragkit-lab/report.html\n  fragkit lab --fs xfs --workload stride --out /tmp/xfs-lab\n  fragkit lab --size 512M --format json"
)]
pub struct LabArgs {
    /// File system to build and fragment
    #[arg(long = "fs", value_parser = FsArg::parser(), default_value = "ext4")]
    pub fs: FsType,
    /// Size of the scratch file system (K, M, G suffixes; at least 256M)
    #[arg(long, default_value = "2G", value_parser = units::parse_nonzero_size)]
    pub size: u64,
    /// What the application reads
    #[arg(long, value_parser = WorkloadArg::parser(), default_value = "seq")]
    pub workload: crate::lab::Workload,
    /// A real application instead of the synthetic files: its database built on the aged
    /// file system, traced and advised, then defragmented by every method while it runs
    /// (needs the application installed: rocksdb-tools for db_bench)
    #[arg(long, value_parser = AppArg::parser(), conflicts_with_all = ["files", "report_only"])]
    pub app: Option<crate::lab::app::App>,
    /// With --app: rounds; each runs every defragmenter once, on its own fresh clone, in
    /// rotating order, so each ratio is paired within a round
    #[arg(long, default_value_t = 7, requires = "app")]
    pub rounds: u32,
    /// With --app: the scratch device's ceiling while the application runs: sata-ssd
    /// (Samsung 860 EVO data sheet: 550/520 MB/s, 98k/90k IOPS), none, or
    /// READ_BPS,WRITE_BPS[,READ_IOPS,WRITE_IOPS]
    #[arg(long, default_value = "sata-ssd", requires = "app")]
    pub io_limit: String,
    /// With --app: leave the application and the defragmenters where the scheduler puts
    /// them (by default, with two or more CPUs, the application runs on the last CPU and
    /// each defragmenter on the others, through taskset)
    #[arg(long, requires = "app")]
    pub no_pin: bool,
    /// With --app rocksdb: start from the database a lab run kept (`--keep`) in this --out
    /// directory: its base is cloned instead of aged and filled again, so that runs compare
    /// on one layout (db_bench's background flushes and compactions lay out every fill
    /// differently)
    #[arg(long, value_name = "DIR", requires = "app")]
    pub database_from: Option<PathBuf>,
    /// Directory for report.html, report.json, maps/, data/, logs/, reproduce.sh
    #[arg(long, default_value = "fragkit-lab")]
    pub out: PathBuf,
    /// Files FragPicker's synthetic workload grows side by side
    #[arg(long, default_value_t = 4)]
    pub files: usize,
    /// PaF structure laid down first: fill, then delete at random (see `fragkit age paf`);
    /// `none`: no PaF, the files grow in free space with room for them whole
    /// [default: PAF:85.50@64K; with --app sqlite: none, as FAST'24, whose database is
    /// fragmented by its own dummy file]
    #[arg(long)]
    pub paf: Option<String>,
    /// Measured iterations of the workload per state (trimmed mean: the extremes are dropped)
    #[arg(long, default_value_t = 5)]
    pub iterations: u32,
    /// Skip the file system's own defragmenter (e4defrag, xfs_fsr, btrfs defragment)
    #[arg(long)]
    pub no_baseline: bool,
    /// Leave the scratch file systems mounted afterwards
    #[arg(long)]
    pub keep: bool,
    /// Where the scratch images go [default: a new dir under $TMPDIR when set, else under /dev/shm when it has room for every image, else under /tmp]
    #[arg(long, value_name = "DIR")]
    pub scratch_dir: Option<PathBuf>,
    /// Seed of the aging
    #[arg(long, default_value_t = crate::age::DEFAULT_SEED)]
    pub seed: u64,
    /// Run nothing: rebuild report.html, report.json and reproduce.sh in DIR from the steps'
    /// outputs in DIR/data (what a lab run or its reproduce.sh left there)
    #[arg(long, value_name = "DIR")]
    pub report_only: Option<PathBuf>,
    /// What to print at the end (the report files are written either way)
    #[arg(long, short = 'f', value_enum, default_value_t = InfoFormat::Table)]
    pub format: InfoFormat,
}
