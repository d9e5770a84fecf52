//! A session's screen memory: a `memfd` the daemon maps and writes, and the keeper only
//! holds (see `docs/recovery.md`, "Screens"). It outlives a daemon that dies, so the next
//! daemon rebuilds the screen from it exactly: every byte the pump read is logged here
//! before it counts as read, with each resize at its place in the stream.
//!
//! Layout (little-endian; the file is sparse: only pages written cost memory):
//!
//! ```text
//! 0          header page: magic, version, flags (bit 0 LOST), active slot, staging word,
//!            then per slot: checkpoint length, commit word, cols, rows, scrollback
//! 4096       staging: the pump's read buffer (STAGE_BYTES)
//! 4096+64Ki  slot 0: [checkpoint][log records…]        (SLOT_BYTES)
//! …+S        slot 1: the same                            (SLOT_BYTES)
//! ```
//!
//! A slot is a checkpoint of the screen at some stream offset (empty: a fresh terminal of the
//! slot's size) followed by a log of what came after it. A log record is a `u32` header, then:
//! output (`len`, bit 31 clear) followed by `len` bytes, or a resize (bit 31 set) followed by
//! `cols: u16, rows: u16`. A slot's *commit word* packs the committed log length (low 32 bits)
//! and the number of output records ever committed (high 32 bits); it is published with one
//! release store after the record is written, so a daemon killed at any instant leaves a log
//! that ends at a record boundary.
//!
//! **Staging.** The pump `read`s the PTY straight into the staging area and publishes how
//! much it holds after every `read` (the staging word: that length, and the output-record
//! count it precedes). A chunk read but not yet logged (the pump logs a whole chunk, up to 64
//! KiB, at once) is therefore not lost with the daemon: the next one finds it staged — valid
//! only while no output record was committed since, so a chunk is never taken twice — and
//! replays it after the log.
//!
//! **The armed read.** That leaves the kernel's own window: a kill that lands while a `read`
//! runs. The kernel copies the bytes into the staging area and consumes them from the tty,
//! and the process dies on the way back to user space, before it says how many it got. So
//! before each `read` the pump *arms* it ([`Staging::arm`]): it asks the tty how much is
//! waiting (`FIONREAD`: `want`, at most what the buffer has room for), fills
//! `staging[filled .. filled + want]` with a *canary* (a splitmix64 stream from a fresh
//! seed), publishes the arm (seed, offset `filled`, `want`, and the output-record count of
//! the staging word) and only then `read`s exactly `want` bytes there. The arm is *current*
//! while its record count equals the active slot's commit count and its offset equals the
//! staged length (the staging word's length if that word is current, else 0: a new chunk);
//! a `read` that returned and was published moves the staged length past the offset, so its
//! arm goes stale by itself. A recovering daemon that finds a current arm regenerates the
//! canary and compares: the region equals it → the `read` copied nothing; otherwise it
//! copied `want` bytes, unless at least the last 8 bytes still equal the canary — then the
//! copy was cut short and it copied `want` minus that common suffix. Those bytes come after
//! the staged ones, in the same single output record (so, logged, they are never taken
//! twice). Why this is sound:
//!
//! - SIGKILL (and the OOM killer) take effect on the return to user space: a tty `read`
//!   either copies and returns, or copies nothing (it is not interrupted mid-copy; a
//!   non-blocking `read` with input waiting never sleeps).
//! - Only the daemon reads the master (the keeper holds a duplicate, never reads), so what
//!   `FIONREAD` reported is still there at the `read`, and the n_tty master read in
//!   non-canonical mode returns everything available up to `count`: with `count = want` it
//!   returns exactly `want`. It copies less only if a copy to user space faults part way
//!   (the rest then stays in the kernel, and is read by the next daemon — except, since
//!   Linux 5.12, the up to 64 bytes of the tty core's bounce buffer whose copy failed);
//!   writing the canary has just faulted those pages in, so that needs the pages reclaimed
//!   in between, and is remote.
//! - When `FIONREAD` says nothing is waiting and the slave side has not hung up, there is
//!   no `read` at all (the pump's drain ends as on `EAGAIN`: bytes not counted yet bring
//!   their own readiness event). After a hang-up (the readiness is for EOF/EIO) the `read`
//!   is armed for 1 byte: it still reports EOF/EIO, and bytes that arrived in between are
//!   taken one at a time (the next round asks `FIONREAD` again). A larger count
//!   there would make a short copy (fewer bytes arrived than asked) indistinguishable from a
//!   cut one within the last 8 bytes.
//! - The disarm (the arm word cleared) precedes the new canary and seed, and the arm word is
//!   published last, so a dead daemon never leaves a current arm with another arm's seed or
//!   canary.
//!
//! The residual risk is output that equals a random canary: a copied region whose last 8
//! bytes equal the canary's (2^-64: the cut is misplaced), a copy cut short whose last
//! copied bytes equal the canary's at their places (1 in 256 per byte: the cut is read that
//! many bytes early — behind a cut copy, itself remote), or, for `want` < 8, a whole copied
//! region equal to it (2^-8·want: the bytes are dropped — the race that arms a 1-byte read,
//! with a kill inside it, is the only common way to get there). On recovery everything is
//! treated as hostile: the file must be a sealed memfd of exactly [`FILE_BYTES`], and every
//! length, size and record is checked before use; anything out of bounds refuses the whole
//! store (the screen then starts empty).

use maxx_protocol::limits::{GRID_MAX_CELLS, MAX_SCROLLBACK_LINES, MIN_COLS};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const MAGIC: [u8; 8] = *b"MAXXSCR\x01";
const VERSION: u32 = 1;
const PAGE: usize = 4096;
/// The staging area: one pump read buffer.
pub const STAGE_BYTES: usize = 64 * 1024;
/// Where the slots start.
const SLOTS_AT: usize = PAGE + STAGE_BYTES;
/// One slot's room: its checkpoint and its log (virtual: only written pages are memory).
pub const SLOT_BYTES: usize = 64 * 1024 * 1024;
/// The whole file.
pub const FILE_BYTES: usize = SLOTS_AT + 2 * SLOT_BYTES;
/// The longest log a slot holds. Past it the screen can no longer be rebuilt (the store says
/// [`Store::lost`] and frees its pages) unless a checkpoint starts a new log first.
pub const LOG_MAX: usize = 32 * 1024 * 1024;
/// Record header flag: a resize.
const RESIZE: u32 = 1 << 31;

