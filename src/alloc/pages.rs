//! [`ZeroedBuf`]: a fixed-length buffer that starts as zeros, for large state that is read and
//! written at random positions (MTLinear's weight blocks, docs/mt_linear.md M.5).
//!
//! A buffer of at least [`HUGE_PAGE`] bytes is mapped from the kernel directly (Linux): fresh
//! pages are zero, so nothing writes the zeros, and the buffer asks for transparent huge pages
//! (`madvise(MADV_HUGEPAGE)`, honoured when the system's THP setting is `madvise` or `always`).
//! One 2 MiB page instead of 512 small ones means 512 times fewer page faults when a fresh model
//! first touches its state, and far fewer TLB misses on a pass that reads slots all over a state
//! of tens of MiB (Sentiment's 28 MiB: a pass about 15 % faster, docs/mt_linear.md M.5). The
//! advice is a hint: where huge pages are unavailable the buffer is an ordinary zeroed mapping.
//! Smaller buffers, other systems, and a failed mapping use the global allocator
//! (`alloc_zeroed`, i.e. `calloc`).

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Zeroable;

/// The size of a transparent huge page on x86-64 and most Linux targets; buffers from this
/// size up are mapped with the huge-page advice.
pub const HUGE_PAGE: usize = 2 << 20;

/// A zero-initialised `[T]` of fixed length (see the module documentation). Clones, compares,
/// dereferences and serialises as the slice it holds (the same bytes as a `Vec<T>`).
pub struct ZeroedBuf<T: Zeroable> {
    ptr: NonNull<T>,
    len: usize,
    owner: Owner,
}

/// Who frees the memory.
enum Owner {
    /// Nothing allocated (`len == 0`).
    Empty,
    /// The global allocator, with the layout of `[T; len]`.
    Heap,
    /// A private anonymous mapping of `len` bytes at `base` (Linux).
    #[cfg(target_os = "linux")]
    Mapped { base: NonNull<u8>, len: usize },
}

// SAFETY: the buffer owns its memory exclusively, as a `Vec<T>` does; no interior mutability.
unsafe impl<T: Zeroable + Send> Send for ZeroedBuf<T> {}
// SAFETY: shared references only read, as for a `Vec<T>`.
unsafe impl<T: Zeroable + Sync> Sync for ZeroedBuf<T> {}

impl<T: Zeroable> ZeroedBuf<T> {
    /// `len` zeros, or `None` when the memory cannot be had (the caller reports it). The size
    /// is the caller's to check against the machine (`Need`).
    pub fn zeros(len: usize) -> Option<Self> {
        let bytes = len.checked_mul(std::mem::size_of::<T>())?;
        if bytes == 0 {
            return Some(Self {
                ptr: NonNull::dangling(),
                len,
                owner: Owner::Empty,
            });
        }
        #[cfg(target_os = "linux")]
        if bytes >= HUGE_PAGE {
            if let Some(buf) = Self::mapped(len, bytes) {
                return Some(buf);
            }
        }
        let layout = std::alloc::Layout::array::<T>(len).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>())?;
        Some(Self {
            ptr,
            len,
            owner: Owner::Heap,
        })
    }

    /// A mapping of `bytes` (> 0) zero bytes whose huge-page-aligned part is advised to use
    /// huge pages. The mapping is one huge page longer than needed so that the data can start
    /// on a huge-page boundary; the slack is never touched, so it takes no memory.
    #[cfg(target_os = "linux")]
    fn mapped(len: usize, bytes: usize) -> Option<Self> {
        let map_len = bytes.checked_add(HUGE_PAGE)?;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing; the
        // result is checked for MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let base = NonNull::new(base.cast::<u8>())?;
        let offset = base.as_ptr().align_offset(HUGE_PAGE);
        // SAFETY: offset < HUGE_PAGE, inside the mapping of bytes + HUGE_PAGE bytes.
        let start = unsafe { base.as_ptr().add(offset) };
        // Only whole huge pages inside the data (a partly used one would hold up to 2 MiB that
        // the data never needs); the advice is a hint, its failure changes nothing.
        let advised = bytes / HUGE_PAGE * HUGE_PAGE;
        if advised > 0 {
            // SAFETY: [start, start + advised) lies inside the mapping.
            unsafe { libc::madvise(start.cast(), advised, libc::MADV_HUGEPAGE) };
        }
        Some(Self {
            // `start` is page-aligned, so aligned for any `T` of ours.
            ptr: NonNull::new(start.cast::<T>())?,
            len,
            owner: Owner::Mapped { base, len: map_len },
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A buffer holding a copy of `values`.
    pub fn from_slice(values: &[T]) -> Option<Self> {
        let mut buf = Self::zeros(values.len())?;
        buf.copy_from_slice(values);
        Some(buf)
    }
}

impl<T: Zeroable> Drop for ZeroedBuf<T> {
    fn drop(&mut self) {
        match self.owner {
            Owner::Empty => {}
            Owner::Heap => {
                let layout = std::alloc::Layout::array::<T>(self.len).expect("the layout it was allocated with");
                // SAFETY: allocated by the global allocator with this layout (`zeros`).
                unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
            }
            #[cfg(target_os = "linux")]
            Owner::Mapped { base, len } => {
                // SAFETY: the mapping made in `mapped`, unmapped once.
                unsafe { libc::munmap(base.as_ptr().cast(), len) };
            }
        }
    }
}

impl<T: Zeroable> Deref for ZeroedBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points to `len` initialised values owned by `self` (or is dangling
        // with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> DerefMut for ZeroedBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as for `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> Clone for ZeroedBuf<T> {
    /// A copy in a buffer of its own (aborts when the memory cannot be had, as `Vec::clone`).
    fn clone(&self) -> Self {
        Self::from_slice(self).unwrap_or_else(|| {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::array::<T>(self.len).unwrap_or(std::alloc::Layout::new::<T>()),
            )
        })
    }
}

impl<T: Zeroable + std::fmt::Debug> std::fmt::Debug for ZeroedBuf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Zeroable + PartialEq> PartialEq for ZeroedBuf<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Zeroable + Serialize> Serialize for ZeroedBuf<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de, T: Zeroable + Deserialize<'de>> Deserialize<'de> for ZeroedBuf<T> {
    /// Read as a `Vec<T>` (the same encoding), then copied into a buffer of its own.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let values = Vec::<T>::deserialize(deserializer)?;
        Self::from_slice(&values).ok_or_else(|| serde::de::Error::custom("out of memory for a state buffer"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_mapped_buffers_start_at_zero_and_behave_as_slices() {
        for len in [
            0usize,
            1,
            1000,
            HUGE_PAGE / 4 - 1,
            HUGE_PAGE / 4,
            3 * HUGE_PAGE / 4 + 17,
        ] {
            let mut a = ZeroedBuf::<f32>::zeros(len).unwrap();
            assert_eq!(a.len(), len);
            assert!(a.iter().all(|v| v.to_bits() == 0));
            if len > 0 {
                a[0] = 1.5;
                a[len - 1] = -2.0;
            }
            let b = a.clone();
            assert_eq!(a, b);
            assert_eq!(&*b, &*a);
            let bytes = bincode::serialize(&b).unwrap();
            assert_eq!(bytes, bincode::serialize(&b.to_vec()).unwrap());
            let c: ZeroedBuf<f32> = bincode::deserialize(&bytes).unwrap();
            assert_eq!(c, a);
            if len > 1 {
                a[1] = 7.0;
                assert_ne!(a, b); // the clone is a copy
            }
        }
        assert!(ZeroedBuf::<f64>::zeros(usize::MAX).is_none());
    }
}
