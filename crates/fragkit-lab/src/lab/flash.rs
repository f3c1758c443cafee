//! FAST'24's measure of a database's layout in the lab: the recorded block requests
//! replayed through the `fast24` model with a write-order FTL, as `bench fast24` does.
//!
//! On such a drive a page's die comes from when it was written, not from where it sits,
//! so which database pages share a die is set by the order the build wrote them in (the
//! database's pages between the dummy file's appends), and a defragmenter's writes give
//! the pages it moves new dies in the order it wrote them. advise's layout model cannot
//! see that (it maps the file's blocks as if written in address order); this replay can.
//!
//! The phases are recorded on different loop devices (the base while the database is
//! built and read, then each round's clone, a block-for-block copy of it): the clone
//! stands for the same drive, its history being the base's. Each phase is appended after
//! everything before it completed, as if the drive had been idle in between.
//!
//! The file system's journal is left out of the history: the artifact put ext4's journal
//! on a device of its own (setdevice.sh: `mkfs.ext4 -O journal_dev`, then `-J device=`),
//! so the drive it measured never saw the journal's writes; the lab's file systems keep
//! theirs inside (a block-for-block clone cannot carry a second device). The journal's
//! blocks come from the superblock (GETFSMAP reports them as "unknown"). Measured on one recorded build: with the journal's writes
//! in, they sit between the database's and the dummy's and spread the database over the
//! dies, and the fragmented database replays 49% faster than without them.

use anyhow::{anyhow, Context, Result};
use fragkit_core::io::device::BlockDevice;
use fragkit_core::ssd::{BlockTrace, Op, Params, Placement, Request, Ssd};
use fragkit_sys::tunable::SysfsTunable;
use serde::Serialize;

/// The modeled drive (the FAST'24 artifact's NVMe, docs/ssd.md).
pub fn params() -> Params {
    Params::fast24()
}

/// Recorded phases joined into one history for the model.
#[derive(Debug, Clone, Default)]
pub struct History {
    requests: Vec<Request>,
    /// Events the recorders lost (their ring buffer was full): the history misses them.
    pub dropped: u64,
    /// The journal's device byte ranges, whose requests are left out.
    journal: Vec<(u64, u64)>,
}

impl History {
    /// An empty history of the ext4 on `dev` (or of a block-for-block copy of it): its
    /// internal journal's requests will be left out. Other file systems keep everything:
    /// `journal_left_out` says which.
    pub fn for_device(dev: &BlockDevice) -> Result<History> {
        let dev = dev.dev_path();
        let journal = fragkit_sys::superblock::ext4_journal_ranges(&dev)
            .with_context(|| format!("{}: reading its superblock", dev.display()))?;
        Ok(History {
            journal,
            ..History::default()
        })
    }

    pub fn journal_left_out(&self) -> bool {
        !self.journal.is_empty()
    }

    fn in_journal(&self, q: &Request) -> bool {
        let (s, e) = (q.byte_offset(), q.byte_offset() + q.bytes);
        q.bytes > 0 && self.journal.iter().any(|&(a, b)| s >= a && e <= b)
    }

    /// Append a phase's writes, discards and flushes only: its reads are not the ones
    /// timed (the build's metadata reads, the application's reads during a defrag).
    pub fn push_writes(&mut self, t: &BlockTrace) {
        self.push(t, |q| q.op != Op::Read);
    }

    /// Append every request of a phase.
    pub fn push_all(&mut self, t: &BlockTrace) {
        self.push(t, |_| true);
    }

    fn push(&mut self, t: &BlockTrace, keep: impl Fn(&Request) -> bool) {
        self.dropped += t.dropped;
        let keep = |q: &Request| keep(q) && !self.in_journal(q);
        let start = self
            .requests
            .iter()
            .map(|q| q.complete_ns.max(q.issue_ns))
            .max()
            .map_or(0, |end| end + 1);
        let Some(first) = t.requests.iter().find(|q| keep(q)).map(|q| q.issue_ns) else {
            return;
        };
        // start + (issue - first) keeps the phase's own spacing; issue >= first holds as
        // a trace is in issue order.
        let moved: Vec<Request> = t
            .requests
            .iter()
            .filter(|q| keep(q))
            .map(|q| Request {
                issue_ns: start + (q.issue_ns - first),
                complete_ns: start + (q.complete_ns.max(q.issue_ns) - first),
                ..q.clone()
            })
            .collect();
        self.requests.extend(moved);
    }

    /// The reads in the history replayed on `fast24`, write order: their MB/s.
    pub fn read_mb_s(&self) -> Result<f64> {
        if !self.requests.iter().any(|q| q.op == Op::Read) {
            return Err(anyhow!("the recorded history holds no reads to time"));
        }
        let r = Ssd::replay(&params(), Placement::WriteOrder, &self.requests)
            .map_err(|e| anyhow!("the fast24 model: {e}"))?;
        Ok(r.read_mb_s)
    }

