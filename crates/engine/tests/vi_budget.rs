//! What the engine keeps for a VI's owner (messages held for want of a
//! receive, arrived past a gap, or in reassembly) stays within the VI's
//! held-bytes budget, which is reserved and charged with the VI: a
//! receiver that posts nothing holds the sender back (its window closes,
//! nothing is dropped or broken), and once it posts everything arrives
//! exactly once, in order; a VI whose budget does not fit its process's
//! memory limit is refused at creation.

mod vis;

use std::time::{Duration, Instant};

use unet_abi::*;
use unet_control::{ErrorCode, ViParams};
use unet_engine::invoker::{connect_vis, InvokerError, LocalClient};
use unet_engine::{Dispatcher, EngineConfig};
use vis::*;

const BUDGET: u64 = 1 << 20;
const LEN: usize = 200 << 10;
const N: u64 = 24;

fn params(reliability: Reliability) -> ViParams {
    ViParams {
        reliability,
        strict_rnr: false,
        break_timeout_ms: 0,
    }
}

#[test]
fn a_receiver_that_posts_nothing_holds_the_sender_back_within_its_budget() {
    for level in [
        Reliability::ReliableDelivery,
        Reliability::ReliableReception,
    ] {
        let cfg = || EngineConfig {
            udp_bind: Some("127.0.0.1:0".parse().unwrap()),
            vi_held_budget: BUDGET,
            ..EngineConfig::default()
        };
        let mut a = Dispatcher::new(cfg()).unwrap();
        let mut b = Dispatcher::new(cfg()).unwrap();
        let mut ca = LocalClient::new(&mut a).unwrap();
        let mut cb = LocalClient::new(&mut b).unwrap();
        let to = b.udp_addr().unwrap();
        let (mut tx, mut rx) = connect_vis(
            (&mut a, &mut ca),
            (&mut b, &mut cb),
            to,
            3,
            params(level),
            &mut || {},
        )
        .unwrap();
        let tx_mem = ca.register_memory(&mut a, N as usize * LEN).unwrap();
        let rx_mem = cb.register_memory(&mut b, N as usize * LEN).unwrap();
        for i in 0..N {
            let at = i * LEN as u64;
            tx_mem.write(at as usize, &pattern(i, LEN));
            tx.push_send(desc(i, &[(tx_mem.handle(), at, LEN as u32)]))
                .unwrap();
        }
        // Nothing posted: what B keeps never passes the budget, and A's
        // sends wait.
        let mut sent = Vec::new();
        let mut most = 0;
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(800) {
            a.step();
            b.step();
            let kept = rx.counter(ViCounter::KeptBytes);
            assert!(
                kept <= BUDGET,
                "{kept} bytes kept: {:?}",
                rx.nonzero_counters()
            );
            most = most.max(kept);
            sent.extend(sends_done(&mut tx));
        }
        assert!(most + LEN as u64 > BUDGET, "the budget filled: {most}");
        assert!(
            rx.counter(ViCounter::BudgetRefused) > 0,
            "{:?}",
            rx.nonzero_counters()
        );
        let held_max = BUDGET / LEN as u64;
        assert!(
            sent.len() as u64 <= held_max,
            "{} sends completed with nothing posted",
            sent.len()
        );
        assert_eq!((tx.state(), rx.state()), (0, 0));
        assert!(sent.iter().all(|c| c.status == 0));
        // Posted: everything arrives, once, in order, intact.
        for i in 0..N {
            let at = i * LEN as u64;
            rx.push_recv(desc(i, &[(rx_mem.handle(), at, LEN as u32)]))
                .unwrap();
        }
        let mut got = Vec::new();
        step_until(&mut a, &mut b, &mut || {}, "everything", |_, _| {
            got.extend(recvs_done(&mut rx));
            sent.extend(sends_done(&mut tx));
            assert!(rx.counter(ViCounter::KeptBytes) <= BUDGET);
            got.len() as u64 == N && sent.len() as u64 == N
        });
        for (i, c) in got.iter().enumerate() {
            assert_eq!((c.id, c.status, c.len as usize), (i as u64, 0, LEN));
            let mut v = vec![0u8; LEN];
            rx_mem.read(i * LEN, &mut v);
            assert!(v == pattern(i as u64, LEN), "{level:?} message {i} intact");
        }
        for (i, c) in sent.iter().enumerate() {
            assert_eq!((c.id, c.status), (i as u64, 0));
        }
        assert_eq!(rx.counter(ViCounter::KeptBytes), 0);
        assert_eq!((tx.state(), rx.state()), (0, 0));
        assert_eq!(rx.counter(ViCounter::RxMsgs), N, "exactly once");
    }
}

#[test]
fn a_vi_whose_budget_does_not_fit_the_memory_limit_is_refused() {
    // 16 MiB a process; each VI reserves 4 MiB (the default) with its
    // segment: three fit, the fourth does not.
    let cfg = |memory: u64| EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        client_memory: memory,
        ..EngineConfig::default()
    };
    let mut a = Dispatcher::new(cfg(16 << 20)).unwrap();
    let mut b = Dispatcher::new(cfg(1 << 30)).unwrap();
    let mut ca = LocalClient::new(&mut a).unwrap();
    let mut cb = LocalClient::new(&mut b).unwrap();
    let to = b.udp_addr().unwrap();
    let mut vis = Vec::new();
    let refused = loop {
        match connect_vis(
            (&mut a, &mut ca),
            (&mut b, &mut cb),
            to,
            10 + vis.len() as u64,
            params(Reliability::ReliableDelivery),
            &mut || {},
        ) {
            Ok(p) => vis.push(p),
            Err(e) => break e,
        }
        assert!(vis.len() <= 4, "more VIs than the limit allows");
    };
    assert!(
        matches!(refused, InvokerError::Engine(ErrorCode::QuotaExceeded)),
        "{refused:?}"
    );
    assert_eq!(vis.len(), 3);
}

/// A budget past any memory limit (an engine started with the largest
/// one) refuses the VI as any budget that does not fit does: the charge
/// does not overflow.
#[test]
fn the_largest_budget_is_refused_not_overflowed() {
    let cfg = |budget: u64| EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        vi_held_budget: budget,
        ..EngineConfig::default()
    };
    let mut a = Dispatcher::new(cfg(u64::MAX)).unwrap();
    let mut b = Dispatcher::new(cfg(BUDGET)).unwrap();
    let mut ca = LocalClient::new(&mut a).unwrap();
    let mut cb = LocalClient::new(&mut b).unwrap();
    let to = b.udp_addr().unwrap();
    let refused = connect_vis(
        (&mut a, &mut ca),
        (&mut b, &mut cb),
        to,
        3,
        params(Reliability::ReliableDelivery),
        &mut || {},
    )
    .err();
    assert!(
        matches!(
            refused,
            Some(InvokerError::Engine(ErrorCode::QuotaExceeded))
        ),
        "{refused:?}"
    );
}
