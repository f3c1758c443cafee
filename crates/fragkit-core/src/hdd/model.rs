//! The replay engine: one actuator serving requests in arrival order (no command
//! reordering), integer nanoseconds, deterministic.
//!
//! A request at device address a (disk address d = start + a) is served as a disk serves
//! it: when the head is free, it seeks from its track to d's ([`Params::seek_ns`]; writes
//! add the write settle), waits for d to come round (the platter's angle is the modeled
//! time modulo one revolution, d's angle its offset in its track), then transfers at the
//! zone's media rate ([`Params::rate_at`]). Two things make consecutive requests cheaper:
//! - a request that starts where the previous transfer ended, handed to the drive before
//!   that transfer ended (queued), continues it with no seek and no rotational wait;
//! - read look-ahead: after a read the drive keeps reading the following sectors into
//!   its buffer, so a read that starts where the previous read ended streams on (its data
//!   arrives as if the head never stopped) as long as the buffer could hold what the head
//!   read in between (cache_bytes).
//!
//! Writes run write-through (no write-back cache, see docs/hdd.md): a write completes
//! when its last sector is on the platter, and nothing reads ahead for it. A sequential
//! write handed to the drive after the previous one completed has therefore just missed
//! its first sector and waits most of a revolution: the write path's cost on a disk.
//!
//! The first request of a replay finds the head on its first sector: a job's modeled time
//! is what its own requests cost, not the head's way to them from wherever it was.
//!
//! Replay keeps the recorded program's dependencies as the SSD model does: a request waits
//! for the requests that had completed before it was issued in the recording, plus the
//! host time the recording shows between those completions and its issue.
//!
//! Not modelled: command overhead and the interface transfer (SATA 600 MB/s, above any
//! media rate here), NCQ reordering, head and cylinder switch times and skew (folded into
//! the sustained rate), track/sector defects and spares, the write-back cache, the
//! segmented buffer's segment count, and power states.

use serde::Serialize;

use super::params::{ParamError, Params};
use crate::ssd::replay::{Busy, Dependencies};
use crate::ssd::trace::{Op, Request};

/// What a replay found. Times in nanoseconds of modeled time.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    pub model: String,
    pub reads: u64,
    pub writes: u64,
    pub discards: u64,
    pub flushes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Requests that moved the head to another track.
    pub seeks: u64,
    /// Time spent seeking, waiting for the platter to turn, and transferring.
    pub seek_ns: u64,
    pub rotation_ns: u64,
    pub transfer_ns: u64,
    /// Reads served by read look-ahead (streamed on from the previous read).
    pub lookahead_reads: u64,
    /// Time at least one read (write) was in flight.
    pub read_time_ns: u64,
    pub write_time_ns: u64,
    /// From the first issue to the last completion.
    pub total_time_ns: u64,
    /// read_bytes / read_time, write_bytes / write_time (MB = 10^6 bytes).
    pub read_mb_s: f64,
    pub write_mb_s: f64,
}

pub struct Hdd {
    p: Params,
    rot: u64,
    /// Disk address where the last transfer ended, and when; the op that did it.
    head_addr: u64,
    head_free: u64,
    last_op: Option<Op>,
    // Replay state (as ssd::model).
    deps: Dependencies,
    last_start: u64,
    end: u64,
    reads_busy: Busy,
    writes_busy: Busy,
    r: Report,
}

impl Hdd {
    pub fn new(p: &Params) -> Result<Hdd, ParamError> {
        p.validate()?;
        Ok(Hdd {
            rot: p.rotation_ns(),
            head_addr: p.start_bytes,
            head_free: 0,
            last_op: None,
            deps: Dependencies::default(),
            last_start: 0,
            end: 0,
            reads_busy: Busy::default(),
            writes_busy: Busy::default(),
            r: Report {
                model: p.name.clone(),
                ..Report::default()
            },
            p: p.clone(),
        })
    }

    /// Replay a whole trace.
    pub fn replay(p: &Params, requests: &[Request]) -> Result<Report, ParamError> {
        let mut d = Hdd::new(p)?;
        for r in requests {
            d.submit(r);
        }
        Ok(d.finish())
    }

