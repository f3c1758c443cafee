//! SIGINT and SIGTERM as a flag: long-running commands check it and end through their
//! normal path (reports written, knobs put back, BPF programs detached). A second signal
//! while the first is being handled ends the process at once, as without a handler.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
        // SAFETY: signal(2) and raise(3) are async-signal-safe.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// Route SIGINT and SIGTERM to the flag returned. `restart`: system calls the signal
/// arrives in are restarted (SA_RESTART; what a command that only polls the flag between
/// steps wants); without it a blocking wait returns EINTR, so a loop waiting for events
/// sees the flag at once.
pub fn interrupt_flag(restart: bool) -> &'static AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches an atomic and async-signal-safe calls; the
        // struct is zeroed and then filled as sigaction(2) expects.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = if restart { libc::SA_RESTART } else { 0 };
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    &INTERRUPTED
}
