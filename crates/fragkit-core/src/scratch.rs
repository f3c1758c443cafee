//! Scratch file systems: an image file on a loop device, formatted and mounted.
//!
//! This is what the tests and `fragkit lab` fragment and measure, so that nothing of the
//! user's is ever touched. Every scratch file system has a marker file beside its mount
//! point, and a random id that fragkit wrote both into the marker and into the file
//! system's UUID. `destroy` (and everything that trusts a scratch file system) checks the
//! marker against the machine — the image inside the scratch directory, the image the
//! backing file of the loop device mounted there, the UUID on that device equal to the
//! marker's id — so a hand-written marker cannot make fragkit delete or unmount anything.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use fragkit_sys::freeze::Frozen;
use fragkit_sys::mountinfo;

const MARKER: &str = "fragkit-scratch.json";

/// The file systems fragkit builds scratch images of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsType {
    Ext4,
    Xfs,
    Btrfs,
    F2fs,
}

impl FsType {
    pub const ALL: [FsType; 4] = [FsType::Ext4, FsType::Xfs, FsType::Btrfs, FsType::F2fs];

    /// The file system named `name` ("ext4", ...), as a scratch marker records it.
    pub fn from_name(name: &str) -> Option<FsType> {
        FsType::ALL.into_iter().find(|f| f.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            FsType::Ext4 => "ext4",
            FsType::Xfs => "xfs",
            FsType::Btrfs => "btrfs",
            FsType::F2fs => "f2fs",
        }
    }

    fn mkfs(self) -> (&'static str, &'static [&'static str]) {
        match self {
            // nodiscard: discarding a fresh sparse image is pointless and slow.
            // Inode tables and journal initialised now: lazy init would keep writing in the
            // background after mount and pollute every device counter fragkit reads.
            FsType::Ext4 => (
                "mkfs.ext4",
                &[
                    "-F",
                    "-q",
                    "-b",
                    "4096",
                    "-E",
                    "nodiscard,lazy_itable_init=0,lazy_journal_init=0",
                ],
            ),
            FsType::Xfs => ("mkfs.xfs", &["-f", "-q", "-K"]),
            FsType::Btrfs => ("mkfs.btrfs", &["-f", "-q", "--nodiscard"]),
            FsType::F2fs => ("mkfs.f2fs", &["-f", "-q", "-t", "0"]),
        }
    }

    /// mkfs arguments that set the file system's UUID (fragkit's identity of the image).
    fn uuid_args(self, uuid: &str) -> Vec<String> {
        match self {
            FsType::Xfs => vec!["-m".into(), format!("uuid={uuid}")],
            FsType::Ext4 | FsType::Btrfs | FsType::F2fs => vec!["-U".into(), uuid.into()],
        }
    }

    /// The mkfs command scratch file systems are made with, as text for reports.
    pub fn mkfs_command(self) -> String {
        let (program, args) = self.mkfs();
        std::iter::once(program)
            .chain(args.iter().copied())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Smallest image mkfs accepts here (xfsprogs refuses < 300 MiB).
    fn min_size(self) -> u64 {
        match self {
            FsType::Ext4 => 16 << 20,
            FsType::Xfs => 300 << 20,
            FsType::Btrfs => 128 << 20,
            FsType::F2fs => 64 << 20,
        }
    }
}

/// How to make a scratch file system.
#[derive(Debug, Clone)]
pub struct ScratchSpec {
    pub fs: FsType,
    pub size: u64,
    /// Where to keep the image and mount point; a fresh temporary directory if None.
    pub dir: Option<PathBuf>,
    /// With `dir` None: make the fresh temporary directory here instead of in $TMPDIR
    /// (e.g. /dev/shm, so the image lives in RAM).
    pub parent: Option<PathBuf>,
    pub mkfs_args: Vec<String>,
    pub mount_options: Option<String>,
    /// ext4 only: put the journal on a second loop device of this many bytes
    /// (`mkfs.ext4 -O journal_dev`, then `-J device=`), as FAST'24's `setdevice.sh` did,
    /// so the data device sees no journal writes.
    pub external_journal: Option<u64>,
}

impl ScratchSpec {
    pub fn new(fs: FsType, size: u64) -> ScratchSpec {
        ScratchSpec {
            fs,
            size,
            dir: None,
            parent: None,
            mkfs_args: Vec::new(),
            mount_options: None,
            external_journal: None,
        }
    }
}

/// What the marker records, and what `scratch create --format json` prints.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ScratchInfo {
    pub version: u32,
    pub fs: String,
    pub size: u64,
    pub dir: PathBuf,
    pub image: PathBuf,
    pub loop_device: PathBuf,
    pub mountpoint: PathBuf,
    /// fragkit made `dir` itself and removes it on destroy.
    pub created_dir: bool,
    /// Random UUID fragkit gave the file system at mkfs (a clone shares its source's).
    #[serde(default)]
    pub id: String,
    /// The external journal's image (ext4 `-J device=`), beside `image`; its loop
    /// device is detached and the image deleted with the scratch file system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_image: Option<PathBuf>,
    /// The mount options it was created with (`--mount-options`); a clone is mounted
    /// with them too, so it allocates as its source does (e.g. ext4 `nodelalloc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_options: Option<String>,
}

/// A mounted scratch file system; unmounted, detached and deleted when dropped
/// (unless [`Scratch::keep`] was called).
#[derive(Debug)]
pub struct Scratch {
    pub info: ScratchInfo,
    keep: bool,
}

pub fn require_root(what: &str) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("{what} needs root (loop devices, mkfs and mount); run it as root, e.g. with sudo");
    }
    Ok(())
}

