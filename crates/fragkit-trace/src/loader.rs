//! Loads src/trace/bpf/fileio.bpf.c, attaches it to the raw sys_exit tracepoint (and
//! sched_process_fork and sched_process_exit when it follows a pid set: children join the
//! set, exited processes leave it) and drains its ring buffer until told to stop.
//!
//! Every attachment is a libbpf link owned by the skeleton, which lives on this module's
//! stack: returning (normally, by error or after Ctrl-C/SIGTERM, which only set a flag)
//! drops it and detaches everything. Nothing is pinned, so even a SIGKILLed tracer leaves
//! nothing attached: the kernel closes the link fds with the process.

use std::fs;
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};

mod skel {
    include!(concat!(env!("OUT_DIR"), "/fileio.skel.rs"));
}
use skel::FileioSkelBuilder;

use fragkit_sys::dev::{kernel_dev, kernel_dev_parts};
use fragkit_sys::fsinfo::{FsInfo, CGROUP2_MAGIC};

/// One completed read/write-family call on a regular file (struct event in fileio.bpf.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Event {
    pub ino: u64,
    pub offset: u64,
    pub bytes: u64,
    /// Address of the kernel's struct file: one open file description (a readahead stream).
    pub file: u64,
    /// i_size after the call.
    pub size: u64,
    /// Kernel dev_t (major << 20 | minor).
    pub dev: u32,
    pub tgid: u32,
    pub op: u8,
    pub direct: u8,
    pub blkbits: u8,
    pad: u8,
    /// i_generation (with ino, what a file handle of ext4 or xfs holds).
    pub gen: u32,
}

// Event must match the C struct field for field; the skeleton's generated copy of it
// (from the BTF of fileio.bpf.c) is the reference.
const _: () = {
    use std::mem::{offset_of, size_of};
    type C = skel::types::event;
    assert!(size_of::<Event>() == size_of::<C>());
    assert!(offset_of!(Event, ino) == offset_of!(C, ino));
    assert!(offset_of!(Event, offset) == offset_of!(C, offset));
    assert!(offset_of!(Event, bytes) == offset_of!(C, bytes));
    assert!(offset_of!(Event, file) == offset_of!(C, file));
    assert!(offset_of!(Event, size) == offset_of!(C, size));
    assert!(offset_of!(Event, dev) == offset_of!(C, dev));
    assert!(offset_of!(Event, tgid) == offset_of!(C, tgid));
    assert!(offset_of!(Event, op) == offset_of!(C, op));
    assert!(offset_of!(Event, direct) == offset_of!(C, direct));
    assert!(offset_of!(Event, blkbits) == offset_of!(C, blkbits));
    assert!(offset_of!(Event, gen) == offset_of!(C, gen));
};

pub(crate) const OP_WRITE: u8 = 1;

impl Event {
    pub fn parse(data: &[u8]) -> Option<Event> {
        if data.len() < std::mem::size_of::<Event>() {
            return None;
        }
        // SAFETY: Event is plain old data and `data` holds at least one.
        Some(unsafe { std::ptr::read_unaligned(data.as_ptr().cast::<Event>()) })
    }
    pub(crate) fn is_write(&self) -> bool {
        self.op == OP_WRITE
    }
    pub(crate) fn is_direct(&self) -> bool {
        self.direct != 0
    }
    /// Device as "major:minor".
    pub fn dev_string(&self) -> String {
        let (ma, mi) = kernel_dev_parts(self.dev);
        format!("{ma}:{mi}")
    }
}

/// Which calls to record (all given filters must match).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only these processes (and their children, forked after the trace started).
    pub pids: Vec<u32>,
    /// Only processes whose name (comm, at most 15 bytes) is this.
    pub comm: Option<String>,
    /// Only processes in this cgroup v2 directory or below it.
    pub cgroup: Option<PathBuf>,
    /// Only files on the file system mounted here.
    pub mount: Option<PathBuf>,
}

/// When the trace ends: on Ctrl-C/SIGTERM always, and also after a duration, or when a
/// launched command exits.
pub struct Stop<'a> {
    pub signalled: &'a AtomicBool,
    pub duration: Option<Duration>,
    /// Called once everything is attached (before a command is launched).
    pub on_attached: &'a dyn Fn(),
}

#[derive(Debug, Clone, Default)]
pub struct TraceStats {
    pub duration: Duration,
    pub events: u64,
    /// Records lost because the ring buffer was full.
    pub dropped_ring: u64,
    /// Exit status of the launched command, if any.
    pub command_status: Option<ExitStatus>,
}

impl TraceStats {
    pub fn dropped(&self) -> u64 {
        self.dropped_ring
    }
}

const RING_BYTES: u64 = 16 << 20;
const POLL: Duration = Duration::from_millis(100);

/// Everything the kernel must offer, checked up front so the error names what is missing.
pub(crate) fn check_prerequisites() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("fragkit trace needs root (it loads eBPF programs: CAP_BPF and CAP_PERFMON); run it as root, e.g. with sudo");
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        bail!("kernel BTF is missing (/sys/kernel/btf/vmlinux): fragkit trace needs a kernel built with CONFIG_DEBUG_INFO_BTF");
    }
    Ok(())
}

