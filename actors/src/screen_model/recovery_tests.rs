//! A screen rebuilt by a new daemon from the memory a dead one left equals the screen the
//! dead one had: the differential check of `store.rs` + [`ScreenModel::recover`].

use super::backlog::Backlog;
use super::store::Store;
use super::tests::{fingerprint, model, step, Step};
use super::*;
use proptest::prelude::*;

/// The first line where two fingerprints differ (they are long).
fn same(a: &str, b: &str, what: &str) -> Result<(), TestCaseError> {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            let at = x.chars().zip(y.chars()).take_while(|(a, b)| a == b).count();
            let cut = |s: &str| {
                s.chars()
                    .skip(at.saturating_sub(60))
                    .take(200)
                    .collect::<String>()
            };
            return Err(TestCaseError::fail(format!(
                "{what}: line {i} differs:\n rebuilt {}\n    live {}",
                cut(x),
                cut(y)
            )));
        }
    }
    prop_assert_eq!(a.lines().count(), b.lines().count(), "{}", what);
    Ok(())
}

/// The screen memory of `m` as a daemon killed now would leave it: a copy, as the next
/// daemon must not share a file the live model (and the grid workers it may still have
/// queued) go on writing — a backlog is read from the log, so a checkpoint another model
/// wrote into a shared file would move it away under the reader.
fn left_by(m: &ScreenModel) -> std::os::fd::OwnedFd {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let from = m.screen_fd().expect("a screen memory");
    // Every write into it is made under this lock: the copy is of one instant.
    let _writes = lock(&m.drain);
    // SAFETY: plain syscalls on descriptors this function owns; every result is checked.
    unsafe {
        let raw = libc::memfd_create(
            c"copy".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        );
        assert!(raw >= 0);
        let to = OwnedFd::from_raw_fd(raw);
        assert_eq!(libc::ftruncate(raw, store::FILE_BYTES as libc::off_t), 0);
        // Only the pages written (the file is sparse: 128 MiB of address space).
        let mut at: libc::off_t = 0;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let data = libc::lseek(from.as_raw_fd(), at, libc::SEEK_DATA);
            if data < 0 {
                break;
            }
            let hole = libc::lseek(from.as_raw_fd(), data, libc::SEEK_HOLE);
            let mut off = data;
            while off < hole {
                let n = ((hole - off) as usize).min(buf.len());
                assert_eq!(
                    libc::pread(from.as_raw_fd(), buf.as_mut_ptr().cast(), n, off),
                    n as isize
                );
                assert_eq!(libc::pwrite(raw, buf.as_ptr().cast(), n, off), n as isize);
                off += n as libc::off_t;
            }
            at = hole;
        }
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        assert_eq!(libc::fcntl(raw, libc::F_ADD_SEALS, seals), 0);
        to
    }
}

/// `steps` through a model that logs into a store, then a second model (another size and
/// scrollback, as a new daemon's record might say) rebuilt from that store: both read the
/// same, and go on reading the same after more output.
fn recovered_equals_original(steps: &[Step], checkpoint_at: usize) -> Result<bool, TestCaseError> {
    recovered_parsed_as(steps, checkpoint_at, checkpoint_at < usize::MAX)
}

