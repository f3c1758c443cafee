//! Reads of a file through the model when no recording of its writes exists: the device's
//! mapping is built from the file's layout (FIEMAP), as if the device had seen the file
//! system's blocks written in address order (what a block-for-block copy writes, and what
//! a fresh allocator filling the disk front to back gives). Under a write-order FTL a
//! block's die is then (address mod S) / g: a file whose pieces sit S apart has them all
//! on one die, the FAST'24 worst case.
//!
//! The reads are the application's requests split where the file's extents end (as the
//! block layer must: one device request per physically contiguous piece), so both costs
//! of fragmentation show: more device commands (request splitting, FragPicker's
//! mechanism) and pieces that share a die (die collisions, FAST'24's).

use std::collections::BTreeSet;

use super::model::{Placement, Report, Ssd};
use super::params::{ParamError, Params, MAP_UNIT};
use super::trace::{Op, Request};
use fragkit_sys::fiemap::Extent;

/// How the modeled device's mapping was built, as reports name it.
pub const MAPPING: &str = "fiemap-physical-order";

/// One physically contiguous device read: (byte address, bytes, file offset).
type Piece = (u64, u64, u64);

/// The device reads one application read of `len` bytes at file offset `off` becomes:
/// one per physically contiguous piece of data (holes and unwritten extents read as zeros
/// and cost no device read). `extents` sorted by logical offset.
pub fn pieces(extents: &[Extent], off: u64, len: u64) -> Vec<Piece> {
    let end = off.saturating_add(len);
    let mut out: Vec<Piece> = Vec::new();
    let first = extents.partition_point(|e| e.logical_end() <= off);
    for e in extents[first..].iter().take_while(|e| e.logical < end) {
        if !e.costs_read_io() {
            continue;
        }
        let s = off.max(e.logical);
        let t = end.min(e.logical_end());
        if s >= t {
            continue;
        }
        let phys = e.physical + (s - e.logical);
        match out.last_mut() {
            Some((p, n, _)) if *p + *n == phys => *n += t - s,
            _ => out.push((phys, t - s, s)),
        }
    }
    out
}

/// A synthetic block trace: writes of every S-aligned stripe that holds a byte the reads
/// touch, in ascending address order (so the write pointer is on die (address mod S) / g
/// for every such byte), a flush, then the reads: application request k's pieces issued
/// together (one file, their file offsets given, so the replay counts collisions per
/// application request as it does for a recorded trace), `queue_depth` application
/// requests in flight.
pub fn trace(per_read: &[Vec<Piece>], stripe: u64, queue_depth: u32) -> Vec<Request> {
    let qd = queue_depth.max(1) as u64;
    let stripes: BTreeSet<u64> = per_read
        .iter()
        .flatten()
        .flat_map(|&(p, n, _)| (p / stripe)..(p + n).div_ceil(stripe))
        .collect();
    let req = |t: u64, done: u64, addr: u64, bytes: u64, op: Op| Request {
        issue_ns: t,
        complete_ns: done,
        sector: addr / 512,
        bytes,
        op,
        inode: None,
        offset: None,
    };
    let mut out = Vec::with_capacity(stripes.len() + per_read.len() + 1);
    let mut t = 0;
    for &s in &stripes {
        out.push(req(t, t, s * stripe, stripe, Op::Write));
        t += 1;
    }
    out.push(req(t, t, 0, 0, Op::Flush));
    // Request k is issued after request k - qd completed, before request k - qd + 1 did.
    let base = t + 1;
    for (k, ps) in per_read.iter().enumerate() {
        let k = k as u64;
        for &(addr, bytes, file_offset) in ps {
            let mut r = req(base + 2 * k, base + 2 * (k + qd) - 1, addr, bytes, Op::Read);
            r.inode = Some(FILE);
            r.offset = Some(file_offset);
            out.push(r);
        }
    }
    out
}

/// The inode the synthetic trace gives the modeled file's reads.
const FILE: u64 = 1;

