//! A reliable VI and a peer that stops answering for a while (its engine
//! not stepped, as a daemon stopped by a signal, a page-in or a debugger
//! would be): a stall shorter than the VI's break timeout (5 s by
//! default) keeps the VI and delivers everything after it; a silence
//! longer than the timeout (here a VI attribute of 1 s) breaks it at the
//! timeout, cleanly.

mod vis;

use std::time::{Duration, Instant};

use unet_abi::*;
use unet_control::ViParams;
use unet_engine::invoker::{connect_vis, LocalClient, RawRegion, RawVi};
use unet_engine::{Dispatcher, EngineConfig};
use vis::*;

const LEN: usize = 3000;
const SLOT_LEN: usize = 4096;
const N: u64 = 32;

struct Pair {
    a: Dispatcher,
    b: Dispatcher,
    tx: RawVi,
    rx: RawVi,
    tx_mem: RawRegion,
    rx_mem: RawRegion,
    _clients: (LocalClient, LocalClient),
}

fn pair(break_timeout_ms: u32) -> Pair {
    let cfg = || EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..EngineConfig::default()
    };
    let mut a = Dispatcher::new(cfg()).unwrap();
    let mut b = Dispatcher::new(cfg()).unwrap();
    let mut ca = LocalClient::new(&mut a).unwrap();
    let mut cb = LocalClient::new(&mut b).unwrap();
    let to = b.udp_addr().unwrap();
    let params = ViParams {
        reliability: Reliability::ReliableDelivery,
        strict_rnr: false,
        break_timeout_ms,
    };
    let (tx, rx) = connect_vis(
        (&mut a, &mut ca),
        (&mut b, &mut cb),
        to,
        5,
        params,
        &mut || {},
    )
    .unwrap();
    let tx_mem = ca.register_memory(&mut a, N as usize * SLOT_LEN).unwrap();
    let rx_mem = cb.register_memory(&mut b, N as usize * SLOT_LEN).unwrap();
    Pair {
        a,
        b,
        tx,
        rx,
        tx_mem,
        rx_mem,
        _clients: (ca, cb),
    }
}

impl Pair {
    /// Post messages `from..to` (their receives first).
    fn post(&mut self, from: u64, to: u64) {
        for i in from..to {
            let at = i * SLOT_LEN as u64;
            self.rx
                .push_recv(desc(i, &[(self.rx_mem.handle(), at, SLOT_LEN as u32)]))
                .unwrap();
            self.tx_mem.write(at as usize, &pattern(i, LEN));
            self.tx
                .push_send(desc(i, &[(self.tx_mem.handle(), at, LEN as u32)]))
                .unwrap();
        }
    }

    /// Step A only (B is silent) for `d`, or until `stop`.
    fn stall(&mut self, d: Duration, mut stop: impl FnMut(&RawVi) -> bool) -> Duration {
        let start = Instant::now();
        while start.elapsed() < d && !stop(&self.tx) {
            self.a.step();
            std::thread::sleep(Duration::from_micros(200));
        }
        start.elapsed()
    }
}

/// The completions of `vi`'s receives (or sends): `ok` successes in
/// order from `from`, then only errors of `err`.
fn check(done: &[ViCompl], from: u64, err: Option<ViError>) -> u64 {
    let mut ok = 0;
    let mut failed = false;
    for c in done {
        if c.status == 0 {
            assert!(!failed, "a completion after the error: {c:?}");
            assert_eq!((c.id, c.len as usize), (from + ok, LEN));
            ok += 1;
        } else {
            failed = true;
            assert_eq!(Some(c.status), err.map(vis::err), "{c:?}");
        }
    }
    ok
}

