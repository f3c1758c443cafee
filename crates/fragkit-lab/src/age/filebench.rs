//! filebench's fileserver personality (`workloads/fileserver.f`, filebench 1.5-alpha3,
//! commit 22620e6), written by fragkit (filebench is not in Debian). Its facts, each from
//! that file or the filebench source named:
//!
//! - Fileset `bigfileset`: `nfiles` 10000 entries, `meandirwidth` 20, file sizes
//!   `cvar-gamma` mean 131072, gamma 1.5 (shape 1.5, scale mean/1.5: cvars/cvar-gamma.c),
//!   drawn once per entry (fileset.c `fileset_populate_file`); `prealloc=80`: each entry
//!   exists at the start with probability 80% (fileset.c `fileset_create`).
//! - `nthreads` 50 threads, each looping over the 11 flowops: createfile1 (an entry that
//!   does not exist, O_CREAT) → wrtfile1 (writewholefile: the entry's size in `iosize` 1 MiB
//!   writes) → closefile1 → openfile1 (an existing entry) → appendfilerand1 (seek to the
//!   end, write a uniform random size in [0, `meanappendsize` − 1] = [0, 16383] bytes, none
//!   when 0: fb_random.c `fb_random64(&n, 16k, 1)`) → closefile2 → openfile2 → readfile1
//!   (readwholefile: 1 MiB reads to EOF) → closefile3 → deletefile1 (an existing entry,
//!   unlink) → statfile1 (an existing entry, stat). Buffered I/O, no fsync.
//! - Picking (fileset.c `fileset_pick`): not random but rotors: createfile takes the first
//!   non-existent entry at or after the last one created (wrapping), and openfile,
//!   deletefile and statfile share one rotor over the existing entries.
//!
//! What fragkit does differently, and why:
//! - filebench runs for `runtime` seconds (60); fragkit runs a fixed number of loops (all
//!   threads together), so a run's work is fixed.
//! - filebench's rotors advance in whatever order its threads get there. fragkit plans the
//!   whole run first, as one thread would run the loops one after another (seeded: the
//!   prealloc choice, the sizes, the append sizes; the rotors: the files), then deals loop
//!   k to thread k mod `threads`; an operation on a file waits until the plan's previous
//!   operation on that file is done. So which file each operation touches, every size and
//!   the final file set are the same every run with the same seed; the interleaving of the
//!   threads (and so where the file system places blocks) is not.
//! - Directories hold exactly `dir_width` files (filebench draws widths around the mean).

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rand::rngs::ChaCha8Rng;
use rand::RngExt;
use serde::Serialize;

use super::{seeded_buf, seeded_rng};

/// The 11 flowops of fileserver.f, in loop order, named as filebench names them.
pub const FLOWOPS: [&str; 11] = [
    "createfile1",
    "wrtfile1",
    "closefile1",
    "openfile1",
    "appendfilerand1",
    "closefile2",
    "openfile2",
    "readfile1",
    "closefile3",
    "deletefile1",
    "statfile1",
];

#[derive(Debug, Clone, Serialize)]
pub struct FilebenchSpec {
    /// Directory to create `bigfileset` in (not in the report: a run's parameters are
    /// what make two runs comparable, not where they ran).
    #[serde(skip)]
    pub dir: PathBuf,
    pub files: u64,
    pub dir_width: u64,
    /// Mean of the gamma-distributed file sizes (0 shape: every file exactly this size).
    pub mean_file_size: u64,
    /// Gamma shape (filebench's `gamma`); 0 gives fixed sizes.
    pub size_gamma: f64,
    /// Percent of the entries that exist at the start.
    pub prealloc_pct: u32,
    pub threads: usize,
    pub iosize: u64,
    /// appendfilerand's iosize: appends are uniform in [0, this − 1] bytes.
    pub append_max: u64,
    /// Loops of the 11 flowops, all threads together.
    pub loops: u64,
    pub seed: u64,
}

impl FilebenchSpec {
    /// fileserver.f's parameters in `dir`, one loop per file.
    pub fn fileserver(dir: PathBuf) -> FilebenchSpec {
        FilebenchSpec {
            dir,
            files: 10_000,
            dir_width: 20,
            mean_file_size: 128 << 10,
            size_gamma: 1.5,
            prealloc_pct: 80,
            threads: 50,
            iosize: 1 << 20,
            append_max: 16 << 10,
            loops: 10_000,
            seed: super::DEFAULT_SEED,
        }
    }
}