/// The modeled device's figures for one read job.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModeledReads {
    /// Preset or g,S the device was modeled with.
    pub model: String,
    /// How the mapping was built (see [`MAPPING`]).
    pub mapping: String,
    /// Device read requests after splitting at extent ends (before the device's own MDTS
    /// split).
    pub device_reads: u64,
    pub read_bytes: u64,
    /// Modeled time with a read in flight, and read_bytes over it (MB = 10^6 bytes).
    pub read_time_ns: u64,
    pub mb_s: f64,
    /// Flash page reads each application request put on a die beyond an even spread of
    /// its page reads over the dies, summed (`ssd::Report::collisions`: the same count
    /// a recorded trace of the same reads gives).
    pub collisions: u64,
    /// Application requests with at least one collision.
    pub collided_requests: u64,
    pub page_reads: u64,
    /// Flash page reads that waited for a die busy with another request (per-die queueing).
    #[serde(default)]
    pub queued: u64,
    /// Flash page reads that waited for a die busy with an earlier page of the same request.
    #[serde(default)]
    pub waited_same_request: u64,
    /// Time the busiest die spent reading (sense plus its channel transfers): the floor
    /// under `read_time_ns` that one overloaded die sets.
    #[serde(default)]
    pub busiest_die_ns: u64,
    /// Time the busiest channel spent moving read data from its dies.
    #[serde(default)]
    pub busiest_channel_ns: u64,
}

/// Model `reads` (file offset, length) of a file laid out as `extents`, on device `p`
/// with a write-order FTL.
pub fn model_reads(
    p: &Params,
    extents: &[Extent],
    reads: &[(u64, u64)],
    queue_depth: u32,
) -> Result<ModeledReads, ParamError> {
    p.validate()?;
    let per_read: Vec<Vec<Piece>> = reads.iter().map(|&(o, l)| pieces(extents, o, l)).collect();
    let r: Report = Ssd::replay(
        p,
        Placement::WriteOrder,
        &trace(&per_read, p.stripe_bytes(), queue_depth),
    )?;
    Ok(ModeledReads {
        model: r.model,
        mapping: MAPPING.into(),
        device_reads: r.reads,
        read_bytes: r.read_bytes,
        read_time_ns: r.read_time_ns,
        mb_s: r.read_mb_s,
        collisions: r.collisions,
        collided_requests: r.collided_reads,
        page_reads: r.page_reads,
        queued: r.queued,
        waited_same_request: r.waited_same_request,
        // die_utilisation is each die's busy time over read_time_ns.
        busiest_die_ns: (r.die_utilisation.iter().fold(0.0f64, |a, &u| a.max(u))
            * r.read_time_ns as f64)
            .round() as u64,
        busiest_channel_ns: r.busiest_channel_ns,
    })
}

/// Modeled time of one sequential read of [offset, offset + length) in `request_size`
/// requests at queue depth 1: on the file's layout now, and on a contiguous layout of the
/// same file (one extent from an S-aligned address). (now_ns, contiguous_ns).
pub fn access_cost(
    p: &Params,
    extents: &[Extent],
    offset: u64,
    length: u64,
    request_size: u64,
) -> Result<(u64, u64), ParamError> {
    let rs = request_size.max(MAP_UNIT);
    let end = offset.saturating_add(length);
    let reads: Vec<(u64, u64)> = (offset..end)
        .step_by(rs as usize)
        .map(|o| (o, rs.min(end - o)))
        .collect();
    let size = extents.last().map_or(0, |e| e.logical_end()).max(end);
    let contiguous = [Extent::plain(0, 0, size.next_multiple_of(MAP_UNIT))];
    let now = model_reads(p, extents, &reads, 1)?;
    let ideal = model_reads(p, &contiguous, &reads, 1)?;
    Ok((now.read_time_ns, ideal.read_time_ns))
}

/// One whole file read sequentially on the modeled device (what `scan --model` reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FileCost {
    /// Modeled time of one sequential read of the file in R-sized requests, QD 1.
    pub read_ns: u64,
    /// The same read with the file's data in one piece from where it starts now.
    pub contiguous_ns: u64,
    /// Die collisions of the read now (`ssd::Report::collisions`); a contiguous file has none.
    pub collisions: u64,
    /// Device read requests now (after splitting at extent ends).
    pub device_reads: u64,
}