#[test]
fn a_stall_shorter_than_the_break_timeout_keeps_the_vi() {
    let mut p = pair(0);
    p.post(0, 8);
    let (mut got, mut sent) = (Vec::new(), Vec::new());
    let Pair { a, b, tx, rx, .. } = &mut p;
    step_until(a, b, &mut || {}, "the first messages", |_, _| {
        got.extend(recvs_done(rx));
        sent.extend(sends_done(tx));
        got.len() == 8 && sent.len() == 8
    });
    // B stops answering for 3 s (more than the 2.05 s after which a silent
    // peer broke a VI before; less than the 5 s default) while A sends.
    p.post(8, N);
    p.stall(Duration::from_secs(3), |_| false);
    assert_eq!(p.tx.state(), 0, "{:?}", p.tx.nonzero_counters());
    assert!(p.tx.counter(ViCounter::Timeouts) >= 5, "A waited for B");
    let Pair { a, b, tx, rx, .. } = &mut p;
    step_until(a, b, &mut || {}, "everything after the stall", |_, _| {
        got.extend(recvs_done(rx));
        sent.extend(sends_done(tx));
        got.len() == N as usize && sent.len() == N as usize
    });
    assert_eq!(check(&got, 0, None), N);
    for (i, c) in sent.iter().enumerate() {
        assert_eq!((c.id, c.status), (i as u64, 0));
    }
    for i in 0..N {
        let mut v = vec![0u8; LEN];
        p.rx_mem.read(i as usize * SLOT_LEN, &mut v);
        assert!(v == pattern(i, LEN), "message {i} intact");
    }
    assert_eq!((p.tx.state(), p.rx.state()), (0, 0));
    assert_eq!(p.rx.counter(ViCounter::Errors), 0);
}

#[test]
fn a_peer_silent_past_the_break_timeout_breaks_the_vi_at_the_timeout() {
    // The VI's own attribute: 1 s (the engine's default is 5 s).
    let mut p = pair(1000);
    p.post(0, 4);
    let mut got = Vec::new();
    let mut sent = Vec::new();
    let Pair { a, b, tx, rx, .. } = &mut p;
    step_until(a, b, &mut || {}, "the first messages", |_, _| {
        got.extend(recvs_done(rx));
        sent.extend(sends_done(tx));
        got.len() == 4 && sent.len() == 4
    });
    p.post(4, N);
    let took = p.stall(Duration::from_secs(4), |tx| tx.state() != 0);
    assert_eq!(
        p.tx.state(),
        ViError::Timeout as u32,
        "{:?}",
        p.tx.nonzero_counters()
    );
    // At the timeout: not before it, and within an RTO's ceiling (256 ms)
    // and a little after it.
    assert!(
        took >= Duration::from_millis(950) && took <= Duration::from_millis(1800),
        "broke after {took:?}"
    );
    // The break is clean: the sends after the stall fail, none completes
    // after the error; B, stepped again, learns of the break and its
    // receives hold only what arrived, in order, then the error.
    sent.extend(sends_done(&mut p.tx));
    let ok_sends = check_sends(&sent);
    let Pair { a, b, rx, .. } = &mut p;
    step_until(a, b, &mut || {}, "B learns of the break", |_, _| {
        got.extend(recvs_done(rx));
        rx.state() != 0
    });
    step_for(a, b, &mut || {}, Duration::from_millis(50));
    got.extend(recvs_done(&mut p.rx));
    let ok = check(&got, 0, Some(ViError::Timeout));
    assert!(ok >= ok_sends, "{ok} received, {ok_sends} sends completed");
    assert_eq!(got.len() as u64, N, "every receive completed");
}

/// The send completions: successes in order, then only `Timeout`; how
/// many succeeded.
fn check_sends(sent: &[ViCompl]) -> u64 {
    let mut ok = 0;
    let mut failed = false;
    for c in sent {
        if c.status == 0 {
            assert!(!failed, "a send completed after the error: {c:?}");
            assert_eq!(c.id, ok);
            ok += 1;
        } else {
            failed = true;
            assert_eq!(c.status, err(ViError::Timeout), "{c:?}");
        }
    }
    assert_eq!(sent.len() as u64, N, "every send completed");
    ok
}