/// [`recovered_equals_original`], the output parsed after every chunk (`parse_each`: the
/// checkpoints land at the same points on every run) or only at the reads and when the grid
/// workers get to it (a checkpoint then starts its log with the backlog behind it).
fn recovered_parsed_as(
    steps: &[Step],
    checkpoint_at: usize,
    parse_each: bool,
) -> Result<bool, TestCaseError> {
    let (m, _, _, g) = model();
    m.keep_screen(g, Store::create(40, 5, 100).unwrap());
    m.checkpoint_at(checkpoint_at);
    // And a grid fed every byte from the start: checkpoints (and the probes they make)
    // change nothing the live screen shows.
    let mut reference = Grid::new(40, 5, 100);
    for s in steps {
        match s {
            Step::Resize(c, r) => {
                reference.finish_feed();
                reference.resize(*c, *r);
            }
            Step::Out(bytes) => reference.feed(bytes),
            Step::Read => {}
        }
        match s {
            Step::Out(bytes) => {
                m.drain(g, bytes);
                if parse_each {
                    drop(m.grid());
                }
            }
            Step::Resize(c, r) => m.resize(*c, *r),
            Step::Read => drop(m.grid()),
        }
    }
    // Checkpoints are written by whoever parses: let every due one be written.
    drop(m.grid());
    let checkpointed = m.checkpointed();
    reference.finish_feed();
    same(
        &fingerprint(&m.grid()),
        &fingerprint(&reference),
        "live vs fed from the start",
    )?;
    let n = ScreenModel::new(Box::new(|_| {}));
    let g2 = n.reset(80, 24, 10_000);
    prop_assert_eq!(n.recover(g2, left_by(&m)), Ok(100));
    same(
        &fingerprint(&n.grid()),
        &fingerprint(&m.grid()),
        "recovered",
    )?;
    prop_assert_eq!(n.flags(), m.flags());
    // Both go on alike, and the recovered one keeps logging for the next daemon.
    let more = b"\x1b[?1049lafter\r\n\x1b[31mred";
    m.drain(g, more);
    n.drain(g2, more);
    same(
        &fingerprint(&n.grid()),
        &fingerprint(&m.grid()),
        "after more output",
    )?;
    let third = ScreenModel::new(Box::new(|_| {}));
    let g3 = third.reset(80, 24, 10_000);
    prop_assert_eq!(third.recover(g3, left_by(&n)), Ok(100));
    same(
        &fingerprint(&third.grid()),
        &fingerprint(&m.grid()),
        "a third daemon",
    )?;
    Ok(checkpointed)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48),
        rng_seed: proptest::test_runner::RngSeed::Fixed(20),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_recovered_screen_equals_the_one_that_died(steps in prop::collection::vec(step(), 1..40)) {
        recovered_equals_original(&steps, usize::MAX)?;
    }

    /// The same with a checkpoint taken after every ~100 bytes of log: the screen is
    /// rebuilt from the last checkpoint and the log after it.
    #[test]
    fn a_screen_rebuilt_from_a_checkpoint_equals_the_one_that_died(
        steps in prop::collection::vec(step(), 1..60)
    ) {
        recovered_equals_original(&steps, 100)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48),
        rng_seed: proptest::test_runner::RngSeed::Fixed(2020),
        ..ProptestConfig::default()
    })]

    /// Checkpoints taken all along, on either screen.
    #[test]
    fn checkpoints_rebuild_the_screen_exactly(
        steps in prop::collection::vec(step(), 1..80)
    ) {
        recovered_equals_original(&steps, 64)?;
    }

    /// Checkpoints taken while output and resizes wait to be parsed: the log a checkpoint
    /// starts is the one the backlog is read from.
    #[test]
    fn checkpoints_behind_a_backlog_rebuild_the_screen_exactly(
        steps in prop::collection::vec(step(), 1..80)
    ) {
        recovered_parsed_as(&steps, 64, false)?;
    }
}

/// The long variant (`scripts/long-tests.sh`).
#[test]
#[ignore = "long: run by scripts/long-tests.sh"]
fn checkpoints_rebuild_the_screen_exactly_long() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 3000,
        rng_seed: proptest::test_runner::RngSeed::Fixed(2021),
        ..ProptestConfig::default()
    });
    runner
        .run(&prop::collection::vec(step(), 1..150), |steps| {
            recovered_equals_original(&steps, 64).map(|_| ())
        })
        .unwrap();
}

/// Checkpoints are really taken (and so tested) by the properties above, whether the output
/// is parsed after every chunk or only when the grid workers and readers get to it.
#[test]
fn checkpoints_are_taken() {
    let steps: Vec<Step> = (0..50)
        .map(|i| Step::Out(format!("\x1b[3{}mline {i}\t\x1b[0m日本\r\n", i % 8).into_bytes()))
        .collect();
    assert!(recovered_equals_original(&steps, 100).unwrap());
    assert!(recovered_parsed_as(&steps, 100, false).unwrap());
}

