//! Fairness between endpoints, turn by turn: an endpoint with thousands of
//! send descriptors queued gets a budget per turn of the engine's loop (64
//! descriptors, fewer when its applet used 20 000 units of work on them),
//! so another endpoint's message never waits more than the turn it was
//! pushed before.

mod common;
use common::*;
use unet_abi::*;
use unet_engine::invoker::RawEndpoint;

/// Send descriptors taken from one endpoint per turn.
const SEND_BUDGET: u64 = 64;
/// An applet's share of a turn's work, in JIVE fuel: its endpoint takes
/// descriptors until its invocations used this much.
const APPLET_TURN_FUEL: u64 = 20_000;

/// A hog with a deep send ring and a sink that keeps everything it gets
/// (its receive ring is deeper than the hog's queue); an honest pair.
struct World {
    rig: Rig,
    hog: RawEndpoint,
    sink: RawEndpoint,
    hog_ch: u16,
    a: RawEndpoint,
    b: RawEndpoint,
    ch: u16,
    from_a: u16,
}

fn world(hog_first: bool, sink_recv_cap: u32) -> World {
    let mut rig = Rig::new();
    let deep = Geometry {
        send_cap: 4096,
        ..small()
    };
    let (hog, a) = if hog_first {
        let hog = rig.endpoint(deep);
        (hog, rig.endpoint(small()))
    } else {
        let a = rig.endpoint(small());
        (rig.endpoint(deep), a)
    };
    let mut sink = rig.endpoint(Geometry {
        recv_cap: sink_recv_cap,
        ..small()
    });
    let mut b = rig.receiver(small());
    let (hog_ch, _) = rig.open(&hog, &mut sink);
    let (ch, from_a) = rig.open(&a, &mut b);
    World {
        rig,
        hog,
        sink,
        hog_ch,
        a,
        b,
        ch,
        from_a,
    }
}

impl World {
    /// Queue `n` small messages on the hog (without a step between).
    fn flood(&mut self, n: usize) {
        self.hog.write_area(0, b"hog says");
        for _ in 0..n {
            self.hog
                .push_send(SendDesc {
                    offset: 0,
                    len: 8,
                    channel: self.hog_ch,
                    ..Default::default()
                })
                .expect("room in the hog's ring");
        }
    }

    /// Push one honest message, run one turn: it must have arrived.
    fn one_turn(&mut self, i: usize) {
        let msg = pattern(i, 200);
        let pos = send(&mut self.a, self.ch, 0, &msg);
        self.rig.engine.step();
        assert_eq!(
            status(&self.a, pos),
            SendStatus::Sent,
            "honest message {i} taken in the turn after it was pushed"
        );
        let m = take(&mut self.b, true)
            .unwrap_or_else(|| panic!("honest message {i} arrived within one turn"));
        assert_eq!(m.channel, self.from_a);
        assert!(m.data == msg);
    }
}

/// Thousands of descriptors ahead of it in the loop's order, or behind
/// it: the honest message goes in the next turn every time, and the hog
/// gets exactly its budget per turn until its queue is empty.
#[test]
fn a_deep_queue_does_not_delay_another_endpoint() {
    for hog_first in [true, false] {
        let mut w = world(hog_first, 8192);
        const N: u64 = 4000;
        w.flood(N as usize);
        let mut turns = 0;
        while w.hog.sends_taken() < N {
            w.one_turn(turns as usize);
            turns += 1;
            assert_eq!(
                w.hog.sends_taken(),
                (turns * SEND_BUDGET).min(N),
                "the hog's share after {turns} turns (hog first: {hog_first})"
            );
        }
        assert_eq!(turns, N.div_ceil(SEND_BUDGET));
        // Each turn that left descriptors behind counted them as deferred.
        let hog = w.hog.id();
        assert_eq!(
            w.rig.stats.ep(hog, EndpointCounter::TxDeferred),
            turns - 1,
            "hog first: {hog_first}"
        );
        assert_eq!(w.rig.stats.ep(hog, EndpointCounter::TxMsgs), N);
        assert_eq!(w.rig.stats.ep(w.sink.id(), EndpointCounter::RxMsgs), N);
        assert_eq!(w.rig.stats.ep(w.a.id(), EndpointCounter::TxDeferred), 0);
    }
}

