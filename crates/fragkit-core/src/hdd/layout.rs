//! A file's reads or writes on the modeled disk when no recording exists: the device
//! requests come from the file's layout (FIEMAP), each application request split where
//! the file's extents end (one device request per physically contiguous piece, as the
//! block layer must), at the same request size and queue depth. Device address = the
//! extent's physical address (on the modeled disk: plus the preset's `@offset`).
//!
//! The write side models the writes of a file whose blocks are where FIEMAP shows them
//! now: the same pieces as the reads, written. It does not model the allocator (where the
//! file system would put the blocks) nor metadata and journal writes.

use super::model::{Hdd, Report};
use super::params::{ParamError, Params};
use crate::ssd::trace::{Op, Request};
use fragkit_sys::fiemap::Extent;

/// How the modeled device requests were derived, as reports name it.
pub const MAPPING: &str = "fiemap-physical-address";

/// One physically contiguous device request: (byte address, bytes).
type Piece = (u64, u64);

/// The device writes one application write of `len` bytes at file offset `off` becomes:
/// one per physically contiguous piece of located extents (unwritten extents included:
/// a write fills them). `extents` sorted by logical offset.
pub fn write_pieces(extents: &[Extent], off: u64, len: u64) -> Vec<Piece> {
    let end = off.saturating_add(len);
    let mut out: Vec<Piece> = Vec::new();
    let first = extents.partition_point(|e| e.logical_end() <= off);
    for e in extents[first..].iter().take_while(|e| e.logical < end) {
        if !e.is_located() {
            continue;
        }
        let s = off.max(e.logical);
        let t = end.min(e.logical_end());
        if s >= t {
            continue;
        }
        let phys = e.physical.saturating_add(s - e.logical);
        match out.last_mut() {
            Some((p, n)) if p.saturating_add(*n) == phys => *n += t - s,
            _ => out.push((phys, t - s)),
        }
    }
    out
}

/// The synthetic trace: application request k's pieces issued together at 2k,
/// `queue_depth` application requests in flight (request k is issued after request
/// k − qd completed, 1 ns of host time later).
pub fn trace(per_request: &[Vec<Piece>], queue_depth: u32, op: Op) -> Vec<Request> {
    let qd = queue_depth.max(1) as u64;
    let mut out = Vec::with_capacity(per_request.iter().map(Vec::len).sum());
    for (k, ps) in per_request.iter().enumerate() {
        let k = k as u64;
        for &(addr, bytes) in ps {
            out.push(Request {
                issue_ns: 2 * k,
                complete_ns: 2 * (k + qd) - 1,
                sector: addr / 512,
                bytes,
                op,
                inode: None,
                offset: None,
            });
        }
    }
    out
}

/// The modeled disk's figures for one read or write job.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModeledIo {
    /// Preset the disk was modeled with (`hdd`, `hdd@OFFSET`).
    pub model: String,
    /// How the requests were derived (see [`MAPPING`]).
    pub mapping: String,
    /// "read" or "write".
    pub op: String,
    /// Device requests after splitting at extent ends.
    pub device_requests: u64,
    pub bytes: u64,
    /// Modeled time with a request in flight, and bytes over it (MB = 10^6 bytes).
    pub time_ns: u64,
    pub mb_s: f64,
    /// Requests that moved the head to another track, and the time spent seeking, waiting
    /// for the platter and transferring.
    pub seeks: u64,
    pub seek_ns: u64,
    pub rotation_ns: u64,
    pub transfer_ns: u64,
    /// Reads served by read look-ahead.
    pub lookahead_reads: u64,
}

impl ModeledIo {
    fn from_report(r: &Report, op: Op) -> ModeledIo {
        let (op, requests, bytes, time_ns, mb_s) = match op {
            Op::Write => (
                "write",
                r.writes,
                r.write_bytes,
                r.write_time_ns,
                r.write_mb_s,
            ),
            _ => ("read", r.reads, r.read_bytes, r.read_time_ns, r.read_mb_s),
        };
        ModeledIo {
            model: r.model.clone(),
            mapping: MAPPING.into(),
            op: op.into(),
            device_requests: requests,
            bytes,
            time_ns,
            mb_s,
            seeks: r.seeks,
            seek_ns: r.seek_ns,
            rotation_ns: r.rotation_ns,
            transfer_ns: r.transfer_ns,
            lookahead_reads: r.lookahead_reads,
        }
    }
}

