//! Page-aligned I/O buffers: O_DIRECT needs the memory aligned to the logical block size;
//! 4096 covers every device here and is what the kernel's page pinning likes best.

use std::alloc::{self, Layout};

pub(crate) const BUFFER_ALIGN: usize = 4096;

/// A zero-initialised heap buffer aligned to [`BUFFER_ALIGN`].
pub struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer owns its allocation exclusively, like a Vec<u8>; shared access
// (&self) only reads.
unsafe impl Send for AlignedBuf {}
// SAFETY: every `&self` method only reads the buffer or its layout; writing needs
// `&mut self` (as_mut_slice, as_mut_ptr), so shared references never race.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize) -> AlignedBuf {
        let layout = Layout::from_size_align(len.max(1), BUFFER_ALIGN).expect("buffer layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, layout }
    }

    /// A buffer filled with bytes that vary per position, so no layer below can
    /// deduplicate or compress written data away.
    pub(crate) fn patterned(len: usize, seed: u8) -> AlignedBuf {
        let mut b = AlignedBuf::new(len);
        for (i, x) in b.as_mut_slice().iter_mut().enumerate() {
            *x = seed ^ (i as u8).wrapping_mul(31) ^ (i >> 12) as u8;
        }
        b
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for layout.size() initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { alloc::dealloc(self.ptr, self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_sized() {
        let b = AlignedBuf::patterned(3 * 4096 + 512, 7);
        assert_eq!(b.as_slice().as_ptr() as usize % BUFFER_ALIGN, 0);
        assert_eq!(b.len(), 3 * 4096 + 512);
        assert_ne!(b.as_slice()[1], b.as_slice()[2]);
    }
}
