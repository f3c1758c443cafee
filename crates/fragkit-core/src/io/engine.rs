//! How requests reach the kernel, behind one small trait (fio calls these ioengines):
//! io_uring for real queue depths, pread/pwrite as the portable synchronous fallback.

use std::io;
use std::os::fd::RawFd;

use fragkit_sys::rw;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Read,
    Write,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// io_uring: up to the queue depth in flight at once.
    Uring,
    /// pread/pwrite: one request at a time, whatever the queue depth.
    Psync,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Uring => "uring",
            EngineKind::Psync => "psync",
        }
    }
}

/// One request handed to an engine. `slot` identifies the caller's buffer and comes back
/// in the completion; the buffer must stay valid until then.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    pub slot: usize,
    pub op: Op,
    pub offset: u64,
    pub buf: *mut u8,
    pub len: usize,
}

#[derive(Debug)]
pub struct Completion {
    pub slot: usize,
    /// Bytes transferred.
    pub result: io::Result<usize>,
}

pub trait Engine {
    /// Queue a request (it may already be done when this returns, as with psync).
    fn queue(&mut self, req: Request) -> io::Result<()>;
    /// Send queued requests to the kernel and wait until at least `min` have completed
    /// (fewer only if fewer are outstanding); append every completion available.
    fn reap(&mut self, min: usize, done: &mut Vec<Completion>) -> io::Result<()>;
    /// Requests the engine really keeps in flight at queue depth `qd`.
    fn effective_depth(&self, qd: u32) -> u32;
    /// Pin `len` bytes at `base` once so that requests whose buffers lie inside skip the
    /// per-request page pinning (io_uring fixed buffers, fio's `fixedbufs`). Returns
    /// whether it did; requests work either way. The memory must outlive the engine.
    fn register_buffers(&mut self, _base: *mut u8, _len: usize) -> bool {
        false
    }
}

/// Open an engine for `fd` with room for `qd` requests in flight.
pub fn open(kind: EngineKind, fd: RawFd, qd: u32) -> io::Result<Box<dyn Engine>> {
    Ok(match kind {
        EngineKind::Uring => Box::new(super::uring::UringEngine::new(fd, qd)?),
        EngineKind::Psync => Box::new(PsyncEngine {
            fd,
            done: Vec::new(),
        }),
    })
}

/// pread(2)/pwrite(2): each request completes inside `queue`.
pub(crate) struct PsyncEngine {
    fd: RawFd,
    done: Vec<Completion>,
}

impl Engine for PsyncEngine {
    fn queue(&mut self, req: Request) -> io::Result<()> {
        // SAFETY: the caller guarantees buf is valid for len bytes until completion.
        let result = unsafe {
            match req.op {
                Op::Read => rw::pread(self.fd, req.buf, req.len, req.offset),
                Op::Write => rw::pwrite(self.fd, req.buf, req.len, req.offset),
            }
        };
        self.done.push(Completion {
            slot: req.slot,
            result,
        });
        Ok(())
    }

    fn reap(&mut self, _min: usize, done: &mut Vec<Completion>) -> io::Result<()> {
        done.append(&mut self.done);
        Ok(())
    }

    fn effective_depth(&self, _qd: u32) -> u32 {
        1
    }
}