/// Model `requests` (file offset, length) of `op` (Read or Write) on a file laid out as
/// `extents` (sorted by logical offset), `queue_depth` application requests in flight.
pub fn model_io(
    p: &Params,
    extents: &[Extent],
    requests: &[(u64, u64)],
    queue_depth: u32,
    op: Op,
) -> Result<ModeledIo, ParamError> {
    p.validate()?;
    let op = if op == Op::Write { Op::Write } else { Op::Read };
    let per: Vec<Vec<Piece>> = requests
        .iter()
        .map(|&(o, l)| match op {
            Op::Write => write_pieces(extents, o, l),
            // The SSD's pieces carry their file offset; the disk needs none.
            _ => crate::ssd::layout::pieces(extents, o, l)
                .into_iter()
                .map(|(a, n, _)| (a, n))
                .collect(),
        })
        .collect();
    let r = Hdd::replay(p, &trace(&per, queue_depth, op))?;
    Ok(ModeledIo::from_report(&r, op))
}

/// [`model_io`] for reads (holes and unwritten extents cost no device read).
pub fn model_reads(
    p: &Params,
    extents: &[Extent],
    reads: &[(u64, u64)],
    queue_depth: u32,
) -> Result<ModeledIo, ParamError> {
    model_io(p, extents, reads, queue_depth, Op::Read)
}

/// [`model_io`] for writes.
pub fn model_writes(
    p: &Params,
    extents: &[Extent],
    writes: &[(u64, u64)],
    queue_depth: u32,
) -> Result<ModeledIo, ParamError> {
    model_io(p, extents, writes, queue_depth, Op::Write)
}