struct CgroupTarget {
    id: u64,
    level: i32,
}

/// A cgroup v2 directory → (cgroup id = its inode number, depth below the cgroup2 root).
fn cgroup_target(path: &Path) -> Result<CgroupTarget> {
    let shown = path.display();
    let md = fs::metadata(path).map_err(|e| anyhow!("--cgroup {shown}: {e}"))?;
    let st = FsInfo::of_path(path).map_err(|e| anyhow!("--cgroup {shown}: {e}"))?;
    if !md.is_dir() || st.magic != CGROUP2_MAGIC {
        bail!("--cgroup {shown}: expected a directory on a cgroup2 file system (e.g. /sys/fs/cgroup/unified/NAME or /sys/fs/cgroup/NAME)");
    }
    let canon = fs::canonicalize(path)?;
    let mut root = canon.clone();
    // Walk up while the parent is still cgroup2: the top is the hierarchy's root (level 0).
    while let Some(parent) = root.parent() {
        match FsInfo::of_path(parent) {
            Ok(s) if s.magic == CGROUP2_MAGIC => root = parent.to_path_buf(),
            _ => break,
        }
    }
    let level = canon.strip_prefix(&root).map(|p| p.components().count())?;
    use std::os::unix::fs::MetadataExt;
    Ok(CgroupTarget {
        id: md.ino(),
        level: level as i32,
    })
}

/// The comm filter as the program compares it: the name NUL-padded to 16 bytes, and a mask
/// over the name and its terminating NUL, each as two native-endian words (task->comm as
/// the program loads it).
fn comm_words(name: &str) -> Result<([u64; 2], [u64; 2])> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() > 15 || b.contains(&0) {
        bail!("--comm '{name}': expected a process name of 1 to 15 bytes (the kernel keeps 15)");
    }
    let mut word = [0u8; 16];
    word[..b.len()].copy_from_slice(b);
    let mut mask = [0u8; 16];
    mask[..=b.len()].fill(0xff);
    let split = |a: [u8; 16]| {
        let lo = u64::from_ne_bytes(a[..8].try_into().expect("8 bytes"));
        let hi = u64::from_ne_bytes(a[8..].try_into().expect("8 bytes"));
        [lo, hi]
    };
    Ok((split(word), split(mask)))
}

/// Trace until `stop` says so (or `command`, if given, exits), handing each record to
/// `on_event`. The command is started after the programs are attached and traced from its
/// first instruction (it registers itself in the pid filter before exec).
pub fn trace(
    filter: &Filter,
    command: Option<&mut Command>,
    stop: &Stop<'_>,
    on_event: &mut dyn FnMut(&Event),
) -> Result<TraceStats> {
    check_prerequisites()?;
    let cgroup = filter.cgroup.as_deref().map(cgroup_target).transpose()?;
    let dev = match &filter.mount {
        Some(m) => {
            let md = fs::metadata(m).map_err(|e| anyhow!("--mount {}: {e}", m.display()))?;
            use std::os::unix::fs::MetadataExt;
            // The BPF side sees the superblock's s_dev. btrfs hands stat() a per-subvolume
            // device instead, so take the one mountinfo shows (which is s_dev).
            Some(super::resolve::superblock_dev(m).unwrap_or_else(|| kernel_dev(md.dev())))
        }
        None => None,
    };
    let comm = filter.comm.as_deref().map(comm_words).transpose()?;
    for &pid in &filter.pids {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            bail!("--pid {pid}: no such process");
        }
    }
    let by_tgid = !filter.pids.is_empty() || command.is_some();

    let mut object = MaybeUninit::uninit();
    let mut open = FileioSkelBuilder::default()
        .open(&mut object)
        .context("opening the eBPF object")?;
    {
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .ok_or_else(|| anyhow!("eBPF object has no .rodata"))?;
        ro.self_tgid = std::process::id();
        ro.filter_tgid = by_tgid;
        ro.follow_forks = by_tgid;
        if let Some((word, mask)) = comm {
            ro.filter_comm = true;
            ro.comm_word = word;
            ro.comm_mask = mask;
        }
        if let Some(cg) = &cgroup {
            ro.cgroup_id = cg.id;
            ro.cgroup_level = cg.level;
        }
        ro.filter_dev = dev.unwrap_or(0);
        // This architecture's syscall numbers: the program filters on them first.
        ro.nr_read = libc::SYS_read;
        ro.nr_write = libc::SYS_write;
        ro.nr_readv = libc::SYS_readv;
        ro.nr_writev = libc::SYS_writev;
        ro.nr_pread64 = libc::SYS_pread64;
        ro.nr_pwrite64 = libc::SYS_pwrite64;
        ro.nr_preadv = libc::SYS_preadv;
        ro.nr_pwritev = libc::SYS_pwritev;
        ro.nr_preadv2 = libc::SYS_preadv2;
        ro.nr_pwritev2 = libc::SYS_pwritev2;
        ro.wakeup_bytes = RING_BYTES / 8;
    }
    // The fork and exit hooks only matter when following a pid set.
    open.progs.on_fork.set_autoload(by_tgid);
    open.progs.on_process_exit.set_autoload(by_tgid);
    let mut skel = open.load().map_err(|e| {
        anyhow!("loading the eBPF programs failed: {e} (needs a kernel with CONFIG_BPF_SYSCALL, CONFIG_BPF_EVENTS and BTF)")
    })?;
    let tgids = TgidBits::of(&mut skel)?;
    for &pid in &filter.pids {
        tgids.insert(pid).map_err(|e| anyhow!("--pid {pid}: {e}"))?;
    }
    skel.attach()
        .map_err(|e| anyhow!("attaching to the raw sys_exit tracepoint failed: {e}"))?;

    let mut events = 0u64;
    let mut callback = |data: &[u8]| -> i32 {
        if let Some(e) = Event::parse(data) {
            events += 1;
            on_event(&e);
        }
        0
    };
    let mut rb = RingBufferBuilder::new();
    rb.add(&skel.maps.events, &mut callback)?;
    let ring = rb.build()?;

    (stop.on_attached)();
    let started = Instant::now();
    let mut child: Option<Child> = match command {
        Some(cmd) => Some(spawn_traced(cmd, tgids)?),
        None => None,
    };
    let mut status = None;
    loop {
        if let Err(e) = ring.poll(POLL) {
            if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                return Err(anyhow!("reading the ring buffer: {e}"));
            }
        }
        if stop.signalled.load(Ordering::Relaxed) {
            break;
        }
        if stop.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if let Some(c) = child.as_mut() {
            if let Some(s) = c.try_wait()? {
                status = Some(s);
                break;
            }
        }
    }
    let duration = started.elapsed();
    // Detach first so the final drain sees every record that will ever arrive.
    skel.links = Default::default();
    ring.consume()?;
    drop(ring);

    let mut dropped = 0u64;
    if let Some(per_cpu) = skel
        .maps
        .drops
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?
    {
        dropped = per_cpu
            .iter()
            .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("u64 value")))
            .sum();
    }
    Ok(TraceStats {
        duration,
        events,
        dropped_ring: dropped,
        command_status: status,
    })
}