/// After `before`, 700 KiB of a program redrawing five rows in place, at the default
/// cadence: checkpointed, and the log left under 256 KiB. The model, to look at further.
fn redraws_are_checkpointed(before: &[u8]) -> (Arc<ScreenModel>, u64) {
    let (m, _, _, g) = model();
    m.keep_screen(g, Store::create(40, 5, 100).unwrap());
    m.drain(g, before);
    let frame: Vec<u8> = (1..=5)
        .flat_map(|r| format!("\x1b[{r};1H\x1b[3{r}mrow {r} of a redraw\x1b[0m\x1b[K").into_bytes())
        .collect();
    let mut fed = 0;
    while fed < 700 * 1024 {
        m.drain(g, &frame);
        fed += frame.len();
        // Parsed at least every 64 KiB, as the grid workers would (they may be sooner).
        if fed % (64 * 1024) < frame.len() {
            drop(m.grid());
        }
    }
    drop(m.grid());
    assert!(m.checkpointed(), "no checkpoint after {fed} bytes");
    let log = lock(&m.drain).store.as_ref().unwrap().log_len();
    assert!(log < 256 * 1024, "the log still holds {log} bytes");
    (m, g)
}

/// At the default cadence, a program that redraws in place (no history: a small checkpoint)
/// is checkpointed once its log passes 512 KiB, not left to grow to 2 MiB: the log is memory
/// the session keeps for its life.
#[test]
fn a_redrawing_program_is_checkpointed_at_the_default_cadence() {
    redraws_are_checkpointed(b"");
}

/// The same on the alternate screen, entered and left once before (a full-screen program
/// that redraws): until 12-07 a screen that had shown the alternate screen was never
/// checkpointed again, and its log grew with every byte.
#[test]
fn a_full_screen_program_is_checkpointed_at_the_default_cadence() {
    let (m, _) = redraws_are_checkpointed(b"shell\r\n\x1b[?1049hless\x1b[?1049l$ \x1b[?1049h");
    assert!(m.grid().alt_screen());
}

/// Checkpoints taken while a long backlog holding a resize is read from the log (where
/// exactly depends on when the grid workers parse: `store::tests` pins the log a checkpoint
/// keeps): a screen rebuilt from the last one equals the live one.
#[test]
fn checkpoints_behind_a_long_backlog_rebuild_exactly() {
    let (m, _, _, g) = model();
    m.keep_screen(g, Store::create(40, 5, 100).unwrap());
    let mut i = 0;
    let mut feed = |n: usize| {
        let mut sent = 0;
        while sent < n {
            let line = format!("\x1b[3{}mline {i}\x1b[0m\t日本\r\n", i % 8).into_bytes();
            i += 1;
            sent += line.len();
            m.drain(g, &line);
        }
        sent
    };
    feed(900 * 1024);
    // Parsed: the ring's next bytes go in near its end.
    drop(m.grid());
    m.checkpoint_at(1024);
    feed(2048);
    m.resize(30, 7);
    feed(200 * 1024);
    drop(m.grid());
    assert!(m.checkpointed());
    let n = ScreenModel::new(Box::new(|_| {}));
    let g2 = n.reset(80, 24, 10_000);
    assert_eq!(n.recover(g2, left_by(&m)), Ok(100));
    assert_eq!(fingerprint(&n.grid()), fingerprint(&m.grid()));
}