/// The hog's receiver never reads: its ring fills and every further
/// message is dropped, which cuts the engine's turns short. The honest
/// message still goes in the turn after it was pushed.
#[test]
fn a_receiver_that_is_behind_does_not_delay_another_endpoint() {
    let mut w = world(true, 64);
    w.flood(4000);
    for i in 0..40 {
        w.one_turn(i);
    }
    let sink = w.sink.id();
    assert_eq!(w.rig.stats.ep(sink, EndpointCounter::RxMsgs), 64);
    assert!(w.rig.stats.ep(sink, EndpointCounter::RxDropRingFull) > 0);
    // The hog's messages are all accounted for: delivered or dropped.
    settle(&mut w.rig.engine);
    assert_eq!(w.hog.sends_taken(), 4000);
    assert_eq!(
        w.rig.stats.ep(sink, EndpointCounter::RxMsgs)
            + w.rig.stats.ep(sink, EndpointCounter::RxDropRingFull),
        4000
    );
}

/// An endpoint whose applet runs on every descriptor takes descriptors
/// while its applet's work this turn stays under its share
/// ([`APPLET_TURN_FUEL`]): a cheap applet (StdUnet, tens of units a
/// message) gets the whole budget of an endpoint without one, an
/// expensive one (Heavy, thousands of units a message) stops after the
/// invocation that reaches the share; the honest message still goes in the
/// next turn.
#[test]
fn an_applet_endpoint_takes_descriptors_by_the_work_they_cost() {
    for (name, n) in [("StdUnet", 400u64), ("Heavy", 60)] {
        let mut w = world(true, 8192);
        let hog = w.hog.id();
        w.rig
            .client
            .attach_applet(&mut w.rig.engine, hog, applet(name), 0, 0)
            .unwrap_or_else(|e| panic!("attach {name}: {e}"));
        w.flood(n as usize);
        let (mut turns, mut most) = (0, 0);
        // The applet may be held back a while after its attach (loading is
        // applet work too), or after an invocation the machine slowed
        // (`unet_sle::pause_after`): turns go on meanwhile.
        let start = std::time::Instant::now();
        while w.hog.sends_taken() < n {
            let (before, fuel0) = (
                w.hog.sends_taken(),
                w.rig.stats.ep(hog, EndpointCounter::AppletFuel),
            );
            w.one_turn(turns);
            turns += 1;
            let took = w.hog.sends_taken() - before;
            let fuel = w.rig.stats.ep(hog, EndpointCounter::AppletFuel) - fuel0;
            assert!(took <= SEND_BUDGET, "{name} took {took} in one turn");
            if let Some(each) = fuel.checked_div(took) {
                // Every invocation costs the same: the turn went on only
                // while the work before the last one stayed under the share.
                assert!(
                    (took - 1) * each < APPLET_TURN_FUEL,
                    "{name} took {took} at {each} units each in one turn"
                );
            }
            most = most.max(took);
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "the hog's queue never emptied"
            );
        }
        let each = w.rig.stats.ep(hog, EndpointCounter::AppletFuel) / n;
        let share = APPLET_TURN_FUEL.div_ceil(each).min(SEND_BUDGET);
        assert_eq!(
            most, share,
            "{name}: the most one turn took, at {each} units each"
        );
        if name == "StdUnet" {
            assert_eq!(most, SEND_BUDGET, "a cheap applet gets the whole budget");
        } else {
            assert!(
                most <= 8,
                "an expensive applet gets a few: {most} at {each} units"
            );
        }
        assert_eq!(w.rig.stats.ep(hog, EndpointCounter::AppletTxCalls), n);
        settle(&mut w.rig.engine);
        assert_eq!(w.rig.stats.ep(w.sink.id(), EndpointCounter::RxMsgs), n);
    }
}
