//! A screen rebuilt by a new daemon from the memory a dead one left equals the screen the
//! dead one had: the differential check of `store.rs` + [`ScreenModel::recover`].

use super::store::Store;
use super::tests::{fingerprint, model, step, Step};
use super::*;
use proptest::prelude::*;

/// `steps` through a model that logs into a store, then a second model (another size and
/// scrollback, as a new daemon's record might say) rebuilt from that store: both read the
/// same, and go on reading the same after more output.
fn recovered_equals_original(steps: &[Step]) -> Result<(), TestCaseError> {
    let (m, _, _, g) = model();
    m.keep_screen(g, Store::create(40, 5, 100).unwrap());
    for s in steps {
        match s {
            Step::Out(bytes) => {
                m.drain(g, bytes);
            }
            Step::Resize(c, r) => m.resize(*c, *r),
            Step::Read => drop(m.grid()),
        }
    }
    let fd = m.screen_fd().unwrap();
    let n = ScreenModel::new(Box::new(|_| {}));
    let g2 = n.reset(80, 24, 10_000);
    prop_assert_eq!(n.recover(g2, fd), Ok(100));
    prop_assert_eq!(fingerprint(&n.grid()), fingerprint(&m.grid()));
    prop_assert_eq!(n.flags(), m.flags());
    // Both go on alike, and the recovered one keeps logging for the next daemon.
    let more = b"\x1b[?1049lafter\r\n\x1b[31mred";
    m.drain(g, more);
    n.drain(g2, more);
    prop_assert_eq!(fingerprint(&n.grid()), fingerprint(&m.grid()));
    let third = ScreenModel::new(Box::new(|_| {}));
    let g3 = third.reset(80, 24, 10_000);
    prop_assert_eq!(third.recover(g3, n.screen_fd().unwrap()), Ok(100));
    prop_assert_eq!(fingerprint(&third.grid()), fingerprint(&m.grid()));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48),
        rng_seed: proptest::test_runner::RngSeed::Fixed(20),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_recovered_screen_equals_the_one_that_died(steps in prop::collection::vec(step(), 1..40)) {
        recovered_equals_original(&steps)?;
    }
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