/// One flowop's totals over the run (filebench's per-flowop line).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowopStat {
    pub name: &'static str,
    pub ops: u64,
    pub bytes: u64,
    pub ops_per_s: f64,
    /// MB = 10^6 bytes.
    pub mb_per_s: f64,
    pub ms_per_op: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FilebenchReport {
    pub version: u32,
    pub personality: &'static str,
    /// The run's parameters, flattened into the report's top level.
    #[serde(flatten)]
    pub spec: FilebenchSpec,
    /// Files written before the timed run.
    pub preallocated: u64,
    pub created: u64,
    pub deleted: u64,
    /// Files found in `bigfileset` at the end (counted on disk).
    pub files_at_end: u64,
    /// Their bytes (on disk) and a fingerprint of the final (name, size) set: equal for
    /// equal seeds and parameters.
    pub bytes_at_end: u64,
    pub file_set_digest: String,
    pub fragments: u64,
    pub fragmented_files: u64,
    pub flowops: Vec<FlowopStat>,
    pub total_ops: u64,
    pub ops_per_s: f64,
    pub mb_per_s: f64,
    /// The timed loops, from the first thread's start to the last thread's end.
    pub run_seconds: f64,
    pub elapsed_seconds: f64,
}

/// One planned loop: the files its flowops touch and the sizes they move.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Loop {
    create: u64,
    create_size: u64,
    append: u64,
    append_size: u64,
    read: u64,
    read_size: u64,
    delete: u64,
    stat: u64,
}

/// The steps of a loop that touch a file, in order; each waits for the plan's previous
/// step on its file.
const STEPS: usize = 5;

struct Plan {
    /// Entry sizes (fse_size) and which entries exist at the start.
    entry_size: Vec<u64>,
    initial: Vec<u64>,
    loops: Vec<Loop>,
    /// Per loop and step, this step's place in its file's sequence of steps.
    tickets: Vec<[u32; STEPS]>,
    final_sizes: Vec<(u64, u64)>,
}

/// Gamma(shape, scale) by Marsaglia and Tsang (2000), with the shape < 1 boost.
fn gamma_sample(rng: &mut ChaCha8Rng, shape: f64, scale: f64) -> f64 {
    let unit =
        |rng: &mut ChaCha8Rng| -> f64 { (rng.random::<u64>() >> 11) as f64 / (1u64 << 53) as f64 };
    let (a, boost) = if shape < 1.0 {
        let u: f64 = unit(rng).max(f64::MIN_POSITIVE);
        (shape + 1.0, u.powf(1.0 / shape))
    } else {
        (shape, 1.0)
    };
    let d = a - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        // Standard normal by Box–Muller.
        let u1 = unit(rng).max(f64::MIN_POSITIVE);
        let u2 = unit(rng);
        let x = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = unit(rng).max(f64::MIN_POSITIVE);
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v * boost * scale;
        }
    }
}

/// The first entry of `set` at or after `rotor`, wrapping (fileset.c `fileset_find_entry`).
fn next_at(set: &BTreeSet<u64>, rotor: u64) -> Option<u64> {
    set.range(rotor..)
        .next()
        .or_else(|| set.iter().next())
        .copied()
}