impl FileCost {
    /// read_ns / contiguous_ns (1 for a file with nothing to read).
    pub fn ratio(&self) -> f64 {
        if self.contiguous_ns == 0 {
            1.0
        } else {
            self.read_ns as f64 / self.contiguous_ns as f64
        }
    }

    pub fn add(&mut self, o: &FileCost) {
        self.read_ns += o.read_ns;
        self.contiguous_ns += o.contiguous_ns;
        self.collisions += o.collisions;
        self.device_reads += o.device_reads;
    }
}

/// Application requests modeled per replay: at queue depth 1 every request starts on an
/// idle device, so a long file's time is the sum of its segments' and the model's mapping
/// (8 bytes per 4 KiB touched) stays bounded per file, whatever its size.
const SEGMENT_REQUESTS: u64 = 1024;

/// [`FileCost`] of a file of `size` bytes laid out as `extents` (sorted by logical
/// offset), read from 0 to `size` in `request_size` requests.
pub fn file_cost(
    p: &Params,
    extents: &[Extent],
    size: u64,
    request_size: u64,
) -> Result<FileCost, ParamError> {
    file_cost_in(p, extents, size, request_size, SEGMENT_REQUESTS)
}

fn file_cost_in(
    p: &Params,
    extents: &[Extent],
    size: u64,
    request_size: u64,
    segment_requests: u64,
) -> Result<FileCost, ParamError> {
    // The contiguous file: its data extents back to back from the first one's address.
    let mut contiguous = Vec::with_capacity(extents.len());
    let mut next = None;
    for e in extents.iter().filter(|e| e.costs_read_io()) {
        let phys = *next.get_or_insert(e.physical);
        contiguous.push(Extent::plain(e.logical, phys, e.length));
        next = Some(phys + e.length);
    }
    let rs = request_size.max(MAP_UNIT);
    let seg = rs.saturating_mul(segment_requests.max(1));
    let mut total = FileCost::default();
    // Segments start at multiples of `seg` (so requests stay at multiples of `rs`); a
    // segment without data costs nothing (holes and unwritten extents are no device read)
    // and is skipped: the time is in proportion to the data extents, not to the file's
    // logical size (a sparse 8 EiB file has a handful of segments to model).
    let data: Vec<&Extent> = extents.iter().filter(|e| e.costs_read_io()).collect();
    let mut next = 0;
    let mut start = 0;
    while start < size {
        while data.get(next).is_some_and(|e| e.logical_end() <= start) {
            next += 1;
        }
        let Some(e) = data.get(next).filter(|e| e.logical < size) else {
            break;
        };
        let end = size.min(start.saturating_add(seg));
        if e.logical >= end {
            // end < size here, so end = start + seg: the jump moves forward.
            start = e.logical - e.logical % seg;
            continue;
        }
        let reads: Vec<(u64, u64)> = (start..end)
            .step_by(rs as usize)
            .map(|o| (o, rs.min(end - o)))
            .collect();
        let now = model_reads(p, extents, &reads, 1)?;
        let ideal = model_reads(p, &contiguous, &reads, 1)?;
        total.add(&FileCost {
            read_ns: now.read_time_ns,
            contiguous_ns: ideal.read_time_ns,
            collisions: now.collisions,
            device_reads: now.device_reads,
        });
        start = end;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fragkit_sys::fiemap::ExtentFlags;

    const K: u64 = 1024;

    #[test]
    fn pieces_split_at_extent_ends_and_join_contiguous_ones() {
        let e = [
            Extent::plain(0, 1 << 20, 64 * K),
            Extent::plain(64 * K, (1 << 20) + 64 * K, 64 * K), // continues on the device
            Extent::plain(128 * K, 8 << 20, 64 * K),
        ];
        assert_eq!(pieces(&e, 0, 128 * K), vec![(1 << 20, 128 * K, 0)]);
        assert_eq!(
            pieces(&e, 96 * K, 64 * K),
            vec![
                ((1 << 20) + 96 * K, 32 * K, 96 * K),
                (8 << 20, 32 * K, 128 * K)
            ]
        );
        // Past the end of the file: nothing to read.
        assert!(pieces(&e, 192 * K, 4 * K).is_empty());
        let mut unwritten = Extent::plain(0, 0, 4 * K);
        unwritten.flags = ExtentFlags::UNWRITTEN;
        assert!(pieces(&[unwritten], 0, 4 * K).is_empty());
    }

    /// A contiguous 1 MiB file read in 128 KiB requests spreads over all dies; the same
    /// file in 32 KiB pieces 256 KiB (= S) apart puts every piece on one die: collisions,
    /// more device reads and a slower modeled read. Same input, same numbers.
    #[test]
    fn contiguous_beats_one_die_and_is_deterministic() {
        let p = Params::fast24();
        let reads: Vec<(u64, u64)> = (0..8).map(|i| (i * 128 * K, 128 * K)).collect();
        let contiguous = [Extent::plain(0, 64 << 20, 1 << 20)];
        let worst: Vec<Extent> = (0..32)
            .map(|i| Extent::plain(i * 32 * K, (64 << 20) + i * 256 * K, 32 * K))
            .collect();
        let c = model_reads(&p, &contiguous, &reads, 1).unwrap();
        let w = model_reads(&p, &worst, &reads, 1).unwrap();
        assert_eq!((c.device_reads, c.collisions), (8, 0));
        assert_eq!(c.read_bytes, 1 << 20);
        assert_eq!(w.device_reads, 32);
        assert_eq!(w.read_bytes, 1 << 20);
        // Each 128 KiB request: 4 pages on die 0, 3 beyond an even spread.
        assert_eq!((w.collisions, w.collided_requests), (24, 8));
        // All on one die: that die and its channel carry the whole read; spread over the
        // dies, the busiest die and channel carry a share of it.
        assert!(w.busiest_die_ns > c.busiest_die_ns, "{w:?} {c:?}");
        assert!(w.busiest_channel_ns >= c.busiest_channel_ns, "{w:?} {c:?}");
        assert!(c.busiest_channel_ns > 0 && w.busiest_die_ns <= w.read_time_ns);
        assert!(w.mb_s < c.mb_s / 2.0, "{} vs {}", w.mb_s, c.mb_s);
        assert_eq!(model_reads(&p, &worst, &reads, 1).unwrap(), w);
    }

    #[test]
    fn access_cost_of_a_scattered_range_exceeds_contiguous() {
        let p = Params::fast24();
        let worst: Vec<Extent> = (0..32)
            .map(|i| Extent::plain(i * 32 * K, (64 << 20) + i * 256 * K, 32 * K))
            .collect();
        let (now, ideal) = access_cost(&p, &worst, 0, 1 << 20, 128 * K).unwrap();
        assert!(now > 2 * ideal, "{now} vs {ideal}");
        let flat = [Extent::plain(0, 1 << 30, 1 << 20)];
        let (now, ideal) = access_cost(&p, &flat, 0, 1 << 20, 128 * K).unwrap();
        assert_eq!(now, ideal);
    }

    /// Pieces S/2 apart alternate between two dies only; pieces g apart use every die.
    #[test]
    fn die_follows_address_mod_stripe() {
        let p = Params::fast24();
        let reads = [(0, 256 * K)];
        let spread: Vec<Extent> = (0..8)
            .map(|i| Extent::plain(i * 32 * K, (1 << 30) + i * 32 * K * 9, 32 * K))
            .collect();
        let two: Vec<Extent> = (0..8)
            .map(|i| Extent::plain(i * 32 * K, (1 << 30) + i * 128 * K, 32 * K))
            .collect();
        let s = model_reads(&p, &spread, &reads, 1).unwrap();
        let t = model_reads(&p, &two, &reads, 1).unwrap();
        assert_eq!(s.collisions, 0, "address i·9g is on die i mod 8");
        assert_eq!(
            t.collisions, 6,
            "8 pages on 2 dies: 3 beyond an even spread on each"
        );
    }

    /// Segments add up to the whole read (QD 1: each request starts on an idle device),
    /// a one-piece file costs what its contiguous self does, the worst case far more.
    #[test]
    fn file_cost_is_segment_additive_and_one_for_a_contiguous_file() {
        let p = Params::fast24();
        let worst: Vec<Extent> = (0..64)
            .map(|i| Extent::plain(i * 32 * K, (64 << 20) + 4096 + i * 256 * K, 32 * K))
            .collect();
        let size = 64 * 32 * K - 100;
        let whole = file_cost_in(&p, &worst, size, 128 * K, u64::MAX).unwrap();
        for seg in [1, 3, 7] {
            assert_eq!(file_cost_in(&p, &worst, size, 128 * K, seg).unwrap(), whole);
        }
        assert!(whole.ratio() > 2.0, "{whole:?}");
        assert!(whole.collisions > 0);
        let flat = [Extent::plain(0, (1 << 30) + 12 * K, 2 << 20)];
        let c = file_cost(&p, &flat, 2 << 20, 128 * K).unwrap();
        assert_eq!(
            (c.read_ns, c.collisions, c.device_reads),
            (c.contiguous_ns, 0, 16)
        );
        assert_eq!(file_cost(&p, &[], 0, 128 * K).unwrap(), FileCost::default());
    }

    /// Every segment modeled, holes included: what file_cost did before it skipped them.
    fn file_cost_every_segment(
        p: &Params,
        extents: &[Extent],
        size: u64,
        rs: u64,
        n: u64,
    ) -> FileCost {
        let mut total = FileCost::default();
        let seg = rs * n;
        for start in (0..size).step_by(seg as usize) {
            let end = size.min(start + seg);
            let reads: Vec<(u64, u64)> = (start..end)
                .step_by(rs as usize)
                .map(|o| (o, rs.min(end - o)))
                .collect();
            let mut contiguous = Vec::new();
            let mut next = None;
            for e in extents.iter().filter(|e| e.costs_read_io()) {
                let phys = *next.get_or_insert(e.physical);
                contiguous.push(Extent::plain(e.logical, phys, e.length));
                next = Some(phys + e.length);
            }
            let now = model_reads(p, extents, &reads, 1).unwrap();
            let ideal = model_reads(p, &contiguous, &reads, 1).unwrap();
            total.add(&FileCost {
                read_ns: now.read_time_ns,
                contiguous_ns: ideal.read_time_ns,
                collisions: now.collisions,
                device_reads: now.device_reads,
            });
        }
        total
    }

    /// Holes cost nothing, so skipping the segments without data changes no figure; a
    /// sparse file of 8 EiB (less a byte: the largest xfs and btrfs allow) with three data
    /// extents is modeled from those extents alone (before, 2^36 segments of 1024 requests).
    #[test]
    fn file_cost_skips_holes() {
        let p = Params::fast24();
        let mut unwritten = Extent::plain(40 << 20, 9 << 30, 1 << 20);
        unwritten.flags = ExtentFlags::UNWRITTEN;
        let sparse = [
            Extent::plain(4 * K, 1 << 30, 60 * K),
            Extent::plain(20 << 20, (2 << 30) + 4 * K, 300 * K),
            unwritten,
            Extent::plain(60 << 20, 3 << 30, 128 * K),
        ];
        let size = 64 << 20;
        for n in [1, 2, 5, 1024] {
            assert_eq!(
                file_cost_in(&p, &sparse, size, 128 * K, n).unwrap(),
                file_cost_every_segment(&p, &sparse, size, 128 * K, n),
                "{n} requests a segment"
            );
        }
        // Data past the size is not read; nothing but holes costs nothing.
        assert_eq!(
            file_cost(&p, &sparse, 4 * K, 128 * K).unwrap(),
            FileCost::default()
        );
        assert_eq!(
            file_cost(&p, &sparse[2..3], size, 128 * K).unwrap(),
            FileCost::default()
        );

        let huge = [
            Extent::plain(0, 1 << 30, 128 * K),
            Extent::plain(1 << 40, 2 << 30, 256 * K),
            Extent::plain(1 << 62, 3 << 30, 128 * K),
        ];
        let c = file_cost(&p, &huge, i64::MAX as u64, 128 * K).unwrap();
        // One device read per 128 KiB request that holds data: 1 + 2 + 1.
        assert_eq!(c.device_reads, 4, "{c:?}");
        assert!(c.read_ns > 0 && c.contiguous_ns > 0, "{c:?}");
    }
}