/// The program's set of traced processes: `tgid_bits` in its .bss, which libbpf maps into
/// this process (shared, so a child forked from here writes to the same memory).
#[derive(Clone, Copy)]
struct TgidBits {
    words: *const AtomicU64,
    len: usize,
}

impl TgidBits {
    fn of(skel: &mut skel::FileioSkel<'_>) -> Result<TgidBits> {
        let bss = skel
            .maps
            .bss_data
            .as_deref_mut()
            .ok_or_else(|| anyhow!("eBPF object has no .bss"))?;
        Ok(TgidBits {
            words: bss.tgid_bits.as_mut_ptr().cast::<AtomicU64>(),
            len: bss.tgid_bits.len(),
        })
    }

    /// Adds `tgid` with an atomic OR (the fork hook may be setting bits of the same word).
    /// Only raw memory operations: safe between fork and exec.
    fn insert(self, tgid: u32) -> io::Result<()> {
        let word = tgid as usize / 64;
        if word >= self.len {
            // PID_MAX_LIMIT is 4M on 64-bit, the bitmap's size: cannot happen there.
            return Err(io::Error::from_raw_os_error(libc::ERANGE));
        }
        // SAFETY: `words` points to `len` u64s of the mmapped .bss, which lives as long as
        // the skeleton (the whole trace) and is only ever accessed atomically by user space.
        unsafe { (*self.words.add(word)).fetch_or(1 << (tgid % 64), Ordering::Relaxed) };
        Ok(())
    }
}

// SAFETY: TgidBits only does atomic operations on memory that outlives the trace.
unsafe impl Send for TgidBits {}
unsafe impl Sync for TgidBits {}

/// Start `cmd` so that its own pid is in the tgid filter before it runs a single instruction
/// of the program: the child adds itself to the set between fork and exec.
fn spawn_traced(cmd: &mut Command, tgids: TgidBits) -> Result<Child> {
    let shown = cmd.get_program().to_string_lossy().into_owned();
    // SAFETY: the hook only makes a raw syscall (getpid) and an atomic store to memory it
    // shares with the parent.
    unsafe {
        cmd.pre_exec(move || tgids.insert(libc::getpid() as u32));
    }
    cmd.spawn().map_err(|e| anyhow!("cannot run {shown}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::comm_words;

    fn bytes(w: [u64; 2]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn comm_words_mask_the_name_and_its_nul() {
        let (word, mask) = comm_words("dd").unwrap();
        assert_eq!(&bytes(word)[..4], b"dd\0\0");
        assert_eq!(bytes(mask), [[0xff; 3].as_slice(), &[0; 13]].concat());
        let (word, mask) = comm_words("abcdefghijklmno").unwrap();
        assert_eq!(bytes(word), b"abcdefghijklmno\0");
        assert_eq!(bytes(mask), [0xff; 16]);
        assert!(comm_words("abcdefghijklmnop").is_err());
        assert!(comm_words("").is_err());
    }
}
