//! What the controller's benchmarks share: a global allocator that counts the bytes live and
//! their high-water mark, so a benchmark can report the memory a pass needs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes allocated and not yet freed.
pub static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The most bytes live at once since it was last reset (a benchmark may store into it).
pub static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting into [`LIVE`] and [`PEAK`].
pub struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}