fn run(cmd: &mut Command) -> Result<String> {
    let shown = format!("{cmd:?}").replace('"', "");
    let out = cmd.output().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            anyhow!(
                "{}: not installed (run scripts/install-deps)",
                cmd.get_program().to_string_lossy()
            )
        } else {
            anyhow!("{shown}: {e}")
        }
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!("{shown} failed: {}", err.trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn kernel_has(fs: &str) -> bool {
    let listed = |t: &str| t.lines().any(|l| l.split_whitespace().last() == Some(fs));
    if fs::read_to_string("/proc/filesystems").is_ok_and(|t| listed(&t)) {
        return true;
    }
    // A module may just not be loaded yet.
    let _ = Command::new("modprobe").arg("-q").arg(fs).status();
    fs::read_to_string("/proc/filesystems").is_ok_and(|t| listed(&t))
}

impl Scratch {
    pub fn create(spec: &ScratchSpec) -> Result<Scratch> {
        require_root("creating a scratch file system")?;
        let fs = spec.fs;
        if spec.size < fs.min_size() {
            bail!(
                "--size {}: too small for {} (at least {} MiB)",
                spec.size,
                fs.name(),
                fs.min_size() >> 20
            );
        }
        if !kernel_has(fs.name()) {
            bail!(
                "{} is not available in this kernel (not in /proc/filesystems); for f2fs use scripts/f2fs-guest",
                fs.name()
            );
        }
        // off_t is signed: no file on Linux is larger than i64::MAX bytes.
        if spec.size > i64::MAX as u64 {
            bail!(
                "--size {}: larger than any file Linux can hold (8 EiB); expected a size the image's file system can store",
                spec.size
            );
        }
        let mut guard = Scratch::begin(
            fs,
            spec.size,
            spec.dir.as_deref(),
            spec.parent.as_deref(),
            random_uuid()?,
            spec.mount_options.clone(),
        )?;
        let f = fs::File::create(&guard.info.image)
            .with_context(|| format!("{}", guard.info.image.display()))?;
        f.set_len(spec.size).with_context(|| {
            format!(
                "{}: cannot make an image of {} bytes",
                guard.info.image.display(),
                spec.size
            )
        })?;
        drop(f);
        guard.attach_loop()?;
        let journal = match spec.external_journal {
            Some(bytes) => Some(guard.make_journal_device(fs, bytes)?),
            None => None,
        };
        let info = guard.info.clone();
        let (mkfs, args) = fs.mkfs();
        let mut mkfs_cmd = Command::new(mkfs);
        mkfs_cmd
            .args(args)
            .args(fs.uuid_args(&info.id))
            .args(&spec.mkfs_args);
        if let Some(j) = &journal {
            mkfs_cmd.arg("-J").arg(format!("device={}", j.display()));
        }
        run(mkfs_cmd.arg(&info.loop_device))?;
        let written = device_uuid(&info.loop_device)?;
        if written != info.id {
            bail!(
                "{}: mkfs left UUID {written}, not fragkit's {} (do not pass a UUID in --mkfs-args)",
                info.loop_device.display(),
                info.id
            );
        }
        if fs == FsType::Xfs {
            enable_xfs_exchange_range(&info.loop_device)?;
        }
        fs::create_dir_all(&info.mountpoint)?;
        mount_fs(
            &info.loop_device,
            &info.mountpoint,
            fs,
            spec.mount_options.as_deref(),
        )?;
        Ok(guard)
    }

    /// A block-for-block copy of this scratch file system, mounted beside it: same
    /// files at the same physical offsets, so two defragmenters can start from the very
    /// same layout. The source is frozen (FIFREEZE: everything flushed, no writes) while
    /// its image is copied, and thawed afterwards.
    pub fn clone_to(&self, dir: Option<PathBuf>) -> Result<Scratch> {
        require_root("cloning a scratch file system")?;
        let fs = FsType::from_name(&self.info.fs)
            .ok_or_else(|| anyhow!("{}: unknown file system in marker", self.info.fs))?;
        // The copy's superblock would name the source's journal device.
        if self.info.journal_image.is_some() {
            bail!(
                "{}: has an external journal; cloning copies one image, so the copy would share the source's journal",
                self.info.mountpoint.display()
            );
        }
        // The copy carries the source's UUID, so it carries the same id.
        let mut guard = Scratch::begin(
            fs,
            self.info.size,
            dir.as_deref(),
            None,
            self.info.id.clone(),
            self.info.mount_options.clone(),
        )?;
        {
            let _frozen = Frozen::freeze(&self.info.mountpoint)
                .map_err(|e| anyhow!("{}: cannot freeze: {e}", self.info.mountpoint.display()))?;
            // --sparse=always: only the blocks the file system wrote are copied.
            run(Command::new("cp")
                .args(["--sparse=always", "--reflink=auto"])
                .arg(&self.info.image)
                .arg(&guard.info.image))?;
        }
        guard.attach_loop()?;
        let info = guard.info.clone();
        fs::create_dir_all(&info.mountpoint)?;
        // The copy has the source's UUID: xfs refuses a second mount of it unless told
        // (btrfs gives a cloned single-device fs a temporary fsid by itself since 6.7).
        let options = clone_mount_options(fs, self.info.mount_options.as_deref());
        mount_fs(&info.loop_device, &info.mountpoint, fs, options.as_deref())?;
        Ok(guard)
    }

    /// A new scratch directory with its marker; the returned guard undoes everything
    /// done from here on if a later step fails.
    fn begin(
        fs: FsType,
        size: u64,
        dir: Option<&Path>,
        parent: Option<&Path>,
        id: String,
        mount_options: Option<String>,
    ) -> Result<Scratch> {
        let (dir, created_dir) = new_scratch_dir(dir, parent)?;
        let info = ScratchInfo {
            version: 2,
            id,
            fs: fs.name().to_string(),
            size,
            image: dir.join(format!("{}.img", fs.name())),
            loop_device: PathBuf::new(),
            mountpoint: dir.join("mnt"),
            dir,
            created_dir,
            journal_image: None,
            mount_options,
        };
        let guard = Scratch { info, keep: false };
        write_marker(&guard.info)?;
        Ok(guard)
    }

    /// Attach the image to a free loop device and record it in the marker.
    fn attach_loop(&mut self) -> Result<()> {
        let dev = run(Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&self.info.image))?;
        self.info.loop_device = PathBuf::from(dev);
        write_marker(&self.info)?;
        let name = self
            .info
            .loop_device
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        fragkit_sys::tunable::reset_max_request(&name).with_context(|| {
            format!(
                "{}: cannot reset max_sectors_kb to the kernel's default",
                self.info.loop_device.display()
            )
        })
    }

    /// An ext4 external journal device of `bytes` on its own image and loop device
    /// (recorded in the marker first, so teardown finds it whatever fails next).
    fn make_journal_device(&mut self, fs: FsType, bytes: u64) -> Result<PathBuf> {
        if fs != FsType::Ext4 {
            bail!(
                "an external journal is an ext4 feature, not {}'s",
                fs.name()
            );
        }
        // mke2fs refuses a journal device under 1024 blocks.
        if bytes < 4 << 20 {
            bail!("external journal of {bytes} bytes: expected at least 4 MiB");
        }
        let image = self.info.dir.join("journal.img");
        self.info.journal_image = Some(image.clone());
        write_marker(&self.info)?;
        let f = fs::File::create(&image).with_context(|| format!("{}", image.display()))?;
        f.set_len(bytes)
            .with_context(|| format!("{}: cannot make {bytes} bytes", image.display()))?;
        drop(f);
        let dev = PathBuf::from(run(Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&image))?);
        run(Command::new("mkfs.ext4")
            .args(["-F", "-q", "-O", "journal_dev", "-b", "4096"])
            .arg(&dev))?;
        Ok(dev)
    }

    pub fn mountpoint(&self) -> &Path {
        &self.info.mountpoint
    }

    /// Name of the loop device under /sys/block ("loop3").
    pub fn device_name(&self) -> String {
        self.info
            .loop_device
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Leave the file system mounted after this value is dropped (`scratch create`).
    pub fn keep(mut self) -> ScratchInfo {
        self.keep = true;
        self.info.clone()
    }

    /// Unmount, detach, delete. Idempotent.
    pub fn destroy(mut self) -> Result<()> {
        self.keep = true;
        teardown(&self.info)
    }

    /// Find the scratch file system mounted at `mountpoint` (made by fragkit), refusing
    /// anything else: the marker must agree with the mount table, the loop device and the
    /// UUID on that device (see the module comment). Errors are one line.
    pub fn open_existing(mountpoint: &Path) -> Result<Scratch> {
        let shown = mountpoint.display();
        let mp = mountpoint
            .canonicalize()
            .with_context(|| format!("{shown}: no such mount point"))?;
        let dir = mp
            .parent()
            .ok_or_else(|| anyhow!("{shown}: not a fragkit scratch mount point"))?;
        let text = fs::read_to_string(dir.join(MARKER)).map_err(|_| {
            anyhow!("{shown}: not a fragkit scratch file system (no {MARKER} beside it); refusing to touch it")
        })?;
        let info: ScratchInfo = serde_json::from_str(&text).map_err(|e| {
            anyhow!(
                "{}: unreadable marker ({e}); refusing to touch {shown}",
                dir.join(MARKER).display()
            )
        })?;
        verify(&info, &mp, dir).map_err(|e| anyhow!("{shown}: {e}; refusing to touch it"))?;
        Ok(Scratch { info, keep: true })
    }
}