fn plan(spec: &FilebenchSpec) -> Result<Plan> {
    let mut rng = seeded_rng(spec.seed);
    let entry_size: Vec<u64> = (0..spec.files)
        .map(|_| {
            if spec.size_gamma > 0.0 {
                let s = spec.mean_file_size as f64 / spec.size_gamma;
                gamma_sample(&mut rng, spec.size_gamma, s) as u64
            } else {
                spec.mean_file_size
            }
        })
        .collect();
    let mut exists = BTreeSet::new();
    let mut absent = BTreeSet::new();
    for i in 0..spec.files {
        if rng.random_range(0..100u32) < spec.prealloc_pct {
            exists.insert(i);
        } else {
            absent.insert(i);
        }
    }
    let initial: Vec<u64> = exists.iter().copied().collect();
    let mut size: Vec<u64> = entry_size.clone();
    let mut seq = vec![0u32; spec.files as usize];
    let mut ticket = |f: u64| {
        let t = seq[f as usize];
        seq[f as usize] += 1;
        t
    };
    let (mut ne_rotor, mut ex_rotor) = (0u64, 0u64);
    let mut loops = Vec::with_capacity(spec.loops as usize);
    let mut tickets = Vec::with_capacity(spec.loops as usize);
    for k in 0..spec.loops {
        let none = |what: &str| {
            anyhow::anyhow!(
                "age fileserver: loop {k}: no {what} file left for the fileset of {} files \
                 (filebench stops the run here); give more --files or another --prealloc",
                spec.files
            )
        };
        let create = next_at(&absent, ne_rotor).ok_or_else(|| none("non-existent"))?;
        ne_rotor = create + 1;
        absent.remove(&create);
        exists.insert(create);
        size[create as usize] = entry_size[create as usize];
        let pick = |exists: &BTreeSet<u64>, rotor: &mut u64| -> Result<u64> {
            let f = next_at(exists, *rotor).ok_or_else(|| none("existing"))?;
            *rotor = f + 1;
            Ok(f)
        };
        let append = pick(&exists, &mut ex_rotor)?;
        let append_size = rng.random_range(0..spec.append_max);
        size[append as usize] += append_size;
        let read = pick(&exists, &mut ex_rotor)?;
        let read_size = size[read as usize];
        let delete = pick(&exists, &mut ex_rotor)?;
        exists.remove(&delete);
        absent.insert(delete);
        let stat = pick(&exists, &mut ex_rotor)?;
        tickets.push([
            ticket(create),
            ticket(append),
            ticket(read),
            ticket(delete),
            ticket(stat),
        ]);
        loops.push(Loop {
            create,
            create_size: entry_size[create as usize],
            append,
            append_size,
            read,
            read_size,
            delete,
            stat,
        });
    }
    let final_sizes = exists.iter().map(|&f| (f, size[f as usize])).collect();
    Ok(Plan {
        entry_size,
        initial,
        loops,
        tickets,
        final_sizes,
    })
}

/// openfile / createfile: O_RDWR, as filebench opens a fileset that is neither readonly
/// nor writeonly (flowop_library.c `flowoplib_openfile_common`).
fn open_rw(p: &Path, create: bool) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(p)
        .with_context(|| format!("{}: cannot open", p.display()))
}

/// Steps done per file, how many threads wait for one, and whether a thread failed (its
/// later steps will never be done: the others must stop instead of waiting for them).
struct Order {
    done: Mutex<(Vec<u32>, usize, bool)>,
    cv: Condvar,
}

const STOPPED: &str = "stopped: another fileserver thread failed";

impl Order {
    fn wait(&self, f: u64, ticket: u32) -> Result<()> {
        let mut g = self.done.lock().expect("order lock");
        while g.0[f as usize] != ticket {
            if g.2 {
                bail!(STOPPED);
            }
            g.1 += 1;
            g = self.cv.wait(g).expect("order lock");
            g.1 -= 1;
        }
        Ok(())
    }
    fn finish(&self, f: u64) {
        let mut g = self.done.lock().expect("order lock");
        g.0[f as usize] += 1;
        if g.1 > 0 {
            self.cv.notify_all();
        }
    }
    fn fail(&self) {
        self.done.lock().expect("order lock").2 = true;
        self.cv.notify_all();
    }
}

/// Per-thread totals per flowop: ops, bytes, nanoseconds inside the call.
type Totals = [(u64, u64, u64); 11];

fn timed<T>(t: &mut Totals, op: usize, f: impl FnOnce() -> Result<(T, u64)>) -> Result<T> {
    let start = Instant::now();
    let (v, bytes) = f()?;
    let e = &mut t[op];
    e.0 += 1;
    e.1 += bytes;
    e.2 += start.elapsed().as_nanos() as u64;
    Ok(v)
}

/// writewholefile / fileset_alloc_file: `size` bytes in writes of at most `iosize`.
fn write_whole(fh: &mut File, p: &Path, size: u64, iosize: u64, data: &[u8]) -> Result<u64> {
    let mut left = size;
    while left > 0 {
        let n = left.min(iosize) as usize;
        fh.write_all(&data[..n])
            .with_context(|| format!("{}: write", p.display()))?;
        left -= n as u64;
    }
    Ok(size)
}

/// closefile: close(2) timed (std's File ignores close errors, as filebench does).
fn close(t: &mut Totals, op: usize, fh: File) {
    let start = Instant::now();
    drop(fh);
    let e = &mut t[op];
    e.0 += 1;
    e.2 += start.elapsed().as_nanos() as u64;
}