    pub fn len(&self) -> usize {
        self.requests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// `dev` given the modeled drive's queue limits (largest request its MDTS, readahead its
/// host's), put back when dropped.
pub fn as_modeled_drive(dev: &BlockDevice) -> Result<Vec<SysfsTunable>> {
    crate::bench::fast24::device_limits(&dev.disk, &params()).with_context(|| {
        format!(
            "{}: the modeled drive's queue limits",
            dev.dev_path().display()
        )
    })
}

/// FAST'24's figure for the database as built, before anything moved.
#[derive(Debug, Clone, Serialize)]
pub struct FlashLoss {
    pub model: String,
    pub how: String,
    /// The same application run on a database built without the dummy file (the
    /// artifact's contiguous case), replayed the same way.
    pub contiguous_mb_s: f64,
    pub fragmented_mb_s: f64,
    /// 1 − fragmented ÷ contiguous.
    pub loss: f64,
    /// Whether the file system's journal was left out of the histories (GETFSMAP found
    /// it), as the artifact's drive never saw it.
    pub journal_left_out: bool,
    /// Requests in the fragmented and contiguous histories, and events the recorders lost
    /// (0: complete).
    pub requests: usize,
    pub contiguous_requests: usize,
    pub dropped_events: u64,
}

impl FlashLoss {
    pub fn new(fragmented: &History, contiguous: &History) -> Result<FlashLoss> {
        let f = fragmented.read_mb_s()?;
        let c = contiguous.read_mb_s()?;
        Ok(FlashLoss {
            model: "fast24".into(),
            how: "the block requests recorded while the database was built (writes) and then read by the application (two cold scans), replayed through the fast24 model with a write-order FTL; the device had the model's queue limits (256 KiB requests, 128 KiB readahead) while recorded; the journal's requests left out, as the artifact's journal was on a device of its own".into(),
            journal_left_out: fragmented.journal_left_out() && contiguous.journal_left_out(),
            contiguous_mb_s: c,
            fragmented_mb_s: f,
            loss: if c > 0.0 { 1.0 - f / c } else { 0.0 },
            requests: fragmented.len(),
            contiguous_requests: contiguous.len(),
            dropped_events: fragmented.dropped + contiguous.dropped,
        })
    }

    /// Share of the loss a method recovered: its MB/s after, between the fragmented
    /// (0) and the contiguous (1) figure.
    pub fn recovered(&self, after_mb_s: f64) -> Option<f64> {
        let gap = self.contiguous_mb_s - self.fragmented_mb_s;
        (gap > 0.0).then(|| (after_mb_s - self.fragmented_mb_s) / gap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(issue: u64, done: u64, sector: u64, op: Op) -> Request {
        Request {
            issue_ns: issue,
            complete_ns: done,
            sector,
            bytes: 4096,
            op,
            inode: None,
            offset: None,
        }
    }

    #[test]
    fn phases_follow_one_another_and_keep_their_spacing() {
        let mut h = History::default();
        let a = BlockTrace::new(
            "loop0",
            vec![
                req(100, 150, 0, Op::Write),
                req(120, 400, 8, Op::Read),
                req(130, 200, 16, Op::Write),
            ],
        );
        h.push_writes(&a);
        assert_eq!(h.len(), 2, "the phase's read is left out");
        let b = BlockTrace::new(
            "loop1",
            vec![req(5, 9, 0, Op::Read), req(7, 20, 8, Op::Read)],
        );
        h.push_all(&b);
        let t: Vec<(u64, u64)> = h
            .requests
            .iter()
            .map(|q| (q.issue_ns, q.complete_ns))
            .collect();
        // The first phase from 0 (its written requests' spacing), the second after 100.
        assert_eq!(t, vec![(0, 50), (30, 100), (101, 105), (103, 116)]);
        assert!(h.read_mb_s().unwrap() > 0.0);
    }

    #[test]
    fn the_journal_is_left_out() {
        let mut h = History {
            journal: vec![(1 << 20, 2 << 20)],
            ..History::default()
        };
        h.push_all(&BlockTrace::new(
            "loop0",
            vec![
                req(1, 2, 0, Op::Write),
                req(3, 4, (1 << 20) / 512, Op::Write),
                req(5, 6, (2 << 20) / 512 - 1, Op::Write),
                req(7, 8, (2 << 20) / 512, Op::Read),
            ],
        ));
        let sectors: Vec<u64> = h.requests.iter().map(|q| q.sector).collect();
        // The journal's first block is left out; one that runs past its end is not.
        assert_eq!(sectors, vec![0, 4095, 4096]);
    }

    #[test]
    fn a_history_without_reads_has_no_figure() {
        let mut h = History::default();
        h.push_all(&BlockTrace::new("loop0", vec![req(1, 2, 0, Op::Write)]));
        assert!(h.read_mb_s().is_err());
    }

    #[test]
    fn recovered_share_runs_from_the_fragmented_to_the_contiguous_figure() {
        let l = FlashLoss {
            model: "fast24".into(),
            how: String::new(),
            contiguous_mb_s: 800.0,
            fragmented_mb_s: 500.0,
            loss: 0.375,
            journal_left_out: true,
            requests: 0,
            contiguous_requests: 0,
            dropped_events: 0,
        };
        assert_eq!(l.recovered(500.0), Some(0.0));
        assert_eq!(l.recovered(800.0), Some(1.0));
        assert_eq!(l.recovered(650.0), Some(0.5));
    }
}