/// Check a marker found in `dir` beside the mount point `mp` (both canonical) against
/// what the kernel says; Err is the first disagreement.
fn verify(info: &ScratchInfo, mp: &Path, dir: &Path) -> std::result::Result<(), String> {
    if info.mountpoint != mp || info.dir != dir {
        return Err(format!(
            "the marker names {} in {}, not this mount point",
            info.mountpoint.display(),
            info.dir.display()
        ));
    }
    // The image is a plain name directly inside the scratch directory.
    let name_ok = info
        .image
        .file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(".img"));
    if info.image.parent() != Some(dir) || !name_ok {
        return Err(format!(
            "the marker's image {} is not an .img file inside {}",
            info.image.display(),
            dir.display()
        ));
    }
    if !journal_image_ok(info) {
        return Err(format!(
            "the marker's journal image is not journal.img inside {}",
            dir.display()
        ));
    }
    let Some((source, fstype)) = mount_source(mp) else {
        return Err("nothing is mounted there".into());
    };
    if source != info.loop_device || !source.to_string_lossy().starts_with("/dev/loop") {
        return Err(format!(
            "{} is mounted there, not the marker's loop device {}",
            source.display(),
            info.loop_device.display()
        ));
    }
    if fstype != info.fs {
        return Err(format!("{fstype} is mounted there, not {}", info.fs));
    }
    match loop_backing_file(&info.loop_device) {
        Some(b) if b == info.image => {}
        Some(b) => {
            return Err(format!(
                "{} is backed by {}, not the marker's image {}",
                info.loop_device.display(),
                b.display(),
                info.image.display()
            ))
        }
        None => {
            return Err(format!(
                "{} has no backing file",
                info.loop_device.display()
            ))
        }
    }
    if info.id.is_empty() {
        return Err("the marker has no id (made by an older fragkit?)".into());
    }
    match device_uuid(&info.loop_device) {
        Ok(u) if u == info.id => Ok(()),
        Ok(u) => Err(format!(
            "the file system's UUID {u} is not the marker's id {}",
            info.id
        )),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// Source device and type of what is mounted at `mp` (the last mount there wins).
fn mount_source(mp: &Path) -> Option<(PathBuf, String)> {
    let mounts = mountinfo::read().ok()?;
    mounts
        .iter()
        .rev()
        .find(|m| m.mountpoint == mp)
        .map(|m| (PathBuf::from(&m.source), m.fstype.clone()))
}

/// The UUID in the superblock on `dev`, read by blkid's low-level probe (no cache).
fn device_uuid(dev: &Path) -> Result<String> {
    run(Command::new("blkid")
        .args(["-p", "-s", "UUID", "-o", "value"])
        .arg(dev))
}

/// A random (version 4) UUID from the kernel's generator.
fn random_uuid() -> Result<String> {
    let text = fs::read_to_string("/proc/sys/kernel/random/uuid")
        .context("/proc/sys/kernel/random/uuid: cannot read")?;
    Ok(text.trim().to_string())
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.keep {
            if let Err(e) = teardown(&self.info) {
                fragkit_sys::stderr_line!("fragkit: scratch teardown: {e:#}");
            }
        }
    }
}