/// Thread `th`'s loops (th, th + threads, ...), each step after the plan's previous step
/// on its file.
fn run_loops(
    th: usize,
    spec: &FilebenchSpec,
    plan: &Plan,
    order: &Order,
    pb: &indicatif::ProgressBar,
    data: &[u8],
    root: &Path,
) -> Result<Totals> {
    let path = |f: u64| super::fileserver::file_path(root, f, spec.dir_width);
    let write_whole =
        |fh: &mut File, p: &Path, size: u64| write_whole(fh, p, size, spec.iosize, data);
    let mut t: Totals = [(0, 0, 0); 11];
    let mut rbuf = vec![0u8; spec.iosize as usize];
    let mut k = th;
    while k < plan.loops.len() {
        let l = plan.loops[k];
        let tk = plan.tickets[k];
        // createfile1, wrtfile1, closefile1
        order.wait(l.create, tk[0])?;
        let p = path(l.create);
        let mut fh = timed(&mut t, 0, || Ok((open_rw(&p, true)?, 0)))?;
        timed(&mut t, 1, || {
            Ok(((), write_whole(&mut fh, &p, l.create_size)?))
        })?;
        close(&mut t, 2, fh);
        order.finish(l.create);
        // openfile1, appendfilerand1, closefile2
        order.wait(l.append, tk[1])?;
        let p = path(l.append);
        let mut fh = timed(&mut t, 3, || Ok((open_rw(&p, false)?, 0)))?;
        timed(&mut t, 4, || {
            if l.append_size > 0 {
                fh.seek(SeekFrom::End(0))
                    .and_then(|_| fh.write_all(&data[..l.append_size as usize]))
                    .with_context(|| format!("{}: append", p.display()))?;
            }
            Ok(((), l.append_size))
        })?;
        close(&mut t, 5, fh);
        order.finish(l.append);
        // openfile2, readfile1, closefile3
        order.wait(l.read, tk[2])?;
        let p = path(l.read);
        let mut fh = timed(&mut t, 6, || Ok((open_rw(&p, false)?, 0)))?;
        let got = timed(&mut t, 7, || {
            let mut got = 0u64;
            loop {
                let n = fh
                    .read(&mut rbuf)
                    .with_context(|| format!("{}: read", p.display()))?;
                if n == 0 {
                    break;
                }
                got += n as u64;
            }
            Ok((got, got))
        })?;
        if got != l.read_size {
            bail!(
                "{}: read {got} bytes, the plan says the file holds {}",
                p.display(),
                l.read_size
            );
        }
        close(&mut t, 8, fh);
        order.finish(l.read);
        // deletefile1
        order.wait(l.delete, tk[3])?;
        let p = path(l.delete);
        timed(&mut t, 9, || {
            fs::remove_file(&p).with_context(|| format!("{}: cannot delete", p.display()))?;
            Ok(((), 0))
        })?;
        order.finish(l.delete);
        // statfile1
        order.wait(l.stat, tk[4])?;
        let p = path(l.stat);
        timed(&mut t, 10, || {
            fs::metadata(&p).with_context(|| format!("{}: cannot stat", p.display()))?;
            Ok(((), 0))
        })?;
        order.finish(l.stat);
        pb.inc(1);
        k += spec.threads;
    }
    Ok(t)
}