// Header offsets.
const OFF_VERSION: usize = 8;
const OFF_FLAGS: usize = 12;
const OFF_ACTIVE: usize = 16;
/// Staging word: bytes staged (low 32 bits), and the output-record count they follow.
const OFF_STAGED: usize = 24;
/// The armed read's canary seed (see "The armed read").
const OFF_ARM_SEED: usize = 96;
/// The arm word: output-record count (high 32 bits), offset (bits 16..32), `want` (low 16
/// bits; 0: disarmed).
const OFF_ARM: usize = 104;
/// The most a `read` is armed for (the tty hands out at most 4 KiB per `read`).
pub const ARM_MAX: usize = u16::MAX as usize;
const OFF_SLOTS: usize = 32;
const SLOT_DESC: usize = 32;
// Within a slot descriptor.
const D_CKPT_LEN: usize = 0;
/// The commit word: log length (low 32 bits), output records committed (high 32 bits).
const D_COMMIT: usize = 8;
const D_COLS: usize = 16;
const D_ROWS: usize = 18;
const D_SCROLLBACK: usize = 20;

const FLAG_LOST: u32 = 1;

/// One record of a recovered log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// Output the program wrote.
    Output(Vec<u8>),
    /// The terminal was resized here.
    Resize(u16, u16),
}

/// One record of the log a checkpoint starts ([`Store::checkpoint`]), borrowed: output in
/// up to two parts (a ring's halves), or a resize.
#[derive(Debug, Clone, Copy)]
pub enum Piece<'a> {
    /// Output the program wrote: the parts one after the other, as one record.
    Output([&'a [u8]; 2]),
    /// The terminal was resized here.
    Resize(u16, u16),
}

/// What a checkpoint's log starts with ([`Store::checkpoint`]).
pub enum Tail<'a> {
    /// These records.
    Pieces(&'a [Piece<'a>]),
    /// The active log's records from this place on, as they lie (the resizes right at it
    /// left out: they took effect before the checkpoint). On success the cursor is moved to
    /// the same place in the new log: its start.
    Log(&'a mut LogCursor),
}

/// A place in the active slot's log: the record at byte `pos` of the log, of whose output
/// the first `skip` bytes lie behind it. The grid's backlog is read from the log through one
/// ([`Store::read_log`], [`Store::advance`]) instead of being held a second time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogCursor {
    pos: usize,
    skip: usize,
}

/// What a store held when a new daemon opened it.
#[derive(Debug)]
pub struct Saved {
    /// The terminal's size where the checkpoint was taken (or at the start).
    pub cols: u16,
    pub rows: u16,
    /// The session's scrollback, in rows.
    pub scrollback: usize,
    /// The checkpoint (empty: a fresh terminal).
    pub checkpoint: Vec<u8>,
    /// Everything after it, in order.
    pub log: Vec<Record>,
}

/// The shared mapping of a store's file.
struct Mapping {
    base: *mut u8,
}