/// XFS_SB_FEAT_INCOMPAT_EXCHRANGE (fs/xfs/libxfs/xfs_format.h): atomic file-range
/// exchange, which `fragkit defrag` needs on xfs. xfsprogs >= 6.10 sets it with
/// `mkfs.xfs -i exchange=1`; Debian 12's xfsprogs 6.1 cannot, so scratch file systems get
/// the bit written into the (fresh, unmounted) superblock with xfs_db, as an upgrade
/// would. Kernels since 6.10 accept it. Only ever done to an image fragkit just made.
const XFS_SB_FEAT_INCOMPAT_EXCHRANGE: u64 = 1 << 6;

fn enable_xfs_exchange_range(dev: &Path) -> Result<()> {
    let out = run(Command::new("xfs_db")
        .args(["-r", "-c", "sb 0", "-c", "p features_incompat"])
        .arg(dev))?;
    let value = out
        .rsplit('=')
        .next()
        .map(str::trim)
        .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .ok_or_else(|| anyhow!("xfs_db: cannot read features_incompat from {out:?}"))?;
    if value & XFS_SB_FEAT_INCOMPAT_EXCHRANGE == 0 {
        let new = format!("{:#x}", value | XFS_SB_FEAT_INCOMPAT_EXCHRANGE);
        // -d: xfsprogs 6.1's verifier does not know the bit; the CRC is still recomputed.
        run(Command::new("xfs_db")
            .args([
                "-x",
                "-c",
                "sb 0",
                "-c",
                &format!("write -d features_incompat {new}"),
            ])
            .arg(dev))?;
    }
    Ok(())
}

