//! The JavaScript heap of one run, bounded here rather than by QuickJS's own limit, so that the
//! run knows when it was the limit that failed an allocation.
//!
//! QuickJS reports an allocation it cannot make by throwing an `InternalError("out of memory")`,
//! but that error is itself an allocation: at the limit it cannot be made, and the script's
//! promise is rejected with `null` instead. So the allocator keeps the count, refuses what would
//! pass the limit, and records that it did; the run then names the failure as out of memory
//! whatever the rejection carries.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rquickjs::allocator::{Allocator, RustAllocator};

/// An allocator for one runtime that refuses to hold more than `limit` bytes.
pub(super) struct BoundedHeap {
    used: usize,
    limit: usize,
    refused: Arc<AtomicBool>,
}

impl BoundedHeap {
    /// A heap of at most `limit` bytes, and the flag it raises when it refuses an allocation.
    pub(super) fn new(limit: usize) -> (Self, Arc<AtomicBool>) {
        let refused = Arc::new(AtomicBool::new(false));
        let heap = BoundedHeap {
            used: 0,
            limit,
            refused: Arc::clone(&refused),
        };
        (heap, refused)
    }

    /// Whether `more` bytes on top of `kept` fit; raises the flag when not.
    fn admits(&self, kept: usize, more: usize) -> bool {
        let fits = kept
            .checked_add(more)
            .is_some_and(|total| total <= self.limit);
        if !fits {
            self.refused.store(true, Ordering::Relaxed);
        }
        fits
    }

    fn count(&mut self, ptr: *mut u8) -> *mut u8 {
        if !ptr.is_null() {
            // SAFETY: `ptr` was just returned by `RustAllocator`.
            self.used += unsafe { RustAllocator::usable_size(ptr) };
        }
        ptr
    }
}

// SAFETY: every call goes to `RustAllocator`, which upholds the contract; this only counts the
// usable sizes it reports and returns null (which the contract allows) for what would pass the
// limit.
unsafe impl Allocator for BoundedHeap {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        if !self.admits(self.used, size) {
            return std::ptr::null_mut();
        }
        let ptr = RustAllocator.alloc(size);
        self.count(ptr)
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        let Some(bytes) = count.checked_mul(size) else {
            return std::ptr::null_mut();
        };
        if !self.admits(self.used, bytes) {
            return std::ptr::null_mut();
        }
        let ptr = RustAllocator.calloc(count, size);
        self.count(ptr)
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        // SAFETY: the caller passes a pointer this allocator returned, so `RustAllocator`'s.
        unsafe {
            self.used = self.used.saturating_sub(RustAllocator::usable_size(ptr));
            RustAllocator.dealloc(ptr);
        }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        if ptr.is_null() {
            return self.alloc(new_size);
        }
        // SAFETY: the caller passes a pointer this allocator returned, so `RustAllocator`'s.
        let old = unsafe { RustAllocator::usable_size(ptr) };
        if new_size > old && !self.admits(self.used - old.min(self.used), new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: as above; on failure the old block is left as it was, still counted.
        let moved = unsafe { RustAllocator.realloc(ptr, new_size) };
        if !moved.is_null() {
            self.used = self.used.saturating_sub(old);
        }
        self.count(moved)
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        // SAFETY: the caller passes a pointer this allocator returned, so `RustAllocator`'s.
        unsafe { RustAllocator::usable_size(ptr) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_refuses_past_the_limit_and_says_so() {
        let (mut heap, refused) = BoundedHeap::new(4096);
        let a = heap.alloc(1024);
        assert!(!a.is_null());
        assert!(heap.alloc(8192).is_null());
        assert!(refused.load(Ordering::Relaxed));
        // SAFETY: `a` came from `heap`.
        let grown = unsafe { heap.realloc(a, 2048) };
        assert!(!grown.is_null());
        // SAFETY: `grown` came from `heap`.
        unsafe { heap.dealloc(grown) };
        assert_eq!(heap.used, 0);
    }
}
