//! sched_getaffinity(2)/sched_setaffinity(2) and sched_getcpu(3): pin the calling thread
//! to the CPU it runs on; the CPUs the calling thread may run on.

/// The CPUs the calling thread may run on, in order; None where the mask cannot be read.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data, for which all-zero bytes are valid.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: fills `set`, a live cpu_set_t of `size` bytes, for this thread (0).
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } < 0 {
        return None;
    }
    // SAFETY: CPU_ISSET reads one bit of `set`; every index is below CPU_SETSIZE.
    Some(
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect(),
    )
}

/// The calling thread pinned to one CPU; its old affinity comes back on drop.
pub struct CpuPin(Option<libc::cpu_set_t>);

impl CpuPin {
    /// Pin the calling thread to the CPU it runs on now. Best effort: where the affinity
    /// cannot be read or set, nothing is pinned (and nothing is restored).
    pub fn current() -> CpuPin {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: cpu_set_t is plain data, for which all-zero bytes are valid.
        let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: fills `old`, a live cpu_set_t of `size` bytes, for this thread (0).
        if unsafe { libc::sched_getaffinity(0, size, &mut old) } < 0 {
            return CpuPin(None);
        }
        // SAFETY: sched_getcpu takes no arguments.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu < 0 {
            return CpuPin(None);
        }
        // SAFETY: as for `old`.
        let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: sets one bit of `one`; sched_getcpu's answer is below CPU_SETSIZE (a
        // larger index would panic on the bounds check, not write out of bounds).
        unsafe { libc::CPU_SET(cpu as usize, &mut one) };
        // SAFETY: reads `one`, a live cpu_set_t of `size` bytes, for this thread (0).
        if unsafe { libc::sched_setaffinity(0, size, &one) } < 0 {
            return CpuPin(None);
        }
        CpuPin(Some(old))
    }

    /// Whether the thread was pinned (false: its affinity could not be read or set).
    pub fn is_pinned(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for CpuPin {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            // SAFETY: restores the mask read in current(), for this thread (0).
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), old) };
        }
    }
}
