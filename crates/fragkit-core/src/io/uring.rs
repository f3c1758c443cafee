//! io_uring engine: at queue depths above 1 each request is submitted as it is queued, as
//! fio's io_uring engine does by default (iodepth_batch_submit=1): submitted in batches,
//! the block layer's plug merges neighbouring requests, so a 4 KiB QD32 sequential job
//! reached the device as 32x fewer, 32x larger requests (bench/fio-parity.sh, device
//! counts) and measured something other than what was asked. At QD1 the one request is
//! submitted together with the wait for it, one system call.
//! The job's buffers are registered once when the kernel allows it (fio: fixedbufs), so
//! O_DIRECT requests do not pin their pages one by one; no registered files, no polling.

use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, types, IoUring};

use super::engine::{Completion, Engine, Op, Request};

pub(crate) struct UringEngine {
    ring: IoUring,
    fd: RawFd,
    /// Submit each request as it is queued (queue depth above 1).
    submit_each: bool,
    outstanding: usize,
    /// The one registered buffer (index 0): start and length.
    fixed: Option<(usize, usize)>,
}

impl UringEngine {
    pub fn new(fd: RawFd, qd: u32) -> io::Result<UringEngine> {
        let entries = qd.max(1).next_power_of_two();
        // One thread submits and reaps: let the kernel run completion work when we enter
        // rather than interrupting us, and defer it to our wait (kernel 6.1+; fio's
        // io_uring engine sets the same three flags); fewer flags on older kernels.
        let ring = IoUring::builder()
            .setup_coop_taskrun()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(entries)
            .or_else(|_| {
                IoUring::builder()
                    .setup_coop_taskrun()
                    .setup_single_issuer()
                    .build(entries)
            })
            .or_else(|_| IoUring::new(entries))
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("io_uring setup failed ({e}); try --engine psync"),
                )
            })?;
        Ok(UringEngine {
            ring,
            fd,
            submit_each: qd > 1,
            outstanding: 0,
            fixed: None,
        })
    }
}

impl Engine for UringEngine {
    fn queue(&mut self, req: Request) -> io::Result<()> {
        let fd = types::Fd(self.fd);
        let addr = req.buf as usize;
        let inside = self
            .fixed
            .is_some_and(|(start, len)| addr >= start && addr + req.len <= start + len);
        let entry = match (req.op, inside) {
            (Op::Read, true) => opcode::ReadFixed::new(fd, req.buf, req.len as u32, 0)
                .offset(req.offset)
                .build(),
            (Op::Write, true) => opcode::WriteFixed::new(fd, req.buf, req.len as u32, 0)
                .offset(req.offset)
                .build(),
            (Op::Read, false) => opcode::Read::new(fd, req.buf, req.len as u32)
                .offset(req.offset)
                .build(),
            (Op::Write, false) => opcode::Write::new(fd, req.buf, req.len as u32)
                .offset(req.offset)
                .build(),
        }
        .user_data(req.slot as u64);
        // SAFETY: the caller keeps the buffer alive until the completion is reaped.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        if pushed.is_err() {
            // Never more in flight than the ring holds; submit and retry once.
            self.ring.submit()?;
            // SAFETY: as above.
            unsafe { self.ring.submission().push(&entry) }
                .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        }
        self.outstanding += 1;
        if self.submit_each {
            loop {
                match self.ring.submit() {
                    Ok(_) => break,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, done: &mut Vec<Completion>) -> io::Result<()> {
        let want = min.min(self.outstanding);
        loop {
            match self.ring.submit_and_wait(want) {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => break,
                Err(e) => return Err(e),
            }
        }
        for cqe in self.ring.completion() {
            let res = cqe.result();
            self.outstanding -= 1;
            done.push(Completion {
                slot: cqe.user_data() as usize,
                result: if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else {
                    Ok(res as usize)
                },
            });
        }
        Ok(())
    }

    fn effective_depth(&self, qd: u32) -> u32 {
        qd
    }

    fn register_buffers(&mut self, base: *mut u8, len: usize) -> bool {
        // One iovec covers every slot; the kernel caps one at 1 GiB, and without
        // CAP_IPC_LOCK it counts against RLIMIT_MEMLOCK: plain requests then.
        if self.fixed.is_some() || len == 0 || len > 1 << 30 {
            return false;
        }
        let iov = libc::iovec {
            iov_base: base.cast(),
            iov_len: len,
        };
        // SAFETY: the caller keeps the memory alive and in place while the engine lives.
        let ok = unsafe { self.ring.submitter().register_buffers(&[iov]) }.is_ok();
        if ok {
            self.fixed = Some((base as usize, len));
        }
        ok
    }
}
