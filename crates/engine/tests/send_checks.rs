//! Hostile send descriptors, checked by an engine stepped on the test's
//! thread: every reason a descriptor is refused gets its own status,
//! written into the descriptor, and exactly one count on the sender, and
//! nothing else happens; the honest pair beside it keeps working.

mod common;
use common::*;
use unet_abi::*;

/// What one descriptor did: its status, the sender's counters that moved,
/// the receiver's counters that moved, what the receiver got.
struct Outcome {
    status: SendStatus,
    sender: Vec<(EndpointCounter, u64)>,
    receiver: Vec<(EndpointCounter, u64)>,
    arrived: usize,
}

struct World {
    rig: Rig,
    a: unet_engine::invoker::RawEndpoint,
    b: unet_engine::invoker::RawEndpoint,
    /// `a`'s channel to `b`, and `b`'s tag for it.
    ch: u16,
    from_a: u16,
    /// `a`'s channel to an endpoint that is gone.
    gone: u16,
    /// A tag `a` held and closed.
    closed: u16,
}

fn world() -> World {
    let mut rig = Rig::new();
    let mut a = rig.endpoint(small());
    // Buffers large enough for a message as long as a's area.
    let mut b = rig.receiver(Geometry {
        buffer_size: 8192,
        buffer_area_size: 512 << 10,
        ..small()
    });
    let (ch, from_a) = rig.open(&a, &mut b);
    let mut c = rig.endpoint(small());
    let (gone, _) = rig.open(&a, &mut c);
    rig.close_endpoint(c.id());
    let (closed, _) = rig.open(&a, &mut b);
    rig.client
        .close_channel(&mut rig.engine, a.id(), closed)
        .expect("close a channel");
    rig.settle();
    // What the set-up told them.
    let ev = events(&mut a);
    assert_eq!(ev.len(), 1, "a hears of c going only: {ev:?}");
    assert_eq!(ev[0].kind, EventKind::PeerGone as u16);
    assert_eq!(ev[0].channel, gone);
    let ev = events(&mut b);
    assert_eq!(ev.len(), 1, "b hears of the closed channel: {ev:?}");
    assert_eq!(ev[0].kind, EventKind::PeerGone as u16);
    World {
        rig,
        a,
        b,
        ch,
        from_a,
        gone,
        closed,
    }
}

impl World {
    /// Push `d` from `a`, step until the engine is idle, and report.
    fn push(&mut self, d: SendDesc) -> Outcome {
        let (sa, sb) = (
            self.rig.stats.all(self.a.id()),
            self.rig.stats.all(self.b.id()),
        );
        let pos = self.a.push_send(d).expect("room in the send ring");
        self.rig.settle();
        assert_eq!(self.a.sends_taken(), pos + 1, "the engine took {d:?}");
        let mut arrived = 0;
        while take(&mut self.b, true).is_some() {
            arrived += 1;
        }
        Outcome {
            status: status(&self.a, pos),
            sender: self.rig.stats.changed(self.a.id(), &sa),
            receiver: self.rig.stats.changed(self.b.id(), &sb),
            arrived,
        }
    }

    /// The honest pair works: a message of each size arrives intact, on
    /// the channel `b` knows.
    fn honest(&mut self, i: usize) {
        for (k, len) in [1usize, 56, 57, 3000].into_iter().enumerate() {
            let msg = pattern(i * 10 + k, len);
            let pos = send(&mut self.a, self.ch, 4096, &msg);
            self.rig.settle();
            assert_eq!(status(&self.a, pos), SendStatus::Sent);
            let m = take(&mut self.b, true).expect("the honest message arrives");
            assert_eq!(m.channel, self.from_a);
            assert!(m.data == msg, "content of the honest {len}-byte message");
            assert!(take(&mut self.b, true).is_none(), "once");
        }
    }
}

fn desc(offset: u32, len: u32, channel: u16, flags: u16) -> SendDesc {
    SendDesc {
        offset,
        len,
        channel,
        flags,
        status: 0,
    }
}

