//! SIGINT and SIGTERM. Long-running commands that can stop cleanly take them as a flag
//! ([`interrupt_flag`]) and end through their normal path (reports written, knobs put back,
//! BPF programs detached); a second signal ends the process at once. Whatever a command
//! changed on the system for its run and registered here ([`undo_on_signal_write`],
//! [`undo_on_signal_ioctl`]: sysfs knobs, xfs's reserve pool) is put back from the signal
//! handler before the process ends by a signal, with async-signal-safe calls only (open,
//! write, ioctl, close). SIGKILL cannot be caught: after it the knobs stay as they were set.

use std::ffi::CString;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU8, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The signal that set INTERRUPTED (0: none yet).
static FIRST_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Which handler is installed: none, the one that undoes and ends the process, or the one
/// that sets the flag first.
static MODE: AtomicU8 = AtomicU8::new(NONE);
const NONE: u8 = 0;
const FATAL: u8 = 1;
const GRACEFUL: u8 = 2;

/// A change to undo from the signal handler.
enum Undo {
    /// Write `value` to the file at `path` (a sysfs knob's old value).
    Write { path: CString, value: Vec<u8> },
    /// ioctl(fd, request, arg) with the argument's bytes (the fd stays open meanwhile).
    Ioctl {
        fd: RawFd,
        request: libc::c_ulong,
        arg: std::cell::UnsafeCell<Vec<u8>>,
    },
}

/// More than any run holds at once (one or two knobs per file system).
const SLOTS: usize = 64;
static UNDO: [AtomicPtr<Undo>; SLOTS] = [const { AtomicPtr::new(null_mut()) }; SLOTS];

/// A registered undo; dropping it (once the change was put back the normal way)
/// unregisters it. The record itself is never freed: a handler running on another thread
/// may still be reading it, and there are a few per run.
pub(crate) struct UndoGuard(usize);

impl Drop for UndoGuard {
    fn drop(&mut self) {
        UNDO[self.0].store(null_mut(), Ordering::SeqCst);
    }
}

fn register(u: Undo) -> Option<UndoGuard> {
    if MODE
        .compare_exchange(NONE, FATAL, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        install(true);
    }
    let p = Box::into_raw(Box::new(u));
    for (i, slot) in UNDO.iter().enumerate() {
        if slot
            .compare_exchange(null_mut(), p, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return Some(UndoGuard(i));
        }
    }
    // SAFETY: `p` came from Box::into_raw above and no slot holds it.
    drop(unsafe { Box::from_raw(p) });
    None
}

/// If a signal ends the process, write `value` to `path` first.
pub(crate) fn undo_on_signal_write(path: &Path, value: &str) -> Option<UndoGuard> {
    let path = CString::new(path.as_os_str().as_bytes()).ok()?;
    register(Undo::Write {
        path,
        value: value.as_bytes().to_vec(),
    })
}

/// If a signal ends the process, call ioctl(fd, request, arg) first; `fd` must stay open
/// until the guard is dropped.
pub(crate) fn undo_on_signal_ioctl(
    fd: RawFd,
    request: libc::c_ulong,
    arg: Vec<u8>,
) -> Option<UndoGuard> {
    register(Undo::Ioctl {
        fd,
        request,
        arg: std::cell::UnsafeCell::new(arg),
    })
}

/// Run every registered undo once. Async-signal-safe: atomics, open, write, ioctl, close.
fn run_undo() {
    for slot in &UNDO {
        let p = slot.swap(null_mut(), Ordering::SeqCst);
        if p.is_null() {
            continue;
        }
        // SAFETY: records are never freed (UndoGuard); the swap gives this handler the
        // only use of it, and the calls take pointers into it that live as long.
        unsafe {
            match &*p {
                Undo::Write { path, value } => {
                    let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                    if fd >= 0 {
                        libc::write(fd, value.as_ptr().cast(), value.len());
                        libc::close(fd);
                    }
                }
                Undo::Ioctl { fd, request, arg } => {
                    libc::ioctl(*fd, *request as _, (*arg.get()).as_mut_ptr());
                }
            }
        }
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    if MODE.load(Ordering::SeqCst) == GRACEFUL && !INTERRUPTED.swap(true, Ordering::SeqCst) {
        FIRST_SIGNAL.store(sig, Ordering::SeqCst);
        return;
    }
    run_undo();
    // SAFETY: signal(2) and raise(3) are async-signal-safe: end as the signal would have.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

fn install(restart: bool) {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches atomics and async-signal-safe calls; the
        // struct is zeroed and then filled as sigaction(2) expects.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = if restart { libc::SA_RESTART } else { 0 };
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Whether SIGINT or SIGTERM arrived since [`interrupt_flag`] routed them to the flag
/// (false when nothing did): what a loop deep in a command checks between its steps.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Which signal set the flag (SIGINT or SIGTERM), if one did.
pub fn first_signal() -> Option<i32> {
    match FIRST_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// What a command stopped by [`interrupted`] says.
pub const INTERRUPTED_MESSAGE: &str = "interrupted by SIGINT or SIGTERM";

/// Route SIGINT and SIGTERM to the flag returned. `restart`: system calls the signal
/// arrives in are restarted (SA_RESTART; what a command that only polls the flag between
/// steps wants); without it a blocking wait returns EINTR, so a loop waiting for events
/// sees the flag at once.
pub fn interrupt_flag(restart: bool) -> &'static AtomicBool {
    MODE.store(GRACEFUL, Ordering::SeqCst);
    install(restart);
    &INTERRUPTED
}
