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
//! (`alloc_zeroed`, i.e. `calloc`). The mappings of dropped buffers are kept (up to 64 MiB) for
//! the next copy of the same size (`pool`): copying a model, as every learn call on a fitted
//! model does, then writes pages that are already there.

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
        let buf = Self::adopt(base, map_len, len);
        // Only whole huge pages inside the data (a partly used one would hold up to 2 MiB that
        // the data never needs); the advice is a hint, its failure changes nothing.
        let advised = bytes / HUGE_PAGE * HUGE_PAGE;
        if advised > 0 {
            // SAFETY: [ptr, ptr + advised) lies inside the mapping (see `adopt`).
            unsafe { libc::madvise(buf.ptr.as_ptr().cast(), advised, libc::MADV_HUGEPAGE) };
        }
        Some(buf)
    }

    /// The buffer of `len` values in the mapping of `map_len` bytes at `base` (made by
    /// `mapped` for `len` values), starting at its first huge-page boundary.
    #[cfg(target_os = "linux")]
    fn adopt(base: NonNull<u8>, map_len: usize, len: usize) -> Self {
        let offset = base.as_ptr().align_offset(HUGE_PAGE);
        debug_assert!(offset < HUGE_PAGE && offset + len * std::mem::size_of::<T>() <= map_len);
        // SAFETY: offset < HUGE_PAGE, inside the mapping of bytes + HUGE_PAGE bytes.
        let start = unsafe { base.as_ptr().add(offset) };
        Self {
            // `start` is page-aligned, so aligned for any `T` of ours (and not null).
            ptr: NonNull::new(start.cast::<T>()).expect("inside a mapping"),
            len,
            owner: Owner::Mapped { base, len: map_len },
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// A buffer holding a copy of `values`. A large one reuses the mapping of a dropped buffer
    /// of the same size when the pool holds one (`pool`): its pages are already there, so the
    /// copy is the only write (a fresh mapping is zeroed by the kernel first).
    pub fn from_slice(values: &[T]) -> Option<Self> {
        #[cfg(target_os = "linux")]
        if let Some(bytes) = values.len().checked_mul(std::mem::size_of::<T>()) {
            if bytes >= HUGE_PAGE {
                if let Some((base, map_len)) = pool::take(bytes + HUGE_PAGE) {
                    let mut buf = Self::adopt(base, map_len, values.len());
                    buf.copy_from_slice(values);
                    return Some(buf);
                }
            }
        }
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
            Owner::Mapped { base, len } => pool::give(base, len),
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

/// Mappings of dropped buffers, kept for the next copy of the same size: a learn call on a
/// fitted model copies the model (for atomicity) and drops the old one, so without the pool
/// every call would fault in and zero fresh pages for the copy (Sentiment's 28 MiB: 5 ms a
/// call instead of 1). At most [`pool::CAP`] bytes are kept; beyond that a mapping is unmapped.
#[cfg(target_os = "linux")]
mod pool {
    use std::ptr::NonNull;
    use std::sync::Mutex;

    /// The most bytes of mappings the pool keeps (memory the process holds after the buffers
    /// are gone, as an allocator keeps freed memory).
    pub const CAP: usize = 64 << 20;

    /// `(base address, length)` of each kept mapping.
    static KEPT: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

    /// A kept mapping of exactly `map_len` bytes, if any.
    pub fn take(map_len: usize) -> Option<(NonNull<u8>, usize)> {
        let mut kept = KEPT.lock().ok()?;
        let i = kept.iter().position(|&(_, len)| len == map_len)?;
        let (base, len) = kept.swap_remove(i);
        Some((NonNull::new(base as *mut u8)?, len))
    }

    /// Keeps a mapping no buffer uses any more, or unmaps it when the pool is full.
    pub fn give(base: NonNull<u8>, map_len: usize) {
        if let Ok(mut kept) = KEPT.lock() {
            let held: usize = kept.iter().map(|&(_, len)| len).sum();
            if held + map_len <= CAP {
                kept.push((base.as_ptr() as usize, map_len));
                return;
            }
        }
        // SAFETY: a mapping made by `ZeroedBuf::mapped` that nothing uses any more (its
        // buffer is being dropped), unmapped once.
        unsafe { libc::munmap(base.as_ptr().cast(), map_len) };
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

    /// A copy reuses the mapping of a dropped buffer of its size (no fresh pages to zero), and
    /// holds exactly the copied values; a fresh buffer never comes from the pool (it is zero).
    #[cfg(target_os = "linux")]
    #[test]
    fn copies_reuse_dropped_mappings() {
        let len = HUGE_PAGE / 4 + 12_345; // a size no other test maps
        let mut a = ZeroedBuf::<f32>::zeros(len).unwrap();
        a.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32);
        let values = a.to_vec();
        let at = a.as_ptr();
        drop(a);
        let b = ZeroedBuf::<f32>::from_slice(&values).unwrap();
        assert_eq!(b.as_ptr(), at);
        assert_eq!(&*b, &values[..]);
        drop(b);
        let c = ZeroedBuf::<f32>::zeros(len).unwrap();
        assert!(c.iter().all(|v| v.to_bits() == 0));
    }
}