    /// Modeled arrival of a request: after its recorded dependencies plus its think time.
    fn start_time(&mut self, r: &Request) -> u64 {
        let origin = self.deps.origin(r);
        self.last_start = self.last_start.max(origin);
        self.last_start
    }

    pub fn submit(&mut self, r: &Request) {
        let arrive = self.start_time(r);
        let done = match r.op {
            Op::Read | Op::Write => {
                let done = self.serve(r.op, r.sector.saturating_mul(512), r.bytes, arrive);
                if r.op == Op::Read {
                    self.r.reads += 1;
                    self.r.read_bytes = self.r.read_bytes.saturating_add(r.bytes);
                    self.reads_busy.add(arrive, done);
                } else {
                    self.r.writes += 1;
                    self.r.write_bytes = self.r.write_bytes.saturating_add(r.bytes);
                    self.writes_busy.add(arrive, done);
                }
                done
            }
            Op::Discard => {
                self.r.discards += 1;
                arrive
            }
            // Write-through: nothing is pending once the head is free.
            Op::Flush => {
                self.r.flushes += 1;
                arrive.max(self.head_free)
            }
        };
        self.end = self.end.max(done);
        self.deps.completed(r, done);
    }

    /// Serve one transfer arriving at `arrive`; returns its completion.
    fn serve(&mut self, op: Op, addr: u64, bytes: u64, arrive: u64) -> u64 {
        let d = self.p.disk_address(addr);
        let start = arrive.max(self.head_free);
        let xfer = self.p.transfer_ns(d, bytes);
        let same_place = self.last_op.is_some() && d == self.head_addr;
        let done = if same_place && op == Op::Read && self.last_op == Some(Op::Read) && {
            // What the look-ahead read since the stream point must fit the buffer.
            let gap = (start - self.head_free) as u128;
            gap * self.p.rate_at(d) as u128 / 1_000_000_000 <= self.p.cache_bytes as u128
        } {
            // Look-ahead: the data streams in as if the head had never stopped.
            self.r.lookahead_reads += 1;
            self.r.transfer_ns = self.r.transfer_ns.saturating_add(xfer);
            let streamed = self.head_free.saturating_add(xfer);
            self.head_free = streamed;
            self.head_addr = d.saturating_add(bytes);
            self.last_op = Some(op);
            return streamed.max(start);
        } else if self.last_op.is_none() || (same_place && start == self.head_free) {
            // The first request finds the head on its sector (reaching a job's first block
            // is not the job's cost); a queued request continues the transfer before it.
            start.saturating_add(xfer)
        } else {
            let from = self.p.stroke_ppb(self.head_addr);
            let to = self.p.stroke_ppb(d);
            let seek = if self.p.track(self.head_addr) == self.p.track(d) {
                0
            } else {
                self.r.seeks += 1;
                match op {
                    Op::Write => self.p.write_seek_ns(from.abs_diff(to)),
                    _ => self.p.seek_ns(from.abs_diff(to)),
                }
            };
            let on_track = start.saturating_add(seek);
            // The sector passes under the head at times ≡ angle (mod rotation). On the track
            // the head just left, the sector where it stopped passed at head_free.
            let due = if same_place {
                self.head_free % self.rot
            } else {
                self.p.angle_ns(d)
            };
            let wait = (due + self.rot - on_track % self.rot) % self.rot;
            self.r.seek_ns = self.r.seek_ns.saturating_add(seek);
            self.r.rotation_ns = self.r.rotation_ns.saturating_add(wait);
            on_track.saturating_add(wait).saturating_add(xfer)
        };
        self.r.transfer_ns = self.r.transfer_ns.saturating_add(xfer);
        self.head_free = done;
        self.head_addr = d.saturating_add(bytes);
        self.last_op = Some(op);
        done
    }

    pub fn finish(mut self) -> Report {
        let r = &mut self.r;
        r.read_time_ns = self.reads_busy.finish();
        r.write_time_ns = self.writes_busy.finish();
        r.total_time_ns = self.end;
        let mb_s = |b: u64, t: u64| {
            if t == 0 {
                0.0
            } else {
                b as f64 * 1e3 / t as f64
            }
        };
        r.read_mb_s = mb_s(r.read_bytes, r.read_time_ns);
        r.write_mb_s = mb_s(r.write_bytes, r.write_time_ns);
        self.r
    }
}
