//! What every trace replay keeps of the recording, whatever device it models: which
//! requests had completed before a request was issued (its dependencies) and the host time
//! between them, and the time something was in flight.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::trace::Request;

/// The recording's dependencies on a modeled device: a request starts after the requests
/// that had completed before it was issued in the recording completed on the model, plus
/// the host time the recording shows between those completions and its issue.
#[derive(Default)]
pub(crate) struct Dependencies {
    /// Submitted requests as (recorded completion, modeled completion).
    pending: BinaryHeap<Reverse<(u64, u64)>>,
    /// The latest (recorded, modeled) completion of everything settled so far.
    barrier: Option<(u64, u64)>,
    first_issue: Option<u64>,
}

impl Dependencies {
    /// Take in every submitted request that completed in the recording by `issue_ns`;
    /// the latest (recorded, modeled) completion among all taken in so far.
    pub(crate) fn settle(&mut self, issue_ns: u64) -> Option<(u64, u64)> {
        while let Some(&Reverse((rec_done, model_done))) = self.pending.peek() {
            if rec_done > issue_ns {
                break;
            }
            self.pending.pop();
            let (rb, b) = self.barrier.unwrap_or((0, 0));
            self.barrier = Some((rb.max(rec_done), b.max(model_done)));
        }
        self.barrier
    }

    /// Modeled start of `r` before any device constraint: after its dependencies plus its
    /// think time (the first request starts at 0).
    pub(crate) fn origin(&mut self, r: &Request) -> u64 {
        let first = *self.first_issue.get_or_insert(r.issue_ns);
        match self.settle(r.issue_ns) {
            Some((rb, b)) => b.saturating_add(r.issue_ns.saturating_sub(rb)),
            None => r.issue_ns.saturating_sub(first),
        }
    }

    /// `r` completes at `done` on the model.
    pub(crate) fn completed(&mut self, r: &Request, done: u64) {
        self.pending.push(Reverse((r.complete_ns, done)));
    }
}

/// Union of intervals whose starts never decrease.
#[derive(Default)]
pub(crate) struct Busy {
    total: u64,
    cur: Option<(u64, u64)>,
}

impl Busy {
    pub(crate) fn add(&mut self, s: u64, e: u64) {
        match &mut self.cur {
            Some((_, ce)) if s <= *ce => *ce = (*ce).max(e),
            cur => {
                if let Some((cs, ce)) = *cur {
                    self.total += ce - cs;
                }
                *cur = Some((s, e));
            }
        }
    }

    pub(crate) fn finish(&self) -> u64 {
        self.total + self.cur.map_or(0, |(s, e)| e - s)
    }
}