// SAFETY: the mapping lives until the last owner drops it; the regions are written by one
// owner each (the staging area by the pump, the rest under the model's drain lock).
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base` is the FILE_BYTES mapping made in `Store::map`.
        unsafe { libc::munmap(self.base.cast(), FILE_BYTES) };
    }
}

/// The pump's side of a store: its read buffer lives in the store, so a chunk it read and
/// has not logged yet survives the daemon (see the module's "Staging").
pub struct Staging {
    /// Keeps the mapping alive.
    _map: std::sync::Arc<Mapping>,
    /// The mapping's base, held here too: every `read` of the pump arms and publishes
    /// through it, and going through `Mapping` first was one more cache line a redraw.
    base: *mut u8,
    /// How far into the area chunks and armed reads reached since its pages were last given
    /// back ([`Staging::logged`]).
    reached: std::sync::atomic::AtomicUsize,
}

// SAFETY: as for `Mapping` (whose base this holds while keeping it alive): the staging area
// is written by its one pump only, the header words are atomics.
unsafe impl Send for Staging {}
unsafe impl Sync for Staging {}

/// The header page's words, read and written as atomics, for the two that map a store's file
/// (the store and its pump's `Staging`).
///
/// # Safety
/// `base` must be the start of a live `FILE_BYTES` mapping for as long as `self` lives.
unsafe trait Header {
    fn base(&self) -> *mut u8;

    fn atomic_u32(&self, at: usize) -> &AtomicU32 {
        assert!(at.is_multiple_of(4) && at + 4 <= PAGE);
        // SAFETY: aligned (the mapping is page-aligned), inside the header page, which lives
        // as long as `self` (the trait's contract).
        unsafe { &*(self.base().add(at) as *const AtomicU32) }
    }

    fn atomic_u64(&self, at: usize) -> &AtomicU64 {
        assert!(at.is_multiple_of(8) && at + 8 <= PAGE);
        // SAFETY: as above.
        unsafe { &*(self.base().add(at) as *const AtomicU64) }
    }
}

// SAFETY: `base` is the mapping `_map` keeps alive.
unsafe impl Header for Staging {
    fn base(&self) -> *mut u8 {
        self.base
    }
}

// SAFETY: `base` is the mapping `map` keeps alive.
unsafe impl Header for Store {
    fn base(&self) -> *mut u8 {
        self.base
    }
}

impl Staging {
    /// A new chunk starts: nothing staged.
    pub fn begin(&self) {
        self.atomic_u64(OFF_STAGED).store(0, Ordering::Release);
    }

    /// The read buffer.
    ///
    /// # Safety
    /// Only the one pump that owns this `Staging` may hold it, and not across a
    /// [`Staging::begin`] of another chunk.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn buf(&self) -> &mut [u8] {
        // SAFETY: the staging region, written by this pump only (the caller's contract).
        unsafe { std::slice::from_raw_parts_mut(self.base.add(PAGE), STAGE_BYTES) }
    }

    /// The output-record count of the active slot (high 32 bits of a word).
    fn records(&self) -> u64 {
        let active = self.atomic_u32(OFF_ACTIVE).load(Ordering::Acquire) as usize & 1;
        let commit = self
            .atomic_u64(OFF_SLOTS + active * SLOT_DESC + D_COMMIT)
            .load(Ordering::Acquire);
        commit & !0xffff_ffff
    }

    /// The first `len` bytes of the buffer are read output, to be logged after the output
    /// records committed so far (this also makes an arm at an offset below `len` stale).
    pub fn staged(&self, len: usize) {
        let word = self.records() | len.min(STAGE_BYTES) as u64;
        self.atomic_u64(OFF_STAGED).store(word, Ordering::Release);
    }

    /// Arm a `read` into `region`, the buffer's bytes `at .. at + region.len()` (see the
    /// module's "The armed read"): the region gets a fresh canary and the header says so.
    /// The `read` must ask for exactly `region.len()` bytes (1 ..= [`ARM_MAX`]), right
    /// after this, and its result be published with [`Staging::staged`].
    pub fn arm(&self, region: &mut [u8], at: usize) {
        let want = region.len();
        debug_assert!((1..=ARM_MAX).contains(&want) && at + want <= STAGE_BYTES);
        let arm = self.atomic_u64(OFF_ARM);
        // Disarmed first: no current arm can meet the canary or seed being replaced.
        arm.store(0, Ordering::Release);
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        let seed_word = self.atomic_u64(OFF_ARM_SEED);
        let seed = seed_word
            .load(Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        canary(seed, region);
        seed_word.store(seed, Ordering::Release);
        let word = self.records() | ((at as u64 & 0xffff) << 16) | want as u64;
        arm.store(word, Ordering::Release);
        self.reached.fetch_max(at + want, Ordering::Relaxed);
    }

    /// The chunk of `len` bytes read into the area was logged. Once chunks fit in one page
    /// again, the pages a larger one reached are given back: a burst's pages would otherwise
    /// stay memory for the session's life (a fleet of agent TUIs: ~20 KiB a session after
    /// its first burst of tool output), while a flood, whose chunks are large, keeps them
    /// instead of faulting them in again for every chunk. Nothing there is needed any more:
    /// the chunk is logged, so its staged copy and its reads' arms are stale.
    pub fn logged(&self, len: usize) {
        let reached = self.reached.load(Ordering::Relaxed).max(len);
        if len <= PAGE && reached > PAGE {
            let end = reached.min(STAGE_BYTES).next_multiple_of(PAGE);
            // SAFETY: pages inside the staging area of our own mapping; the pump, the
            // area's only user, holds no slice of it across this (see `buf`).
            unsafe {
                libc::madvise(
                    self.base.add(2 * PAGE).cast(),
                    end - PAGE,
                    libc::MADV_REMOVE,
                );
            }
            self.reached.store(len, Ordering::Relaxed);
        } else {
            self.reached.store(reached, Ordering::Relaxed);
        }
    }
}

/// Fill `out` with the canary of `seed`: a splitmix64 stream, little-endian words.
fn canary(seed: u64, out: &mut [u8]) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut words = out.chunks_exact_mut(8);
    for w in &mut words {
        w.copy_from_slice(&next().to_le_bytes());
    }
    let tail = words.into_remainder();
    let last = next().to_le_bytes();
    tail.copy_from_slice(&last[..tail.len()]);
}

/// How many bytes of an armed region the `read` copied: none if it still equals the canary,
/// all of it unless at least its last 8 bytes still do (a copy cut short), then the rest.
fn copied(region: &[u8], canary: &[u8]) -> usize {
    let same = region
        .iter()
        .rev()
        .zip(canary.iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    if same == region.len() {
        0
    } else if same >= 8 {
        region.len() - same
    } else {
        region.len()
    }
}

/// A mapped store, written by this daemon.
pub struct Store {
    fd: OwnedFd,
    map: std::sync::Arc<Mapping>,
    base: *mut u8,
    /// Output records committed, ever (wraps).
    seq: u32,
    /// The active slot and its committed log length (our own copy of the header's).
    active: usize,
    log_len: usize,
    ckpt_len: usize,
    lost: bool,
    /// [`LOG_MAX`] (tests lower it).
    log_max: usize,
}

// SAFETY: the slots and header are only written through `&mut self` (the staging area is
// the pump's, see `Staging`); the keeper never touches the bytes.
unsafe impl Send for Store {}
unsafe impl Sync for Store {}

fn valid_size(cols: u16, rows: u16, scrollback: usize) -> bool {
    cols >= MIN_COLS
        && rows >= 1
        && scrollback <= MAX_SCROLLBACK_LINES
        && (cols as u64) * (rows as u64 + scrollback as u64) <= GRID_MAX_CELLS
}

impl Store {
    /// A fresh store for a terminal of `cols` x `rows` with `scrollback` rows of history.
    pub fn create(cols: u16, rows: u16, scrollback: usize) -> io::Result<Store> {
        let name = c"maxx-screen";
        // SAFETY: a valid C string; the result is checked.
        let raw = unsafe {
            libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel just gave us this descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: plain syscalls on our own descriptor.
        unsafe {
            if libc::ftruncate(fd.as_raw_fd(), FILE_BYTES as libc::off_t) < 0 {
                return Err(io::Error::last_os_error());
            }
            // Its size can never change: a mapping of it can never fault past the end.
            let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
            if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let mut store = Store::map(fd)?;
        store.bytes_mut(0, 8).copy_from_slice(&MAGIC);
        store.put_u32(OFF_VERSION, VERSION);
        store.set_slot(0, cols, rows, scrollback);
        // The canaries' seeds start somewhere the program cannot guess (best effort).
        let mut seed = [0u8; 8];
        // SAFETY: writing at most 8 bytes into our own array.
        unsafe { libc::getrandom(seed.as_mut_ptr().cast(), 8, libc::GRND_NONBLOCK) };
        store.bytes_mut(OFF_ARM_SEED, 8).copy_from_slice(&seed);
        Ok(store)
    }

    fn map(fd: OwnedFd) -> io::Result<Store> {
        // SAFETY: a shared mapping of a file whose size is FILE_BYTES and sealed so.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                FILE_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Store {
            fd,
            map: std::sync::Arc::new(Mapping { base: base.cast() }),
            base: base.cast(),
            seq: 0,
            active: 0,
            log_len: 0,
            ckpt_len: 0,
            lost: false,
            log_max: LOG_MAX,
        })
    }

    /// Open a store handed over by the keeper, validating everything; what it holds.
    pub fn open(fd: OwnedFd) -> Result<(Store, Saved), &'static str> {
        // SAFETY: fstat and fcntl on a descriptor we own, into a zeroed struct.
        let (size, seals) = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd.as_raw_fd(), &mut st) < 0 {
                return Err("not a file");
            }
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                return Err("not a regular file");
            }
            (st.st_size, libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS))
        };
        if size != FILE_BYTES as libc::off_t {
            return Err("the wrong size");
        }
        let need = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
        if seals < 0 || seals & need != need {
            return Err("not sealed against resizing");
        }
        let mut store = Store::map(fd).map_err(|_| "cannot be mapped")?;
        if store.bytes(0, 8) != MAGIC || store.get_u32(OFF_VERSION) != VERSION {
            return Err("not a screen store of this version");
        }
        if store.flags().load(Ordering::Acquire) & FLAG_LOST != 0 {
            return Err("marked lost: the output outran it");
        }
        let active = store.atomic_u32(OFF_ACTIVE).load(Ordering::Acquire) as usize;
        if active > 1 {
            return Err("a bad active slot");
        }
        let d = OFF_SLOTS + active * SLOT_DESC;
        let ckpt_len = store.get_u64(d + D_CKPT_LEN);
        let commit = store.atomic_u64(d + D_COMMIT).load(Ordering::Acquire);
        let log_len = commit & 0xffff_ffff;
        let staged = store.atomic_u64(OFF_STAGED).load(Ordering::Acquire);
        let (cols, rows) = (store.get_u16(d + D_COLS), store.get_u16(d + D_ROWS));
        let scrollback = store.get_u32(d + D_SCROLLBACK) as usize;
        if ckpt_len > SLOT_BYTES as u64
            || log_len > LOG_MAX as u64
            || ckpt_len + log_len > SLOT_BYTES as u64
        {
            return Err("lengths out of bounds");
        }
        if !valid_size(cols, rows, scrollback) {
            return Err("a size out of bounds");
        }
        let (ckpt_len, log_len) = (ckpt_len as usize, log_len as usize);
        let slot = SLOTS_AT + active * SLOT_BYTES;
        let checkpoint = store.bytes(slot, ckpt_len).to_vec();
        let mut log = parse_log(store.bytes(slot + ckpt_len, log_len), scrollback)?;
        store.active = active;
        store.ckpt_len = ckpt_len;
        store.log_len = log_len;
        store.seq = (commit >> 32) as u32;
        // A chunk the dead daemon read and had not logged: it comes after the log, once.
        let staged_len = (staged & 0xffff_ffff) as usize;
        let mut chunk_len = 0;
        if staged >> 32 == commit >> 32 && staged_len > 0 && staged_len <= STAGE_BYTES {
            chunk_len = staged_len;
        }
        // And what a `read` it had armed copied after it (the module's "The armed read"):
        // an arm that is stale, or out of bounds, is ignored.
        let arm = store.atomic_u64(OFF_ARM).load(Ordering::Acquire);
        let seed = store.atomic_u64(OFF_ARM_SEED).load(Ordering::Acquire);
        let (at, want) = (((arm >> 16) & 0xffff) as usize, (arm & 0xffff) as usize);
        if arm >> 32 == commit >> 32 && at == chunk_len && want > 0 && at + want <= STAGE_BYTES {
            let mut expect = vec![0u8; want];
            canary(seed, &mut expect);
            chunk_len += copied(store.bytes(PAGE + at, want), &expect);
        }
        if chunk_len > 0 {
            let chunk = store.bytes(PAGE, chunk_len).to_vec();
            // Logged now, which also makes the staged copy and the arm stale.
            store.output(&chunk);
            log.push(Record::Output(chunk));
        }
        let saved = Saved {
            cols,
            rows,
            scrollback,
            checkpoint,
            log,
        };
        Ok((store, saved))
    }

    /// The pump's read buffer in this store.
    pub fn staging(&self) -> Staging {
        Staging {
            _map: self.map.clone(),
            base: self.base,
            reached: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The descriptor the keeper holds a duplicate of.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Whether the output outran the store: the screen can no longer be rebuilt from it.
    pub fn lost(&self) -> bool {
        self.lost
    }

    /// Whether the active slot starts with a checkpoint.
    pub fn has_checkpoint(&self) -> bool {
        self.ckpt_len > 0
    }

    /// The active slot's checkpoint length in bytes (0: none).
    pub fn checkpoint_len(&self) -> usize {
        self.ckpt_len
    }

    /// The committed log's length in bytes (what a checkpoint would shorten).
    pub fn log_len(&self) -> usize {
        self.log_len
    }

    /// A checkpoint of the screen at some stream offset, and the log of what came after it
    /// (`tail`): written into the other slot, which then becomes the active one with a single
    /// release store (a daemon killed at any instant leaves one whole slot); the old slot's
    /// pages are given back. False (nothing changed) if they do not fit.
    pub fn checkpoint(
        &mut self,
        cols: u16,
        rows: u16,
        scrollback: usize,
        blob: &[u8],
        tail: Tail,
    ) -> bool {
        // For a tail from the log: the rest of a record the cursor is inside of (where it
        // lies in the file, its length), then the log's bytes from `from` on, as they lie.
        let log = SLOTS_AT + self.active * SLOT_BYTES + self.ckpt_len;
        let mut from = self.log_len;
        let mut partial = (0, 0);
        let tail_len: usize = match &tail {
            Tail::Pieces(pieces) => pieces
                .iter()
                .map(|r| match r {
                    Piece::Output([a, b]) => 4 + a.len() + b.len(),
                    Piece::Resize(..) => 8,
                })
                .sum(),
            Tail::Log(cursor) => {
                let mut pos = cursor.pos;
                if cursor.skip > 0 {
                    let (data, len) = self.record_at(pos);
                    let skip = cursor.skip.min(data.len());
                    partial = (log + pos + 4 + skip, data.len() - skip);
                    pos += len;
                } else {
                    while pos < self.log_len && self.record_at(pos).0.is_empty() {
                        pos += 8;
                    }
                }
                from = pos.min(self.log_len);
                let head = if partial.1 == 0 { 0 } else { 4 + partial.1 };
                head + self.log_len - from
            }
        };
        if self.lost
            || blob.len() + tail_len > SLOT_BYTES
            || tail_len > self.log_max
            || !valid_size(cols, rows, scrollback)
        {
            return false;
        }
        let other = 1 - self.active;
        let slot = SLOTS_AT + other * SLOT_BYTES;
        self.bytes_mut(slot, blob.len()).copy_from_slice(blob);
        let mut at = slot + blob.len();
        let pieces = match tail {
            Tail::Pieces(pieces) => pieces,
            Tail::Log(cursor) => {
                let (part_at, part_len) = partial;
                if part_len > 0 {
                    self.bytes_mut(at, 4)
                        .copy_from_slice(&(part_len as u32).to_le_bytes());
                    self.copy_across(part_at, at + 4, part_len);
                    at += 4 + part_len;
                }
                self.copy_across(log + from, at, self.log_len - from);
                *cursor = LogCursor::default();
                &[]
            }
        };
        for r in pieces {
            match r {
                Piece::Output(parts) => {
                    let len = parts[0].len() + parts[1].len();
                    self.bytes_mut(at, 4)
                        .copy_from_slice(&(len as u32).to_le_bytes());
                    at += 4;
                    for p in parts {
                        self.bytes_mut(at, p.len()).copy_from_slice(p);
                        at += p.len();
                    }
                }
                Piece::Resize(c, r) => {
                    self.bytes_mut(at, 4).copy_from_slice(&RESIZE.to_le_bytes());
                    self.bytes_mut(at + 4, 2).copy_from_slice(&c.to_le_bytes());
                    self.bytes_mut(at + 6, 2).copy_from_slice(&r.to_le_bytes());
                    at += 8;
                }
            }
        }
        let d = OFF_SLOTS + other * SLOT_DESC;
        let ckpt = (blob.len() as u64).to_le_bytes();
        self.bytes_mut(d + D_CKPT_LEN, 8).copy_from_slice(&ckpt);
        self.set_slot(other, cols, rows, scrollback);
        let commit = (self.seq as u64) << 32 | tail_len as u64;
        self.atomic_u64(d + D_COMMIT)
            .store(commit, Ordering::Release);
        self.atomic_u32(OFF_ACTIVE)
            .store(other as u32, Ordering::Release);
        self.punch(SLOTS_AT + self.active * SLOT_BYTES, SLOT_BYTES);
        self.active = other;
        self.ckpt_len = blob.len();
        self.log_len = tail_len;
        true
    }

    /// Whether a record of `body` bytes fits in the log: logging one that does not loses the
    /// store ([`Self::lost`]).
    pub fn fits(&self, body: usize) -> bool {
        !self.lost && self.log_len + 4 + body <= self.log_max && body < RESIZE as usize
    }

    /// Where the log ends now: what is logged from here on comes after it.
    pub fn log_end(&self) -> LogCursor {
        LogCursor {
            pos: self.log_len,
            skip: 0,
        }
    }

    /// The record at byte `pos` of the active log (this daemon's own, or one [`Store::open`]
    /// checked): its output (empty for a resize) and its length with its header.
    fn record_at(&self, pos: usize) -> (&[u8], usize) {
        assert!(pos + 4 <= self.log_len, "a log cursor past the log");
        let log = SLOTS_AT + self.active * SLOT_BYTES + self.ckpt_len;
        let head = self.get_u32(log + pos);
        if head & RESIZE != 0 {
            return (&[], 8);
        }
        let len = head as usize;
        assert!(pos + 4 + len <= self.log_len, "a cut record in the log");
        (self.bytes(log + pos + 4, len), 4 + len)
    }

    /// Append to `out` up to `max` bytes of the output logged after `cursor` (resizes are
    /// not output).
    pub fn read_log(&self, cursor: LogCursor, max: usize, out: &mut Vec<u8>) {
        let LogCursor { mut pos, mut skip } = cursor;
        let mut want = max;
        while want > 0 && pos < self.log_len {
            let (data, len) = self.record_at(pos);
            let part = &data[skip.min(data.len())..];
            let take = part.len().min(want);
            out.extend_from_slice(&part[..take]);
            want -= take;
            pos += len;
            skip = 0;
        }
    }

    /// Move `cursor` past the next `n` bytes of output (and the resizes before them); it
    /// stops at the log's end.
    pub fn advance(&self, cursor: &mut LogCursor, mut n: usize) {
        while n > 0 && cursor.pos < self.log_len {
            let (data, len) = self.record_at(cursor.pos);
            let take = (data.len() - cursor.skip.min(data.len())).min(n);
            cursor.skip += take;
            n -= take;
            if cursor.skip >= data.len() {
                cursor.pos += len;
                cursor.skip = 0;
            }
        }
        debug_assert_eq!(n, 0, "advanced past the log's end");
    }

    /// Copy `len` bytes of the file from `from` to `to` (ranges that do not overlap).
    fn copy_across(&mut self, from: usize, to: usize, len: usize) {
        assert!(from + len <= FILE_BYTES && to + len <= FILE_BYTES);
        assert!(from + len <= to || to + len <= from, "overlapping ranges");
        // SAFETY: both ranges inside the mapping (checked) and apart (checked); `&mut self`
        // makes this the only writer in this process.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(from), self.base.add(to), len) };
    }

    /// Lower the log's bound (tests: reaching 32 MiB takes long).
    #[cfg(test)]
    pub fn set_log_max(&mut self, bytes: usize) {
        self.log_max = bytes;
    }

    /// Log output the pump read.
    pub fn output(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.append(bytes.len() as u32, bytes, 1);
    }

    /// Log a resize at this point of the output.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let mut body = [0u8; 4];
        body[..2].copy_from_slice(&cols.to_le_bytes());
        body[2..].copy_from_slice(&rows.to_le_bytes());
        self.append(RESIZE, &body, 0);
    }

    fn append(&mut self, header: u32, body: &[u8], records: u32) {
        if self.lost {
            return;
        }
        let len = 4 + body.len();
        if !self.fits(body.len()) {
            self.lose();
            return;
        }
        let at = SLOTS_AT + self.active * SLOT_BYTES + self.ckpt_len + self.log_len;
        self.bytes_mut(at, 4).copy_from_slice(&header.to_le_bytes());
        self.bytes_mut(at + 4, body.len()).copy_from_slice(body);
        self.log_len += len;
        self.seq = self.seq.wrapping_add(records);
        let d = OFF_SLOTS + self.active * SLOT_DESC;
        let commit = (self.seq as u64) << 32 | self.log_len as u64;
        // One store commits the record and makes a staged copy of it stale.
        self.atomic_u64(d + D_COMMIT)
            .store(commit, Ordering::Release);
    }

    /// The output outran the log: say so (a next daemon starts the screen empty) and give
    /// the memory back.
    fn lose(&mut self) {
        self.lost = true;
        self.flags().fetch_or(FLAG_LOST, Ordering::Release);
        self.punch(SLOTS_AT, 2 * SLOT_BYTES);
    }

    /// Free the pages of a byte range (they read as zeros again).
    fn punch(&self, at: usize, len: usize) {
        // SAFETY: a range inside our own mapping; MADV_REMOVE frees shmem pages.
        unsafe {
            libc::madvise(self.base.add(at).cast(), len, libc::MADV_REMOVE);
        }
    }

    fn set_slot(&mut self, slot: usize, cols: u16, rows: u16, scrollback: usize) {
        let d = OFF_SLOTS + slot * SLOT_DESC;
        self.bytes_mut(d + D_COLS, 2)
            .copy_from_slice(&cols.to_le_bytes());
        self.bytes_mut(d + D_ROWS, 2)
            .copy_from_slice(&rows.to_le_bytes());
        self.put_u32(d + D_SCROLLBACK, scrollback.min(u32::MAX as usize) as u32);
    }

    fn bytes(&self, at: usize, len: usize) -> &[u8] {
        assert!(at + len <= FILE_BYTES);
        // SAFETY: inside the mapping (checked), which lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.base.add(at), len) }
    }

    fn bytes_mut(&mut self, at: usize, len: usize) -> &mut [u8] {
        assert!(at + len <= FILE_BYTES);
        // SAFETY: as above, and `&mut self` makes it the only writer in this process.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(at), len) }
    }

    fn get_u16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.bytes(at, 2).try_into().unwrap_or_default())
    }

    fn get_u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes(at, 4).try_into().unwrap_or_default())
    }

    fn get_u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes(at, 8).try_into().unwrap_or_default())
    }

    fn put_u32(&mut self, at: usize, v: u32) {
        self.bytes_mut(at, 4).copy_from_slice(&v.to_le_bytes());
    }

    fn flags(&self) -> &AtomicU32 {
        self.atomic_u32(OFF_FLAGS)
    }
}

/// The records of a log, each checked.
fn parse_log(mut log: &[u8], scrollback: usize) -> Result<Vec<Record>, &'static str> {
    let mut out = Vec::new();
    while !log.is_empty() {
        let Some((head, rest)) = log.split_first_chunk::<4>() else {
            return Err("a cut record");
        };
        let head = u32::from_le_bytes(*head);
        let (len, record) = if head & RESIZE != 0 {
            if head != RESIZE || rest.len() < 4 {
                return Err("a bad resize record");
            }
            let cols = u16::from_le_bytes([rest[0], rest[1]]);
            let rows = u16::from_le_bytes([rest[2], rest[3]]);
            if !valid_size(cols, rows, scrollback) {
                return Err("a resize out of bounds");
            }
            (4, Record::Resize(cols, rows))
        } else {
            let len = head as usize;
            if len == 0 || len > rest.len() {
                return Err("a cut output record");
            }
            (len, Record::Output(rest[..len].to_vec()))
        };
        out.push(record);
        log = &rest[len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reopen(s: &Store) -> Result<(Store, Saved), &'static str> {
        Store::open(s.fd().try_clone_to_owned().unwrap())
    }

    #[test]
    fn what_is_logged_is_what_a_next_daemon_reads() {
        let mut s = Store::create(80, 24, 1000).unwrap();
        s.output(b"hello\r\n");
        s.resize(100, 30);
        s.output(b"\x1b[?1049h");
        let (mut again, saved) = reopen(&s).unwrap();
        assert_eq!((saved.cols, saved.rows, saved.scrollback), (80, 24, 1000));
        assert!(saved.checkpoint.is_empty());
        assert_eq!(
            saved.log,
            [
                Record::Output(b"hello\r\n".to_vec()),
                Record::Resize(100, 30),
                Record::Output(b"\x1b[?1049h".to_vec()),
            ]
        );
        // The next daemon appends where the last one stopped.
        again.output(b"more");
        let (_, saved) = reopen(&again).unwrap();
        assert_eq!(saved.log.len(), 4);
    }

    #[test]
    fn a_chunk_read_but_not_logged_is_replayed_once() {
        let mut s = Store::create(80, 24, 0).unwrap();
        s.output(b"logged ");
        let staging = s.staging();
        staging.begin();
        unsafe { staging.buf()[..6].copy_from_slice(b"staged") };
        staging.staged(6);
        // The daemon dies here: the next one finds the chunk after the log.
        let (mut next, saved) = reopen(&s).unwrap();
        assert_eq!(
            saved.log,
            [
                Record::Output(b"logged ".to_vec()),
                Record::Output(b"staged".to_vec())
            ]
        );
        // It logged it, so a third daemon does not take it twice.
        next.output(b" more");
        let (_, saved) = reopen(&next).unwrap();
        assert_eq!(saved.log.len(), 3);
        // A chunk that was logged after it was staged is not taken twice either.
        let mut s = Store::create(80, 24, 0).unwrap();
        let staging = s.staging();
        staging.begin();
        unsafe { staging.buf()[..3].copy_from_slice(b"abc") };
        staging.staged(3);
        s.output(b"abc");
        let (_, saved) = reopen(&s).unwrap();
        assert_eq!(saved.log, [Record::Output(b"abc".to_vec())]);
        // A resize logged while a chunk is staged keeps it staged (it came after).
        let mut s = Store::create(80, 24, 0).unwrap();
        let staging = s.staging();
        staging.begin();
        unsafe { staging.buf()[..1].copy_from_slice(b"x") };
        staging.staged(1);
        s.resize(90, 20);
        let (_, saved) = reopen(&s).unwrap();
        assert_eq!(
            saved.log,
            [Record::Resize(90, 20), Record::Output(b"x".to_vec())]
        );
    }

    /// A store with `logged` committed and `staged` staged, and a `read` of `want` bytes
    /// armed after it that copied the first `copied` bytes of `data` (then the daemon died).
    /// The seed is fixed: with a random one, a copied byte equals the canary's at its place
    /// one time in 256, and a cut there is (rightly) read one byte shorter.
    fn armed(staged: &[u8], want: usize, data: &[u8], copied: usize) -> Store {
        let mut s = Store::create(80, 24, 0).unwrap();
        poke(&s, OFF_ARM_SEED, &0x5eed_u64.to_le_bytes());
        s.output(b"logged ");
        let staging = s.staging();
        staging.begin();
        let buf = unsafe { staging.buf() };
        buf[..staged.len()].copy_from_slice(staged);
        if !staged.is_empty() {
            staging.staged(staged.len());
        }
        let at = staged.len();
        staging.arm(&mut buf[at..at + want], at);
        // The kernel's copy.
        buf[at..at + copied].copy_from_slice(&data[..copied]);
        s
    }

    fn outputs(saved: &Saved) -> Vec<Vec<u8>> {
        saved
            .log
            .iter()
            .filter_map(|r| match r {
                Record::Output(b) => Some(b.clone()),
                Record::Resize(..) => None,
            })
            .collect()
    }

    /// The pages a large chunk reached in the staging area are given back once a chunk fits
    /// in one page again, and only then: a flood's large chunks keep them.
    #[test]
    fn a_bursts_staging_pages_are_given_back_when_chunks_are_small_again() {
        let s = Store::create(80, 24, 0).unwrap();
        let staging = s.staging();
        let fill = |len: usize, byte: u8| {
            staging.begin();
            // SAFETY: this test is the staging area's only user.
            unsafe { staging.buf()[..len].fill(byte) };
            staging.staged(len);
            staging.logged(len);
        };
        // SAFETY: as above; read only between chunks.
        let area = || unsafe { staging.buf().to_vec() };
        fill(3 * PAGE, b'a');
        fill(3 * PAGE - 1, b'b');
        assert_eq!(
            area()[3 * PAGE - 1],
            b'a',
            "a large chunk after a large one"
        );
        fill(100, b'c');
        let now = area();
        assert_eq!(&now[..100], &[b'c'; 100][..]);
        assert!(
            now[100..PAGE].iter().all(|&b| b == b'b'),
            "the first page is kept"
        );
        assert!(
            now[PAGE..].iter().all(|&b| b == 0),
            "the others are given back"
        );
        // An armed read's reach counts too.
        staging.begin();
        // SAFETY: as above.
        let region = unsafe { &mut staging.buf()[..2 * PAGE] };
        staging.arm(region, 0);
        staging.staged(10);
        staging.logged(10);
        assert!(area()[PAGE..].iter().all(|&b| b == 0));
    }

    /// The backlog read from the log through a cursor is the output logged after it, in
    /// order, resizes left out, wherever the cursor is moved to.
    #[test]
    fn a_cursor_reads_the_output_logged_after_it() {
        let mut s = Store::create(80, 24, 0).unwrap();
        s.output(b"before");
        let start = s.log_end();
        s.output(b"hello");
        s.resize(100, 30);
        s.resize(90, 20);
        s.output(b" world");
        s.output(b"!");
        let all = b"hello world!";
        for skip in 0..=all.len() {
            for max in 0..=all.len() + 1 {
                let mut at = start;
                s.advance(&mut at, skip);
                let mut out = Vec::new();
                s.read_log(at, max, &mut out);
                let want = &all[skip..(skip + max).min(all.len())];
                assert_eq!(out, want, "skip {skip}, max {max}");
            }
        }
        // Past every byte: at the log's end, from where new output is read.
        let mut at = start;
        s.advance(&mut at, all.len());
        assert_eq!(at, s.log_end());
        s.output(b"new");
        let mut out = Vec::new();
        s.read_log(at, 100, &mut out);
        assert_eq!(out, b"new");
    }

    /// A checkpoint whose log is the active log from a cursor on: the rest of the record the
    /// cursor is inside of, then every record after it as it lies; the resizes right at a
    /// cursor between records are left out (they took effect before the checkpoint). A next
    /// daemon reads exactly that, and the cursor moves to the new log's start.
    #[test]
    fn a_checkpoint_keeps_the_log_after_its_cursor() {
        let logged = |s: &mut Store| {
            s.output(b"parsed");
            s.resize(100, 30);
            s.output(b"abcdef");
            s.resize(90, 20);
            s.output(b"tail");
        };
        // Inside a record: its rest, then everything after it.
        let mut s = Store::create(80, 24, 0).unwrap();
        logged(&mut s);
        let mut at = LogCursor::default();
        s.advance(&mut at, b"parsed".len() + 2);
        assert!(s.checkpoint(100, 30, 0, b"CKPT", Tail::Log(&mut at)));
        assert_eq!(at, LogCursor::default());
        let mut out = Vec::new();
        s.read_log(at, 100, &mut out);
        assert_eq!(out, b"cdeftail");
        let (_, saved) = reopen(&s).unwrap();
        assert_eq!((saved.cols, saved.rows), (100, 30));
        assert_eq!(saved.checkpoint, b"CKPT");
        assert_eq!(
            saved.log,
            [
                Record::Output(b"cdef".to_vec()),
                Record::Resize(90, 20),
                Record::Output(b"tail".to_vec()),
            ]
        );
        // Between records, at a resize: the resize is left out, the rest kept.
        let mut s = Store::create(80, 24, 0).unwrap();
        logged(&mut s);
        let mut at = LogCursor::default();
        s.advance(&mut at, b"parsed".len());
        assert!(s.checkpoint(100, 30, 0, b"CKPT", Tail::Log(&mut at)));
        let (_, saved) = reopen(&s).unwrap();
        assert_eq!(
            saved.log,
            [
                Record::Output(b"abcdef".to_vec()),
                Record::Resize(90, 20),
                Record::Output(b"tail".to_vec()),
            ]
        );
        // A second checkpoint, from the new log, at its end: an empty log.
        let mut end = LogCursor::default();
        s.advance(&mut end, b"abcdeftail".len());
        assert!(s.checkpoint(90, 20, 0, b"CKPT2", Tail::Log(&mut end)));
        let (_, saved) = reopen(&s).unwrap();
        assert_eq!(
            (saved.checkpoint.as_slice(), saved.log.len()),
            (&b"CKPT2"[..], 0)
        );
    }

    #[test]
    fn an_armed_read_that_copied_nothing_adds_nothing() {
        for staged in [&b""[..], b"staged"] {
            let s = armed(staged, 100, &[b'x'; 100], 0);
            let (_, saved) = reopen(&s).unwrap();
            let mut want = vec![b"logged ".to_vec()];
            if !staged.is_empty() {
                want.push(staged.to_vec());
            }
            assert_eq!(outputs(&saved), want);
        }
    }

    #[test]
    fn what_an_armed_read_copied_is_taken_once() {
        let data: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
        for (staged, want) in [(&b""[..], 4096), (b"staged", 4096), (b"s", 1), (b"", 5)] {
            let s = armed(staged, want, &data, want);
            let (mut next, saved) = reopen(&s).unwrap();
            let chunk = [staged, &data[..want]].concat();
            assert_eq!(outputs(&saved), [b"logged ".to_vec(), chunk.clone()]);
            // Logged by the second daemon: a third does not take it again.
            let (_, again) = reopen(&next).unwrap();
            assert_eq!(outputs(&again), [b"logged ".to_vec(), chunk.clone()]);
            next.output(b" more");
            let (_, again) = reopen(&next).unwrap();
            assert_eq!(outputs(&again).len(), 3);
        }
    }

    #[test]
    fn a_copy_cut_short_is_taken_up_to_where_it_stopped() {
        let data = vec![b'd'; 4096];
        for k in [1, 64, 1000, 4088] {
            let s = armed(b"staged", 4096, &data, k);
            let (_, saved) = reopen(&s).unwrap();
            let chunk = [&b"staged"[..], &data[..k]].concat();
            assert_eq!(outputs(&saved), [b"logged ".to_vec(), chunk], "cut at {k}");
        }
        // Fewer than 8 canary bytes left: the whole region counts as copied.
        let s = armed(b"", 4096, &data, 4090);
        let (_, saved) = reopen(&s).unwrap();
        assert_eq!(outputs(&saved)[1].len(), 4096);
    }

    #[test]
    fn a_stale_arm_is_ignored() {
        let data = vec![b'd'; 100];
        // The read returned and was published: the staged length passed the arm.
        let s = armed(b"staged", 100, &data, 100);
        s.staging().staged(6 + 100);
        let (_, saved) = reopen(&s).unwrap();
        let chunk = [&b"staged"[..], &data[..]].concat();
        assert_eq!(outputs(&saved), [b"logged ".to_vec(), chunk]);
        // An output record was committed since (the chunk was logged): neither the staged
        // bytes nor the armed ones are taken again.
        let mut s = armed(b"staged", 100, &data, 100);
        s.output(b"stagedddd");
        let (_, saved) = reopen(&s).unwrap();
        assert_eq!(
            outputs(&saved),
            [b"logged ".to_vec(), b"stagedddd".to_vec()]
        );
        // A new chunk began (nothing staged) after an arm at a later offset.
        let s = armed(b"staged", 100, &data, 100);
        s.staging().begin();
        let (_, saved) = reopen(&s).unwrap();
        assert_eq!(outputs(&saved), [b"logged ".to_vec()]);
        // Disarmed, then killed before the new arm was published.
        let s = armed(b"", 100, &data, 100);
        poke(&s, OFF_ARM, &0u64.to_le_bytes());
        let (_, saved) = reopen(&s).unwrap();
        assert_eq!(outputs(&saved), [b"logged ".to_vec()]);
    }

    #[test]
    fn a_hostile_arm_is_refused_without_a_panic() {
        let data = vec![b'd'; 100];
        let commit = |s: &Store| s.atomic_u64(OFF_SLOTS + D_COMMIT).load(Ordering::Acquire);
        let words = |s: &Store| -> Vec<u64> {
            let count = commit(s) & !0xffff_ffff;
            vec![
                count | (0xffff << 16) | 0xffff,
                count | (0xffff << 16) | 2,
                count | 0xffff,
                count | (6 << 16) | 0xffff,
                u64::MAX,
                count | (6 << 16) | 0x1_0000,
            ]
        };
        for i in 0..words(&Store::create(80, 24, 0).unwrap()).len() {
            let s = armed(b"staged", 100, &data, 100);
            let w = words(&s)[i];
            poke(&s, OFF_ARM, &w.to_le_bytes());
            let (_, saved) = reopen(&s).unwrap();
            let out = outputs(&saved);
            // Out of bounds (or not at the staged length): the staged bytes only.
            assert_eq!(out, [b"logged ".to_vec(), b"staged".to_vec()], "{w:#x}");
        }
        // A bad seed: the region does not match its canary, so it counts as copied (the
        // daemon that armed it never writes such a pair); bounded all the same.
        let s = armed(b"staged", 100, &data, 0);
        poke(&s, OFF_ARM_SEED, &7u64.to_le_bytes());
        let (_, saved) = reopen(&s).unwrap();
        assert_eq!(outputs(&saved)[1].len(), 106);
    }

    #[test]
    fn output_past_the_log_bound_is_lost_and_said_so() {
        let mut s = Store::create(80, 24, 0).unwrap();
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..(LOG_MAX / chunk.len()) {
            s.output(&chunk);
        }
        assert!(s.lost());
        assert_eq!(reopen(&s).err(), Some("marked lost: the output outran it"));
    }

    /// Write raw bytes into a store's file (as a hostile or broken writer could).
    fn poke(s: &Store, at: usize, bytes: &[u8]) {
        let n = unsafe {
            libc::pwrite(
                s.fd().as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                at as libc::off_t,
            )
        };
        assert_eq!(n as usize, bytes.len());
    }

    #[test]
    fn a_corrupt_store_is_refused_never_trusted() {
        let fresh = || {
            let mut s = Store::create(80, 24, 100).unwrap();
            s.output(b"abc");
            s
        };
        let d = OFF_SLOTS;
        type Corrupt = Box<dyn Fn(&Store)>;
        let cases: Vec<(&str, Corrupt)> = vec![
            ("magic", Box::new(|s| poke(s, 0, b"NOTMAXX!"))),
            (
                "version",
                Box::new(|s| poke(s, OFF_VERSION, &9u32.to_le_bytes())),
            ),
            (
                "active",
                Box::new(|s| poke(s, OFF_ACTIVE, &2u32.to_le_bytes())),
            ),
            (
                "log length",
                Box::new(move |s| poke(s, d + D_COMMIT, &(LOG_MAX as u64 + 1).to_le_bytes())),
            ),
            (
                "checkpoint length",
                Box::new(move |s| poke(s, d + D_CKPT_LEN, &u64::MAX.to_le_bytes())),
            ),
            (
                "cols",
                Box::new(move |s| poke(s, d + D_COLS, &1u16.to_le_bytes())),
            ),
            (
                "scrollback",
                Box::new(move |s| poke(s, d + D_SCROLLBACK, &u32::MAX.to_le_bytes())),
            ),
            (
                "a record longer than the log",
                Box::new(|s| poke(s, SLOTS_AT, &100u32.to_le_bytes())),
            ),
            (
                "a zero-length record",
                Box::new(|s| poke(s, SLOTS_AT, &0u32.to_le_bytes())),
            ),
            (
                "a resize record with junk",
                Box::new(|s| poke(s, SLOTS_AT, &(RESIZE | 3).to_le_bytes())),
            ),
        ];
        for (what, corrupt) in cases {
            let s = fresh();
            corrupt(&s);
            assert!(reopen(&s).is_err(), "{what} accepted");
        }
        // A huge resize record: refused by its bounds.
        let mut s = Store::create(80, 24, 100).unwrap();
        s.resize(60000, 60000);
        assert_eq!(reopen(&s).err(), Some("a resize out of bounds"));
        // Not a memfd of the right size, or not sealed.
        let file = tempfile_fd(FILE_BYTES);
        assert_eq!(Store::open(file).err(), Some("not sealed against resizing"));
        assert_eq!(Store::open(tempfile_fd(10)).err(), Some("the wrong size"));
        let dir = std::fs::File::open("/").unwrap();
        assert_eq!(Store::open(dir.into()).err(), Some("not a regular file"));
    }

    fn tempfile_fd(len: usize) -> OwnedFd {
        let raw = unsafe { libc::memfd_create(c"t".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0);
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        assert_eq!(unsafe { libc::ftruncate(raw, len as libc::off_t) }, 0);
        fd
    }
}