/// Each refusal: its status and one count of its counter, nothing sent,
/// nothing delivered; the honest pair works after each.
#[test]
fn each_bad_descriptor_gets_its_status_and_one_count() {
    use EndpointCounter::*;
    use SendStatus::*;
    let mut w = world();
    let area = w.a.layout().geometry.buffer_area_size as u32;
    let (ch, gone, closed) = (w.ch, w.gone, w.closed);
    let cases: Vec<(&str, SendDesc, SendStatus, EndpointCounter)> = vec![
        ("a reserved flag", desc(0, 8, ch, 2), BadFlags, TxBadFlags),
        (
            "an active message no extension handles",
            desc(0, 8, 70, 1),
            SpineRefused,
            TxAmRefused,
        ),
        ("the top flag", desc(0, 8, ch, 0x8000), BadFlags, TxBadFlags),
        ("every flag", desc(0, 8, ch, u16::MAX), BadFlags, TxBadFlags),
        ("zero length", desc(0, 0, ch, 0), BadLength, TxBadLength),
        (
            "one byte over the largest message",
            desc(0, MAX_MESSAGE as u32 + 1, ch, 0),
            BadLength,
            TxBadLength,
        ),
        (
            "the largest length",
            desc(0, u32::MAX, ch, 0),
            BadLength,
            TxBadLength,
        ),
        (
            "a buffer one byte past the area",
            desc(area - 10, 11, ch, 0),
            BadBuffer,
            TxBadBuffer,
        ),
        (
            "a buffer starting at the end of the area",
            desc(area, 1, ch, 0),
            BadBuffer,
            TxBadBuffer,
        ),
        (
            "the largest offset",
            desc(u32::MAX, 1, ch, 0),
            BadBuffer,
            TxBadBuffer,
        ),
        (
            "a buffer longer than the area",
            desc(0, area + 1, ch, 0),
            BadBuffer,
            TxBadBuffer,
        ),
        (
            "a channel never opened",
            desc(0, 8, closed + 1, 0),
            BadChannel,
            TxBadChannel,
        ),
        (
            "the last channel tag",
            desc(0, 8, u16::MAX, 0),
            BadChannel,
            TxBadChannel,
        ),
        (
            "a channel closed by its holder",
            desc(0, 8, closed, 0),
            BadChannel,
            TxBadChannel,
        ),
        (
            "a channel whose peer is gone",
            desc(0, 8, gone, 0),
            PeerGone,
            TxPeerGone,
        ),
        // Several faults at once: the first check that fails decides
        // (flags, length, buffer, channel).
        (
            "flags and zero length",
            desc(0, 0, ch, 2),
            BadFlags,
            TxBadFlags,
        ),
        (
            "zero length outside the area on a bad channel",
            desc(u32::MAX, 0, u16::MAX, 0),
            BadLength,
            TxBadLength,
        ),
        (
            "outside the area on a gone channel",
            desc(area, 8, gone, 0),
            BadBuffer,
            TxBadBuffer,
        ),
    ];
    for (i, (what, d, want, counter)) in cases.into_iter().enumerate() {
        let o = w.push(d);
        assert_eq!(o.status, want, "{what}: status");
        assert_eq!(
            o.sender,
            vec![(counter, 1)],
            "{what}: the sender's counters"
        );
        assert_eq!(o.receiver, vec![], "{what}: the receiver's counters");
        assert_eq!(o.arrived, 0, "{what}: nothing arrives");
        w.honest(i);
    }
    // The last byte of the area and the whole area are fine.
    for (off, len) in [(area - 1, 1u32), (0, area)] {
        let o = w.push(desc(off, len, ch, 0));
        assert_eq!(o.status, SendStatus::Sent, "{len} bytes at {off}");
        assert_eq!(
            o.sender,
            vec![(TxMsgs, 1), (TxBytes, len as u64)],
            "{len} bytes at {off}"
        );
        assert_eq!(
            o.receiver,
            vec![(RxMsgs, 1), (RxBytes, len as u64)],
            "{len} bytes at {off}"
        );
        assert_eq!(o.arrived, 1);
    }
}

/// Bad descriptors mixed into a run of good ones, all taken in one go:
/// each gets its own status, the good ones arrive in order and intact,
/// and the counts add up.
#[test]
fn a_mixed_batch_is_sorted_out_descriptor_by_descriptor() {
    use EndpointCounter::*;
    let mut w = world();
    let area = w.a.layout().geometry.buffer_area_size as u32;
    let bad = [
        (desc(0, 8, w.ch, 4), SendStatus::BadFlags),
        (desc(0, 0, w.ch, 0), SendStatus::BadLength),
        (desc(area, 8, w.ch, 0), SendStatus::BadBuffer),
        (desc(0, 8, 999, 0), SendStatus::BadChannel),
        (desc(0, 8, w.gone, 0), SendStatus::PeerGone),
    ];
    let before = w.rig.stats.all(w.a.id());
    let mut want = Vec::new();
    let mut sent = Vec::new();
    for i in 0..40 {
        let (d, st) = if i % 3 == 1 {
            bad[i / 3 % bad.len()]
        } else {
            let msg = pattern(i, 20 + i * 37);
            let off = (i * 1600) as u32;
            w.a.write_area(off as u64, &msg);
            sent.push(msg.clone());
            (desc(off, msg.len() as u32, w.ch, 0), SendStatus::Sent)
        };
        let pos = w.a.push_send(d).expect("room");
        want.push((pos, st));
    }
    w.rig.settle();
    for (pos, st) in want {
        assert_eq!(status(&w.a, pos), st, "descriptor {pos}");
    }
    for (i, msg) in sent.iter().enumerate() {
        let m = take(&mut w.b, true).unwrap_or_else(|| panic!("good message {i}"));
        assert_eq!(m.channel, w.from_a);
        assert!(m.data == *msg, "good message {i}");
    }
    assert!(take(&mut w.b, true).is_none());
    let bytes: u64 = sent.iter().map(|m| m.len() as u64).sum();
    let n_bad = 13u64; // i % 3 == 1 for i < 40
    let mut changed = w.rig.stats.changed(w.a.id(), &before);
    changed.sort_by_key(|&(c, _)| c as usize);
    assert_eq!(
        changed,
        vec![
            (TxMsgs, sent.len() as u64),
            (TxBytes, bytes),
            (TxBadChannel, 2),
            (TxBadBuffer, 3),
            (TxBadLength, 3),
            (TxBadFlags, 3),
            (TxPeerGone, 2),
        ],
        "{} good and {n_bad} bad descriptors",
        sent.len()
    );
}