/// A whole file of `size` bytes in `request_size` requests from offset 0, QD 1:
/// (reads, writes) — what `bench paf --model hdd` prices per benchmarked file.
pub fn file_read_write(
    p: &Params,
    extents: &[Extent],
    size: u64,
    request_size: u64,
) -> Result<(ModeledIo, ModeledIo), ParamError> {
    let rs = request_size.max(512);
    let reqs: Vec<(u64, u64)> = (0..size)
        .step_by(usize::try_from(rs).unwrap_or(usize::MAX))
        .map(|o| (o, rs.min(size - o)))
        .collect();
    Ok((
        model_reads(p, extents, &reqs, 1)?,
        model_writes(p, extents, &reqs, 1)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = 1 << 20;

    fn seq(size: u64, rs: u64) -> Vec<(u64, u64)> {
        (0..size / rs).map(|i| (i * rs, rs)).collect()
    }

    /// A contiguous file read at the outer edge streams at the manual's 175 MB/s, at the
    /// inner edge at its 83 MB/s (within 0.1 %: the rate falls by less inside 64 MiB).
    #[test]
    fn sequential_reads_run_at_the_zones_sustained_rate() {
        let p = Params::hdd();
        let outer = model_reads(&p, &[Extent::plain(0, 0, 64 * M)], &seq(64 * M, M), 1).unwrap();
        assert!((outer.mb_s - 175.0).abs() < 0.175, "{outer:?}");
        assert_eq!((outer.seeks, outer.rotation_ns), (0, 0));
        assert_eq!(outer.lookahead_reads, 63);
        let at = (p.capacity_bytes - 64 * M) / 4096 * 4096;
        let inner = model_reads(&p, &[Extent::plain(0, at, 64 * M)], &seq(64 * M, M), 1).unwrap();
        assert!((inner.mb_s - 83.0).abs() < 0.083, "{inner:?}");
    }

    /// Two 1 MiB pieces, one at the outer edge and one half-way into the disk's bytes, read
    /// as one 2 MiB request: slower than the contiguous file by one seek over 41 % of the
    /// stroke plus a rotational wait below one revolution (and the slower zone's transfer).
    #[test]
    fn a_split_read_pays_one_seek_and_rotation() {
        let p = Params::hdd();
        let half = p.capacity_bytes / 2 / 4096 * 4096;
        let flat = model_reads(&p, &[Extent::plain(0, 0, 2 * M)], &[(0, 2 * M)], 1).unwrap();
        let split = [Extent::plain(0, 0, M), Extent::plain(M, half, M)];
        let s = model_reads(&p, &split, &[(0, 2 * M)], 1).unwrap();
        // By hand: 2 MiB at 175 MB/s = 11,983,726 ns (rounded up).
        assert_eq!(flat.time_ns, 11_983_726);
        assert_eq!((s.device_requests, s.seeks), (2, 1));
        // Half the bytes lie outside the radius of √((175² + 83²)/2) = 136.96 MB/s: that is
        // (175 − 136.96) / (175 − 83) = 41.35 % of the stroke = 811.3 HP 97560 cylinders:
        // 8.00 + 0.008 × 811.3 = 14.49 ms on [RW]'s curve, × 8.5 / 13.232 = 9.31 ms.
        assert!((s.seek_ns as f64 - 9.31e6).abs() < 0.01e6, "{s:?}");
        // The second MiB: 1,048,576 B at 136.96 MB/s = 7,656,000 ns instead of 5,991,863.
        let slower = 7_656_000 - 5_991_863;
        let extra = s.time_ns - flat.time_ns;
        assert!(s.rotation_ns < p.rotation_ns());
        let hand = s.seek_ns + s.rotation_ns + slower;
        assert!(extra.abs_diff(hand) < 2_000, "{extra} vs {hand}");
        assert!(s.mb_s < flat.mb_s * 0.6, "{} vs {}", s.mb_s, flat.mb_s);
        assert_eq!(model_reads(&p, &split, &[(0, 2 * M)], 1).unwrap(), s);
    }

    /// Write-through: each sequential 1 MiB write after the first reaches the drive 1 ns
    /// after its predecessor completed, its first sector just past the head: one whole
    /// revolution lost per write, where reads stream on from the look-ahead. With two
    /// writes queued the next is at the drive before the head gets there: no loss.
    #[test]
    fn sequential_writes_lose_a_revolution_each_reads_do_not() {
        let p = Params::hdd();
        let file = [Extent::plain(0, 0, 8 * M)];
        let r = model_reads(&p, &file, &seq(8 * M, M), 1).unwrap();
        let w = model_writes(&p, &file, &seq(8 * M, M), 1).unwrap();
        assert_eq!(w.time_ns - r.time_ns, 7 * p.rotation_ns());
        assert_eq!(w.rotation_ns, 7 * (p.rotation_ns() - 1));
        assert!(w.mb_s < r.mb_s / 2.0, "{} vs {}", w.mb_s, r.mb_s);
        let w2 = model_writes(&p, &file, &seq(8 * M, M), 2).unwrap();
        assert_eq!(w2.time_ns, w2.transfer_ns);
        assert_eq!(w2.rotation_ns, 0);
    }

    /// The @offset places the device inward: the same file reads slower further in.
    #[test]
    fn offset_moves_the_device_to_slower_zones() {
        let file = [Extent::plain(0, 0, 16 * M)];
        let outer = model_reads(&Params::hdd(), &file, &seq(16 * M, M), 1).unwrap();
        let mid = Params::parse("hdd@50%").unwrap();
        let m = model_reads(&mid, &file, &seq(16 * M, M), 1).unwrap();
        assert!((m.mb_s - 136.96).abs() < 0.2, "{m:?}");
        assert!(m.mb_s < outer.mb_s);
        assert_eq!(m.model, "hdd@50%");
    }

    #[test]
    fn write_pieces_include_unwritten_extents_and_reads_skip_them() {
        let mut u = Extent::plain(M, 8 * M, M);
        u.flags = fragkit_sys::fiemap::ExtentFlags::UNWRITTEN;
        let e = [Extent::plain(0, 0, M), u];
        assert_eq!(write_pieces(&e, 0, 2 * M), vec![(0, M), (8 * M, M)]);
        assert_eq!(crate::ssd::layout::pieces(&e, 0, 2 * M), vec![(0, M, 0)]);
        assert!(write_pieces(&e, 4 * M, M).is_empty());
    }

    /// Nothing panics on absurd requests; the whole-file helper covers a tail piece.
    #[test]
    fn no_panic_on_extreme_input() {
        let p = Params::hdd();
        let e = [Extent::plain(0, u64::MAX - 4096, 4096)];
        let r = model_reads(&p, &e, &[(0, u64::MAX)], 7).unwrap();
        assert_eq!(r.device_requests, 1);
        let weird = [Request {
            issue_ns: u64::MAX,
            complete_ns: u64::MAX,
            sector: u64::MAX,
            bytes: u64::MAX,
            op: Op::Write,
            inode: None,
            offset: None,
        }];
        Hdd::replay(&p, &weird).unwrap();
        let (rd, wr) = file_read_write(&p, &[Extent::plain(0, 0, 3 * M)], 3 * M - 100, M).unwrap();
        assert_eq!((rd.device_requests, wr.device_requests), (3, 3));
        assert_eq!(rd.bytes, 3 * M - 100);
        let (rd, _) = file_read_write(&p, &[], 0, M).unwrap();
        assert_eq!((rd.bytes, rd.mb_s), (0, 0.0));
    }
}
