//! sysconf(3): system constants the kernel decides at boot.

/// The page size in bytes (_SC_PAGESIZE); 4096 if sysconf does not answer.
pub fn page_size() -> u64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE) {
        Ok(Some(n)) if n > 0 => n as u64,
        _ => 4096,
    }
}