/// Output that outruns the screen memory while a backlog is read from its log: the backlog
/// is copied out before the log is given back, so the live screen misses nothing (only a
/// next daemon would start it empty), and later output is parsed from the copy.
#[test]
fn a_backlog_outlives_the_screen_memory_it_was_read_from() {
    let (m, _, _, g) = model();
    let mut store = Store::create(40, 5, 100).unwrap();
    store.set_log_max(4096);
    m.keep_screen(g, store);
    m.checkpoint_at(usize::MAX);
    let mut reference = Grid::new(40, 5, 100);
    // Lines `from..to` to both, the resize to 30x7 before line `resize_at`.
    let feed = |reference: &mut Grid, lines: std::ops::Range<usize>, resize_at: Option<usize>| {
        for i in lines {
            let line = format!("\x1b[3{}mline {i}\x1b[0m\t日本\r\n", i % 8).into_bytes();
            if resize_at == Some(i) {
                reference.finish_feed();
                reference.resize(30, 7);
                m.resize(30, 7);
            }
            reference.feed(&line);
            m.drain(g, &line);
        }
    };
    feed(&mut reference, 0..40, None);
    // Some of it parsed: the rest is a backlog in the log when the log runs out.
    drop(m.grid());
    feed(&mut reference, 40..240, Some(140));
    assert!(m.screen_lost());
    reference.finish_feed();
    assert_eq!(fingerprint(&m.grid()), fingerprint(&reference));
    feed(&mut reference, 240..290, None);
    reference.finish_feed();
    assert_eq!(fingerprint(&m.grid()), fingerprint(&reference));
}

/// A recovered model holds the replayed output in a ring until it is parsed (it lies in the
/// log ahead of where a cursor would start); a checkpoint taken before that starts its log
/// from the ring's backlog (`backlog::tests` pins its pieces), and a third daemon rebuilds the
/// screen from it exactly.
#[test]
fn a_checkpoint_before_a_recovered_backlog_is_parsed_rebuilds_exactly() {
    let line = |i: usize| format!("\x1b[3{}mline {i}\x1b[0m\t日本\r\n", i % 8).into_bytes();
    let (m, _, _, g) = model();
    m.keep_screen(g, Store::create(40, 5, 100).unwrap());
    for i in 0..50 {
        m.drain(g, &line(i));
    }
    let n = ScreenModel::new(Box::new(|_| {}));
    let g2 = n.reset(80, 24, 10_000);
    assert_eq!(n.recover(g2, left_by(&m)), Ok(100));
    assert!(matches!(lock(&n.drain).backlog, Backlog::Ring(_)));
    n.checkpoint_at(64);
    {
        // Nobody parses while these come in: the checkpoint due at the first one is taken
        // with the others behind it, still in the ring.
        let _parsing = lock(&n.grid);
        for i in 50..60 {
            m.drain(g, &line(i));
            n.drain(g2, &line(i));
        }
    }
    assert_eq!(fingerprint(&n.grid()), fingerprint(&m.grid()));
    assert!(n.checkpointed());
    let third = ScreenModel::new(Box::new(|_| {}));
    let g3 = third.reset(80, 24, 10_000);
    assert_eq!(third.recover(g3, left_by(&n)), Ok(100));
    assert_eq!(fingerprint(&third.grid()), fingerprint(&m.grid()));
}

/// A screen memory replaced while a backlog is read from the old one's log: the backlog is
/// copied out first, so nothing the grid has not parsed is lost or read from the new one.
#[test]
fn a_backlog_survives_its_screen_memory_being_replaced() {
    let (m, _, _, g) = model();
    m.keep_screen(g, Store::create(40, 5, 100).unwrap());
    let mut reference = Grid::new(40, 5, 100);
    let mut both = |bytes: &[u8]| {
        reference.feed(bytes);
        m.drain(g, bytes);
    };
    both(b"parsed\r\n");
    drop(m.grid());
    both(b"\x1b[31mwaiting\r\n");
    m.keep_screen(g, Store::create(40, 5, 100).unwrap());
    both(b"after\x1b[0m");
    reference.finish_feed();
    assert_eq!(fingerprint(&m.grid()), fingerprint(&reference));
}

/// A store that cannot be trusted leaves the screen empty, the model usable.
#[test]
fn a_refused_store_changes_nothing() {
    let n = ScreenModel::new(Box::new(|_| {}));
    let g = n.reset(80, 24, 100);
    let raw = unsafe { libc::memfd_create(c"junk".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(raw >= 0);
    let junk = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
    assert!(n.recover(g, junk).is_err());
    n.drain(g, b"fresh");
    assert_eq!(n.grid().row(0).text, "fresh");
    assert!(n.screen_fd().is_none());
}
