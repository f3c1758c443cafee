//! BTRFS_IOC_TREE_SEARCH_V2: the items of one btrfs tree between two keys, as the kernel
//! finds them by walking the tree (which reads the nodes and leaves it passes into the
//! metadata cache, like any lookup).
//!
//! Layout and numbers from include/uapi/linux/btrfs.h and btrfs_tree.h.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// BTRFS_IOC_TREE_SEARCH_V2 = _IOWR(0x94, 17, struct btrfs_ioctl_search_args_v2), whose
/// fixed part is 112 bytes (the 104-byte search key and buf_size).
const BTRFS_IOC_TREE_SEARCH_V2: libc::c_ulong = 0xC070_9411;

/// BTRFS_CSUM_TREE_OBJECTID (btrfs_tree.h).
pub const CSUM_TREE: u64 = 7;
/// BTRFS_EXTENT_CSUM_OBJECTID = -10ULL: the objectid of every checksum item.
pub const EXTENT_CSUM_OBJECTID: u64 = -10i64 as u64;
/// BTRFS_EXTENT_CSUM_KEY: checksum items, keyed by the disk address they start at.
pub const EXTENT_CSUM_KEY: u32 = 128;

/// A btrfs key: items sort by (objectid, type, offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub objectid: u64,
    pub kind: u32,
    pub offset: u64,
}

impl Key {
    /// The smallest key after `self`, or None after the largest.
    fn next(self) -> Option<Key> {
        if let Some(offset) = self.offset.checked_add(1) {
            return Some(Key { offset, ..self });
        }
        if let Some(kind) = self.kind.checked_add(1).filter(|k| *k <= 255) {
            return Some(Key {
                kind,
                offset: 0,
                ..self
            });
        }
        Some(Key {
            objectid: self.objectid.checked_add(1)?,
            kind: 0,
            offset: 0,
        })
    }
}

/// struct btrfs_ioctl_search_key (104 bytes) followed by buf_size: the fixed part of
/// struct btrfs_ioctl_search_args_v2.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RawSearchHead {
    tree_id: u64,
    min_objectid: u64,
    max_objectid: u64,
    min_offset: u64,
    max_offset: u64,
    min_transid: u64,
    max_transid: u64,
    min_type: u32,
    max_type: u32,
    nr_items: u32,
    unused: u32,
    unused1: u64,
    unused2: u64,
    unused3: u64,
    unused4: u64,
    buf_size: u64,
}

/// struct btrfs_ioctl_search_header: 32 bytes before each item's data.
const ITEM_HEADER: usize = 32;
/// Result buffer per call: a leaf's worth of items at btrfs's largest node size (64 KiB).
const BUF_BYTES: usize = 64 << 10;

/// Call `each(key, data_len)` for every item of tree `tree_id` with `lo <= key <= hi`, in
/// key order. Needs CAP_SYS_ADMIN (the ioctl's own rule); `fd` is any file on the file
/// system.
pub fn search(
    fd: BorrowedFd<'_>,
    tree_id: u64,
    lo: Key,
    hi: Key,
    mut each: impl FnMut(Key, u32),
) -> io::Result<()> {
    let head_words = std::mem::size_of::<RawSearchHead>() / 8;
    // u64 words so the header and items are 8-byte aligned, as the kernel writes them.
    let mut buf = vec![0u64; head_words + BUF_BYTES / 8];
    let mut from = lo;
    loop {
        if from > hi {
            return Ok(());
        }
        let head = RawSearchHead {
            tree_id,
            min_objectid: from.objectid,
            max_objectid: hi.objectid,
            min_offset: from.offset,
            max_offset: hi.offset,
            min_transid: 0,
            max_transid: u64::MAX,
            min_type: from.kind,
            max_type: hi.kind,
            nr_items: u32::MAX,
            buf_size: BUF_BYTES as u64,
            ..RawSearchHead::default()
        };
        // SAFETY: buf is at least size_of::<RawSearchHead>() bytes and 8-byte aligned;
        // RawSearchHead is plain integers.
        unsafe { std::ptr::write(buf.as_mut_ptr().cast::<RawSearchHead>(), head) };
        // SAFETY: buf holds the 112-byte head and buf_size bytes after it, as the
        // ioctl's struct btrfs_ioctl_search_args_v2 requires.
        if unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                BTRFS_IOC_TREE_SEARCH_V2 as _,
                buf.as_mut_ptr(),
            )
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above; the kernel wrote the head back with nr_items filled in.
        let out = unsafe { std::ptr::read(buf.as_ptr().cast::<RawSearchHead>()) };
        if out.nr_items == 0 {
            return Ok(());
        }
        let bytes: Vec<u8> = buf[head_words..]
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect();
        let mut at = 0usize;
        let mut last = from;
        for _ in 0..out.nr_items {
            let Some(h) = bytes.get(at..at + ITEM_HEADER) else {
                break;
            };
            let word = |i: usize| u64::from_ne_bytes(h[i..i + 8].try_into().unwrap_or([0; 8]));
            let half = |i: usize| u32::from_ne_bytes(h[i..i + 4].try_into().unwrap_or([0; 4]));
            let key = Key {
                objectid: word(8),
                offset: word(16),
                kind: half(24),
            };
            let len = half(28);
            each(key, len);
            last = key;
            at += ITEM_HEADER + len as usize;
        }
        match last.next() {
            Some(k) => from = k,
            None => return Ok(()),
        }
    }
}

/// Walk the checksum items covering disk addresses [start, end) (btrfs logical
/// addresses, as FIEMAP reports them): what a read of those addresses looks up to verify
/// its data. Returns the number of items.
pub fn csum_items(fd: BorrowedFd<'_>, start: u64, end: u64) -> io::Result<u64> {
    let at = |offset| Key {
        objectid: EXTENT_CSUM_OBJECTID,
        kind: EXTENT_CSUM_KEY,
        offset,
    };
    let mut n = 0;
    search(
        fd,
        CSUM_TREE,
        at(start),
        at(end.saturating_sub(1)),
        |_, _| n += 1,
    )?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_is_the_kernels_size_and_the_request_code_says_so() {
        assert_eq!(std::mem::size_of::<RawSearchHead>(), 112);
        // _IOWR: direction 3 in bits 30-31, size in bits 16-29, type 0x94, number 17.
        let code: libc::c_ulong = (3 << 30) | (112 << 16) | (0x94 << 8) | 17;
        assert_eq!(code, BTRFS_IOC_TREE_SEARCH_V2);
    }

    #[test]
    fn next_key_carries_offset_then_type_then_objectid() {
        let k = |objectid, kind, offset| Key {
            objectid,
            kind,
            offset,
        };
        assert_eq!(k(1, 2, 3).next(), Some(k(1, 2, 4)));
        assert_eq!(k(1, 2, u64::MAX).next(), Some(k(1, 3, 0)));
        assert_eq!(k(1, 255, u64::MAX).next(), Some(k(2, 0, 0)));
        assert_eq!(k(u64::MAX, 255, u64::MAX).next(), None);
    }

    #[test]
    fn a_file_that_is_not_on_btrfs_is_refused_by_the_kernel() {
        let f = std::fs::File::open("/proc/self/status").unwrap();
        let e = csum_items(std::os::fd::AsFd::as_fd(&f), 0, 1 << 20).unwrap_err();
        assert!(e.raw_os_error().is_some(), "{e}");
    }
}