/// The directory a new scratch file system lives in, and whether fragkit made it.
fn new_scratch_dir(dir: Option<&Path>, parent: Option<&Path>) -> Result<(PathBuf, bool)> {
    match dir {
        Some(d) => {
            // A --dir fragkit makes is fragkit's to remove again (on failure and destroy).
            let existed = d.exists();
            fs::create_dir_all(d).with_context(|| format!("{}: cannot create", d.display()))?;
            if d.join(MARKER).exists() {
                bail!("{}: already holds a scratch file system", d.display());
            }
            Ok((d.canonicalize()?, !existed))
        }
        None => {
            let mut b = tempfile::Builder::new();
            b.prefix("fragkit-scratch-");
            let d = match parent {
                Some(p) => b.tempdir_in(p).with_context(|| {
                    format!("cannot create a temporary directory in {}", p.display())
                })?,
                None => b.tempdir().context("cannot create a temporary directory")?,
            };
            Ok((d.keep().canonicalize()?, true))
        }
    }
}

/// A clone's mount options: its source's, and `nouuid` on xfs (the copy has the same UUID).
fn clone_mount_options(fs: FsType, source: Option<&str>) -> Option<String> {
    let mut all: Vec<&str> = source
        .into_iter()
        .flat_map(|o| o.split(','))
        .filter(|o| !o.is_empty())
        .collect();
    if fs == FsType::Xfs && !all.contains(&"nouuid") {
        all.push("nouuid");
    }
    (!all.is_empty()).then(|| all.join(","))
}

