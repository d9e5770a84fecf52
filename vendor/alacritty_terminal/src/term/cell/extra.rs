//! maxx patch 7: a cell's extra data behind a 4-byte handle.
//!
//! alacritty held a cell's rarely set attributes as `Option<Arc<CellExtra>>`: 8 bytes of
//! 8-byte alignment, which made a `Cell` 24 bytes (22 used). [`Extra`] is the same shared,
//! reference-counted, copy-on-write value named by a 32-bit index into a process-wide table,
//! so a `Cell` is 20 bytes: a 120-column row is 2,400 bytes, which jemalloc serves from its
//! 2,560-byte class instead of the 3,072-byte one (20 KiB less for a 120x40 screen).
//!
//! The table is two levels of atomic pointers: a static array of chunk pointers, each chunk
//! (made on first use, never freed) an array of pointers to the shared values. A handle reads
//! its value with two loads and no lock; only making a value and freeing its last handle
//! take the lock of the list of free indices. A value lives in a `Box` with its count of
//! handles, as in an `Arc`: the index is not reused before the last handle is dropped.

use std::fmt;
use std::num::NonZeroU32;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering, fence};
use std::sync::{Mutex, PoisonError};

use super::CellExtra;

/// Indices in a chunk (log 2).
const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
/// Chunks: 2^28 values at most, more than the memory of any machine this runs on holds
/// (each is a `CellExtra` and its count, 56 bytes or more, and the cells that share it).
const CHUNKS: usize = 1 << 16;

/// A value and its count of handles.
struct Shared {
    refs: AtomicUsize,
    extra: CellExtra,
}

/// Each chunk's first slot; a slot is a pointer to the value of the index it stands for.
static TABLE: [AtomicPtr<AtomicPtr<Shared>>; CHUNKS] =
    [const { AtomicPtr::new(ptr::null_mut()) }; CHUNKS];

/// Indices given back, and the next index never given (0 stays unused: the handle is a
/// `NonZeroU32`, so an `Option<Extra>` is 4 bytes too).
struct Free {
    free: Vec<u32>,
    next: u32,
}

static FREE: Mutex<Free> = Mutex::new(Free { free: Vec::new(), next: 1 });

/// The slot of index `id`, whose chunk exists.
#[inline]
fn slot(id: u32) -> &'static AtomicPtr<Shared> {
    let chunk = TABLE[(id >> CHUNK_BITS) as usize].load(Ordering::Acquire);
    debug_assert!(!chunk.is_null());
    // SAFETY: a chunk is made (below, in `Extra::new`) before the first handle of an index in
    // it exists, is `CHUNK` slots long and is never freed; the handle that asks was made after
    // it, and reached this thread by a channel or a lock that orders the two.
    unsafe { &*chunk.add(id as usize & (CHUNK - 1)) }
}

/// A shared [`CellExtra`] in 4 bytes: what `Arc<CellExtra>` was to a cell (clones share the
/// value; [`Extra::make_mut`] copies it first where it is shared).
pub struct Extra(NonZeroU32);

impl Extra {
    /// A new value with one handle.
    pub fn new(extra: CellExtra) -> Extra {
        let shared = Box::into_raw(Box::new(Shared { refs: AtomicUsize::new(1), extra }));
        let id = {
            let mut free = FREE.lock().unwrap_or_else(PoisonError::into_inner);
            match free.free.pop() {
                Some(id) => id,
                None => {
                    let id = free.next;
                    let chunk = &TABLE
                        .get((id >> CHUNK_BITS) as usize)
                        .expect("more than 2^28 cells' extra data at once");
                    if chunk.load(Ordering::Relaxed).is_null() {
                        let slots: Box<[AtomicPtr<Shared>]> =
                            (0..CHUNK).map(|_| AtomicPtr::new(ptr::null_mut())).collect();
                        chunk.store(Box::leak(slots).as_mut_ptr(), Ordering::Release);
                    }
                    free.next += 1;
                    id
                },
            }
        };
        slot(id).store(shared, Ordering::Release);
        Extra(NonZeroU32::new(id).expect("index 0 is never given"))
    }

    #[inline]
    fn shared(&self) -> &Shared {
        // SAFETY: the slot of a live handle points to its value until the last handle is
        // dropped, which is not this one.
        unsafe { &*slot(self.0.get()).load(Ordering::Acquire) }
    }

    /// The index naming this value: two handles with the same one share it.
    #[inline]
    pub fn id(&self) -> u32 {
        self.0.get()
    }

    /// The value, to change: copied first if another handle shares it (as `Arc::make_mut`).
    pub fn make_mut(this: &mut Extra) -> &mut CellExtra {
        // Acquire: the writes of handles dropped on other threads happen before ours.
        if this.shared().refs.load(Ordering::Acquire) != 1 {
            *this = Extra::new(this.shared().extra.clone());
        }
        let shared = slot(this.0.get()).load(Ordering::Acquire);
        // SAFETY: this is the only handle (a count of 1, and `&mut` to it: no clone can be
        // made meanwhile), so no one else reads the value.
        unsafe { &mut (*shared).extra }
    }
}

impl std::ops::Deref for Extra {
    type Target = CellExtra;

    #[inline]
    fn deref(&self) -> &CellExtra {
        &self.shared().extra
    }
}

impl Clone for Extra {
    #[inline]
    fn clone(&self) -> Extra {
        // Relaxed, as `Arc::clone`: the new handle is made from a live one.
        if self.shared().refs.fetch_add(1, Ordering::Relaxed) > isize::MAX as usize {
            std::process::abort();
        }
        Extra(self.0)
    }
}

impl Drop for Extra {
    fn drop(&mut self) {
        let id = self.0.get();
        let shared = slot(id).load(Ordering::Acquire);
        // SAFETY: this handle is live until the end of this function.
        if unsafe { (*shared).refs.fetch_sub(1, Ordering::Release) } != 1 {
            return;
        }
        // As `Arc`'s drop: every other handle's use of the value happens before its free.
        fence(Ordering::Acquire);
        slot(id).store(ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: the last handle: no one else can reach the value, made by `Box::into_raw`.
        drop(unsafe { Box::from_raw(shared) });
        FREE.lock().unwrap_or_else(PoisonError::into_inner).free.push(id);
    }
}

impl Default for Extra {
    fn default() -> Extra {
        Extra::new(CellExtra::default())
    }
}

impl PartialEq for Extra {
    fn eq(&self, other: &Extra) -> bool {
        self.0 == other.0 || **self == **other
    }
}

impl Eq for Extra {}

impl fmt::Debug for Extra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Extra {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Extra {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Extra, D::Error> {
        CellExtra::deserialize(deserializer).map(Extra::new)
    }
}
