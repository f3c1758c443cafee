//! io_uring engine: requests go into the submission ring as they are queued and are
//! submitted in one io_uring_enter per reap, as fio's io_uring engine does by default
//! (no fixed buffers, no registered files, no polling).

use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, types, IoUring};

use super::engine::{Completion, Engine, Op, Request};

pub struct UringEngine {
    ring: IoUring,
    fd: RawFd,
    outstanding: usize,
}

impl UringEngine {
    pub fn new(fd: RawFd, qd: u32) -> io::Result<UringEngine> {
        let entries = qd.max(1).next_power_of_two();
        // One thread submits and reaps: let the kernel run completion work when we enter
        // rather than interrupting us (kernel 5.19+/6.0+); plain setup on older kernels.
        let ring = IoUring::builder()
            .setup_coop_taskrun()
            .setup_single_issuer()
            .build(entries)
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
            outstanding: 0,
        })
    }
}

impl Engine for UringEngine {
    fn queue(&mut self, req: Request) -> io::Result<()> {
        let fd = types::Fd(self.fd);
        let entry = match req.op {
            Op::Read => opcode::Read::new(fd, req.buf, req.len as u32)
                .offset(req.offset)
                .build(),
            Op::Write => opcode::Write::new(fd, req.buf, req.len as u32)
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
}