fn mount_fs(dev: &Path, mountpoint: &Path, fs: FsType, options: Option<&str>) -> Result<()> {
    nix::mount::mount(
        Some(dev),
        mountpoint,
        Some(fs.name()),
        nix::mount::MsFlags::empty(),
        options,
    )
    .map_err(|e| {
        anyhow!(
            "mount {} on {} ({}{}) failed: {e}",
            dev.display(),
            mountpoint.display(),
            fs.name(),
            options.map(|o| format!(", -o {o}")).unwrap_or_default()
        )
    })
}

fn write_marker(info: &ScratchInfo) -> Result<()> {
    let path = info.dir.join(MARKER);
    fs::write(&path, serde_json::to_string_pretty(info)? + "\n")
        .with_context(|| format!("{}: cannot write marker", path.display()))
}

/// The file behind a loop device, from sysfs (None if detached).
pub(crate) fn loop_backing_file(dev: &Path) -> Option<PathBuf> {
    let name = dev.file_name()?.to_string_lossy().into_owned();
    let text = fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    Some(PathBuf::from(text.trim_end_matches('\n')))
}

fn teardown(info: &ScratchInfo) -> Result<()> {
    let mut problems = Vec::new();
    if mountinfo::is_mount_point(&info.mountpoint) {
        // A busy mount (a shell cd'ed into it) gets a few tries before a lazy detach.
        let mut done = false;
        for _ in 0..20 {
            if nix::mount::umount2(&info.mountpoint, nix::mount::MntFlags::empty()).is_ok() {
                done = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        if !done {
            if let Err(e) = nix::mount::umount2(&info.mountpoint, nix::mount::MntFlags::MNT_DETACH)
            {
                problems.push(format!("umount {}: {e}", info.mountpoint.display()));
            }
        }
    }
    // Every loop device over the image, not only the marker's: a run ended between
    // attaching the device and recording it leaves one the marker does not name.
    for image in std::iter::once(&info.image).chain(&info.journal_image) {
        for dev in loops_backed_by(image) {
            if let Err(e) = run(Command::new("losetup").arg("-d").arg(&dev)) {
                problems.push(e.to_string());
            }
        }
        let _ = fs::remove_file(image);
    }
    let _ = fs::remove_dir(&info.mountpoint);
    let _ = fs::remove_file(info.dir.join(MARKER));
    if info.created_dir {
        let _ = fs::remove_dir(&info.dir);
    }
    if problems.is_empty() {
        Ok(())
    } else {
        bail!("{}", problems.join("; "))
    }
}

/// An external journal's image, when the marker names one, is `journal.img` in the
/// scratch directory (teardown deletes it: never a path the marker could point elsewhere).
fn journal_image_ok(info: &ScratchInfo) -> bool {
    info.journal_image
        .as_ref()
        .is_none_or(|j| *j == info.dir.join("journal.img"))
}

/// The loop devices whose backing file is `image`.
fn loops_backed_by(image: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let dev = PathBuf::from(format!("/dev/{name}"));
            (name.starts_with("loop") && loop_backing_file(&dev).as_deref() == Some(image))
                .then_some(dev)
        })
        .collect()
}