pub fn run(spec: &FilebenchSpec) -> Result<FilebenchReport> {
    let start = Instant::now();
    if spec.files == 0 || spec.threads == 0 || spec.dir_width == 0 || spec.loops == 0 {
        bail!("--files, --threads, --loops and the directory width must be at least 1");
    }
    if spec.prealloc_pct > 100 {
        bail!(
            "--prealloc {}: expected a percentage, 0 to 100",
            spec.prealloc_pct
        );
    }
    if spec.iosize == 0 || spec.append_max == 0 {
        bail!("--iosize and --append must be at least 1 byte");
    }
    if !(spec.size_gamma >= 0.0 && spec.size_gamma.is_finite()) {
        bail!(
            "--size-gamma {}: expected 0 (fixed sizes) or a positive shape",
            spec.size_gamma
        );
    }
    if !spec.dir.is_dir() {
        bail!(
            "{}: not a directory (expected the directory to create bigfileset in)",
            spec.dir.display()
        );
    }
    fragkit_core::limits::require_threads("--threads", spec.threads as u64)?;
    // The plan holds a few words per file; the files themselves must fit (their mean size
    // times their count, before preallocation and appends).
    fragkit_core::limits::require_memory(
        &format!("--files {}", spec.files),
        spec.files as u128 * 64,
    )?;
    fragkit_core::limits::require_room(
        &format!(
            "--files {} of mean size {}",
            spec.files, spec.mean_file_size
        ),
        &spec.dir,
        spec.files as u128 * spec.mean_file_size as u128,
        spec.files,
    )?;
    fragkit_core::limits::require_memory(
        &format!("--iosize {} / --append {}", spec.iosize, spec.append_max),
        spec.iosize.max(spec.append_max) as u128,
    )?;
    let plan = plan(spec)?;
    let root = super::fileserver::fresh_fileset(&spec.dir, spec.files, spec.dir_width)?;
    let biggest = plan.entry_size.iter().copied().max().unwrap_or(0);
    let buf = seeded_buf(
        biggest.min(spec.iosize).max(spec.append_max) as usize,
        spec.seed,
    );
    let data = buf.as_slice();
    let path = |f: u64| super::fileserver::file_path(&root, f, spec.dir_width);
    let pb = super::progress_bar(plan.initial.len() as u64 + spec.loops, "age fileserver");
    // Preallocation, one thread, as fileserver.f (no paralloc) does.
    for &f in &plan.initial {
        let p = path(f);
        let mut fh = File::create(&p).with_context(|| format!("{}: cannot create", p.display()))?;
        write_whole(&mut fh, &p, plan.entry_size[f as usize], spec.iosize, data)?;
        pb.inc(1);
    }
    fragkit_sys::sync::sync();

    let order = Order {
        done: Mutex::new((vec![0; spec.files as usize], 0, false)),
        cv: Condvar::new(),
    };
    let run_start = Instant::now();
    let per_thread: Vec<Totals> = std::thread::scope(|s| -> Result<Vec<Totals>> {
        let hs: Vec<_> = (0..spec.threads)
            .map(|th| {
                let (plan, order, pb, root) = (&plan, &order, &pb, &root);
                s.spawn(move || -> Result<Totals> {
                    let r = run_loops(th, spec, plan, order, pb, data, root);
                    if r.is_err() {
                        order.fail();
                    }
                    r
                })
            })
            .collect();
        let all: Vec<Result<Totals>> = hs
            .into_iter()
            .map(|h| h.join().expect("fileserver thread"))
            .collect();
        // The thread that failed first, not the ones it stopped.
        if let Some(i) = all
            .iter()
            .position(|r| matches!(r, Err(e) if e.to_string() != STOPPED))
            .or_else(|| all.iter().position(|r| r.is_err()))
        {
            return Err(all
                .into_iter()
                .nth(i)
                .expect("found")
                .expect_err("an error"));
        }
        Ok(all.into_iter().map(|r| r.expect("no error")).collect())
    })?;
    let run_seconds = run_start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    fragkit_sys::sync::sync();

    let mut sum: Totals = [(0, 0, 0); 11];
    for t in &per_thread {
        for (s, x) in sum.iter_mut().zip(t) {
            s.0 += x.0;
            s.1 += x.1;
            s.2 += x.2;
        }
    }
    let rate = |n: u64| {
        if run_seconds > 0.0 {
            n as f64 / run_seconds
        } else {
            0.0
        }
    };
    let flowops: Vec<FlowopStat> = FLOWOPS
        .iter()
        .zip(sum)
        .map(|(&name, (ops, bytes, ns))| FlowopStat {
            name,
            ops,
            bytes,
            ops_per_s: rate(ops),
            mb_per_s: rate(bytes) / 1e6,
            ms_per_op: if ops > 0 {
                ns as f64 / ops as f64 / 1e6
            } else {
                0.0
            },
        })
        .collect();
    let total_ops = flowops.iter().map(|f| f.ops).sum();
    let total_bytes: u64 = flowops.iter().map(|f| f.bytes).sum();

    // What is on disk now, counted independently of the plan.
    let mut on_disk = Vec::new();
    let (mut fragments, mut fragmented_files) = (0, 0);
    for d in fs::read_dir(&root).with_context(|| format!("{}: cannot list", root.display()))? {
        let d = d?.path();
        for e in fs::read_dir(&d).with_context(|| format!("{}: cannot list", d.display()))? {
            let e = e?;
            let c = super::check_file(&e.path())?;
            fragments += c.fragments;
            fragmented_files += u64::from(c.fragments > 1);
            on_disk.push((e.file_name().to_string_lossy().into_owned(), c.size));
        }
    }
    Ok(FilebenchReport {
        version: 1,
        personality: "fileserver.f",
        spec: spec.clone(),
        preallocated: plan.initial.len() as u64,
        created: sum[0].0,
        deleted: sum[9].0,
        files_at_end: on_disk.len() as u64,
        bytes_at_end: on_disk.iter().map(|f| f.1).sum(),
        file_set_digest: super::file_set_digest(&on_disk),
        fragments,
        fragmented_files,
        flowops,
        total_ops,
        ops_per_s: rate(total_ops),
        mb_per_s: rate(total_bytes) / 1e6,
        run_seconds,
        elapsed_seconds: start.elapsed().as_secs_f64(),
    })
    .and_then(|r| {
        // The plan's final set is what must be on disk.
        let planned: Vec<(String, u64)> = plan
            .final_sizes
            .iter()
            .map(|&(f, s)| (format!("{f:08}"), s))
            .collect();
        if super::file_set_digest(&planned) != r.file_set_digest {
            bail!(
                "age fileserver: the files on disk ({} files, {} bytes) differ from the plan's ({} files)",
                r.files_at_end,
                r.bytes_at_end,
                planned.len()
            );
        }
        Ok(r)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(files: u64, loops: u64) -> FilebenchSpec {
        FilebenchSpec {
            files,
            loops,
            threads: 4,
            ..FilebenchSpec::fileserver(PathBuf::from("/nonexistent"))
        }
    }

    #[test]
    fn plan_is_the_same_for_the_same_seed() {
        let a = plan(&spec(500, 800)).unwrap();
        let b = plan(&spec(500, 800)).unwrap();
        assert_eq!(a.loops, b.loops);
        assert_eq!(a.final_sizes, b.final_sizes);
        let c = plan(&FilebenchSpec {
            seed: 1,
            ..spec(500, 800)
        })
        .unwrap();
        assert_ne!(a.entry_size, c.entry_size);
    }

    #[test]
    fn every_loop_creates_one_and_deletes_one() {
        let p = plan(&spec(300, 1000)).unwrap();
        assert_eq!(p.final_sizes.len(), p.initial.len());
        for l in &p.loops {
            assert!(l.append_size < 16 << 10);
            assert_ne!(
                l.delete, l.stat,
                "a deleted file is not stat'ed in its loop"
            );
        }
    }

    #[test]
    fn sizes_follow_the_gamma_mean_and_prealloc() {
        let p = plan(&spec(20_000, 1)).unwrap();
        let mean = p.entry_size.iter().sum::<u64>() as f64 / 20_000.0;
        assert!((mean / 131072.0 - 1.0).abs() < 0.03, "mean {mean}");
        // Shape 1.5: the variance is shape × scale², so sd = mean / sqrt(1.5).
        let var = p
            .entry_size
            .iter()
            .map(|&s| (s as f64 - mean).powi(2))
            .sum::<f64>()
            / 20_000.0;
        let sd_ratio = var.sqrt() / (mean / 1.5f64.sqrt());
        assert!((sd_ratio - 1.0).abs() < 0.05, "sd ratio {sd_ratio}");
        let pre = p.initial.len() as f64 / 20_000.0;
        assert!((pre - 0.8).abs() < 0.02, "prealloc {pre}");
    }

    #[test]
    fn a_failed_thread_stops_the_waiting_ones() {
        let order = Order {
            done: Mutex::new((vec![0; 1], 0, false)),
            cv: Condvar::new(),
        };
        std::thread::scope(|s| {
            // Ticket 1 of file 0 waits for ticket 0, which a failed thread never finishes.
            let h = s.spawn(|| order.wait(0, 1));
            std::thread::sleep(std::time::Duration::from_millis(50));
            order.fail();
            let e = h.join().unwrap().unwrap_err().to_string();
            assert_eq!(e, STOPPED);
        });
        order.finish(0);
        assert!(order.wait(0, 1).is_ok());
    }

    #[test]
    fn a_full_fileset_is_a_clear_error() {
        let e = plan(&FilebenchSpec {
            prealloc_pct: 100,
            ..spec(10, 1)
        })
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("no non-existent file left"), "{e}");
    }
}
