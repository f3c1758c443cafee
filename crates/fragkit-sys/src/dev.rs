//! Device numbers in their three encodings: userspace dev_t (glibc major/minor), the
//! kernel's internal dev_t (BPF sees this), and new_encode_dev() (GETFSMAP's fmr_device).

/// (major, minor) of a userspace dev_t (st_dev, st_rdev).
pub fn split(dev: u64) -> (u32, u32) {
    (libc::major(dev), libc::minor(dev))
}

/// A userspace dev_t from (major, minor) (glibc makedev), as statx's stx_dev_major and
/// stx_dev_minor give them.
pub fn makedev(major: u32, minor: u32) -> u64 {
    libc::makedev(major, minor)
}

/// include/linux/kdev_t.h: the kernel's dev_t is major << 20 | minor.
pub fn kernel_dev_parts(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & ((1 << 20) - 1))
}

/// A kernel dev_t from (major, minor).
pub fn kernel_dev_from(major: u32, minor: u32) -> u32 {
    (major << 20) | minor
}

/// A userspace st_dev as the kernel's internal dev_t.
pub fn kernel_dev(st_dev: u64) -> u32 {
    let (major, minor) = split(st_dev);
    kernel_dev_from(major, minor)
}

/// The kernel's new_encode_dev(): how fmr_device names a block device.
pub fn encode_dev(dev: u64) -> u32 {
    let (major, minor) = split(dev);
    (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)
}

/// Name of the block device behind a userspace dev_t ("loop3"), from /sys/dev/block.
pub(crate) fn block_name(dev: u64) -> Option<String> {
    let (major, minor) = split(dev);
    let link = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_agree() {
        let dev = libc::makedev(259, 300);
        assert_eq!(split(dev), (259, 300));
        assert_eq!(makedev(259, 300), dev);
        assert_eq!(kernel_dev_parts(kernel_dev(dev)), (259, 300));
        // new_encode_dev: minor's low byte, major, minor's high bits above bit 20.
        assert_eq!(
            encode_dev(dev),
            (300 & 0xff) | (259 << 8) | ((300 & !0xff) << 12)
        );
    }
}