/// Watch over the scratch file system whose marker lies in `dir` on behalf of process
/// `owner`, from a process of its own: return false once the marker is gone (the owner tore
/// it down), or, once the owner stopped running with it still there (SIGKILL, a launcher's
/// abort, a crash), wait `grace` for the processes that used it to end too, tear it down
/// and return true. What a signal handler cannot do after SIGKILL, this does.
pub fn guard(dir: &Path, owner: u32, grace: std::time::Duration) -> Result<bool> {
    let marker = dir.join(MARKER);
    loop {
        if !marker.exists() {
            return Ok(false);
        }
        if !fragkit_sys::process::running(owner) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    std::thread::sleep(grace);
    Ok(sweep(dir)? > 0)
}

/// Tear down every scratch file system whose marker lies in `dir` or in a directory
/// right under it, mounted or not: what a run stopped while it was making or using one
/// leaves behind (the marker is written before the image, the loop device and the
/// mount). A marker that does not describe the directory it lies in is left alone.
/// Returns how many were torn down.
pub fn sweep(dir: &Path) -> Result<usize> {
    let mut dirs = vec![dir.to_path_buf()];
    if let Ok(entries) = fs::read_dir(dir) {
        dirs.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
    }
    let mut torn = 0;
    let mut problems = Vec::new();
    for d in dirs {
        let Ok(text) = fs::read_to_string(d.join(MARKER)) else {
            continue;
        };
        let Ok(info) = serde_json::from_str::<ScratchInfo>(&text) else {
            continue;
        };
        let same = |a: &Path, b: &Path| a.canonicalize().ok() == b.canonicalize().ok();
        if !same(&info.dir, &d)
            || info.image.parent() != Some(info.dir.as_path())
            || !journal_image_ok(&info)
        {
            continue;
        }
        match teardown(&info) {
            Ok(()) => torn += 1,
            Err(e) => problems.push(format!("{}: {e:#}", d.display())),
        }
    }
    if problems.is_empty() {
        Ok(torn)
    } else {
        bail!("{}", problems.join("; "))
    }
}

/// Scratch file systems made by fragkit that are mounted now.
pub fn list_mounted() -> Vec<ScratchInfo> {
    let Ok(mounts) = mountinfo::read() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for m in mounts {
        if m.mountpoint.file_name().is_some_and(|n| n == "mnt") {
            if let Ok(s) = Scratch::open_existing(&m.mountpoint) {
                out.push(s.info.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_mounts_with_its_sources_options() {
        assert_eq!(
            clone_mount_options(FsType::Ext4, Some("nodelalloc")),
            Some("nodelalloc".into())
        );
        assert_eq!(clone_mount_options(FsType::Ext4, None), None);
        assert_eq!(
            clone_mount_options(FsType::Xfs, Some("noatime,")),
            Some("noatime,nouuid".into())
        );
        assert_eq!(
            clone_mount_options(FsType::Xfs, Some("nouuid")),
            Some("nouuid".into())
        );
        assert_eq!(
            clone_mount_options(FsType::Xfs, None),
            Some("nouuid".into())
        );
    }
}
