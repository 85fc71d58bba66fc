//! Which handler invocations are timed: one in `spine_time_every` at
//! random (every one at 1), counted per handler beside the invocations,
//! and every one of an extension that may call exports; and a call of an
//! export made when the caller's time is already up.

use std::time::Duration;

use unet_abi::FaultKind;

use super::tests_terminate::Rig;
use super::*;

/// `Fan`'s handlers: `onNull` at `NULL`, `onFan` (sends `k` messages to
/// `onNull`) at `NULL + 1`.
const NULL: u16 = 300;

fn fan(rig: &mut Rig, k: u8) {
    rig.host_am(NULL + 1, &[k], &[]);
    rig.settle();
}

fn null_stats(rig: &mut Rig, slot: usize) -> (u64, u64, u64) {
    let h = &rig.ext(slot).handlers[0];
    assert_eq!(h.number, NULL);
    (h.invocations, h.timed, h.total_ticks)
}

#[test]
fn one_invocation_in_every_is_timed_at_random_and_every_one_at_1() {
    let mut rig = Rig::new();
    let slot = rig.install("Fan", i32::from(NULL), ext::DEFAULT_BUDGET);
    for _ in 0..200 {
        fan(&mut rig, 64);
    }
    let (n, timed, ticks) = null_stats(&mut rig, slot);
    assert_eq!(n, 200 * 64);
    // 12 800 invocations, one in 64 expected: 200, and a binomial's
    // spread is about 14.
    assert!((120..=300).contains(&timed), "{timed} of {n} timed");
    assert!(ticks > 0);
    // Every one, from now on.
    rig.sp.rt.set_time_every(1);
    fan(&mut rig, 50);
    let (n2, timed2, ticks2) = null_stats(&mut rig, slot);
    assert_eq!((n2 - n, timed2 - timed), (50, 50));
    assert!(ticks2 > ticks);
    // A count that is not a power of two is rounded up: 3 -> 4.
    rig.sp.rt.set_time_every(3);
    for _ in 0..50 {
        fan(&mut rig, 64);
    }
    let (n3, timed3, _) = null_stats(&mut rig, slot);
    let share = (timed3 - timed2) as f64 / (n3 - n2) as f64;
    assert!((0.2..0.3).contains(&share), "{share}");
}

#[test]
fn an_extension_that_may_call_exports_is_timed_always() {
    let mut rig = Rig::new();
    let slot = rig.install("Fan", i32::from(NULL), ext::DEFAULT_BUDGET);
    // What linking against an exporter leaves (see `link.rs`).
    rig.ext(slot).imports.push(7);
    for _ in 0..20 {
        fan(&mut rig, 64);
    }
    let (n, timed, _) = null_stats(&mut rig, slot);
    assert_eq!((n, timed), (20 * 64, 20 * 64));
}

/// A handler whose time is up before it calls an export (its engine was
/// preempted since it started, say) ends as a timeout, and the call is
/// counted as one on the export too: the two listings agree.
#[test]
fn a_call_made_with_no_time_left_is_a_timeout_on_the_caller_and_the_export() {
    const CALL: u16 = 310;
    let mut rig = Rig::new();
    rig.install("Xport", 0, ext::DEFAULT_BUDGET);
    let c = rig.install_linked("Xcall", i32::from(CALL), ext::DEFAULT_BUDGET, &["Xport"]);
    let export = |rig: &Rig| {
        let e = rig
            .sp
            .rt
            .exports
            .table
            .iter()
            .flatten()
            .next()
            .expect("one export");
        assert_eq!(e.name, "twice");
        (e.calls, e.terms[FaultKind::Timeout as usize])
    };
    // With time: the call runs.
    rig.host_am(CALL, &[], &[]);
    rig.settle();
    let h = &rig.ext(c).handlers[0];
    assert_eq!(
        (h.invocations, h.terms[FaultKind::Timeout as usize]),
        (1, 0)
    );
    assert_eq!(export(&rig), (1, 0));
    // Its budget spent before the call.
    rig.sp.rt.exports.budgets[c] = Duration::ZERO;
    rig.host_am(CALL, &[], &[]);
    rig.settle();
    let h = &rig.ext(c).handlers[0];
    assert_eq!(
        (h.invocations, h.terms[FaultKind::Timeout as usize]),
        (2, 1)
    );
    assert_eq!(export(&rig), (2, 1));
}
