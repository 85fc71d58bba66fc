//! The ports' data path without extensions, over a veth pair made for
//! the test: a frame for a handler nobody installed is dropped and
//! counted, a handler's send to `DEST_PORT` leaves on the wire as the
//! frame it was given, and a send to a port that is not open is refused.
//! Needs root (CAP_NET_ADMIN, CAP_NET_RAW) and `ip`; fails, never skips,
//! when either is missing.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use unet_abi::spine::DEST_PORT;
use unet_sys::packet::{PacketSocket, RingConfig, BATCH_MAX};
use unet_sys::EventFd;

use super::*;
use crate::config::EngineConfig;
use crate::counters::Counters;
use crate::part::{Context, Part};
use crate::spine::msgs::NO_OWNER;
use crate::spine::rt::E_BAD_DEST;
use crate::spine::SpineTurn;
use crate::unet::endpoints::EndpointTable;

/// An ethertype for local experiments: no other traffic carries it.
const PROTO: u16 = 0x88B5;

/// A veth pair named for this process and test; deleted on drop.
struct Veth {
    a: String,
    b: String,
}

impl Veth {
    fn new() -> Veth {
        static N: AtomicU32 = AtomicU32::new(0);
        let (pid, k) = (std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let v = Veth {
            a: format!("usp{pid}x{k}a"),
            b: format!("usp{pid}x{k}b"),
        };
        let _ = Command::new("ip").args(["link", "del", &v.a]).output();
        for args in [
            vec!["link", "add", &v.a, "type", "veth", "peer", "name", &v.b],
            vec!["link", "set", &v.a, "up"],
            vec!["link", "set", &v.b, "up"],
        ] {
            let out = Command::new("ip")
                .args(&args)
                .output()
                .unwrap_or_else(|e| panic!("cannot run `ip` ({e}): install iproute2"));
            assert!(
                out.status.success(),
                "`ip {}` failed (these tests need root): {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        // Up is not yet ready: until the kernel's link watch has seen the
        // carrier (it runs later, on a worker), the interface's queue
        // discipline drops what is sent. Wait for both ends to say up.
        let end = Instant::now() + Duration::from_secs(10);
        for name in [&v.a, &v.b] {
            let path = format!("/sys/class/net/{name}/operstate");
            while std::fs::read_to_string(&path).map_or(true, |s| s.trim() != "up") {
                assert!(Instant::now() < end, "{name} never came up");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        v
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.a]).output();
    }
}

fn frame(len: usize, seq: u8) -> Vec<u8> {
    let mut f = vec![seq; len];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 0xaa]);
    f[12..14].copy_from_slice(&PROTO.to_be_bytes());
    f
}

struct Rig {
    sp: SpinePart,
    eps: EndpointTable,
    poller: Poller,
    port: u32,
    peer: PacketSocket,
    _veth: Veth,
}

impl Rig {
    fn new() -> Rig {
        let veth = Veth::new();
        let cfg = EngineConfig::default();
        let counters = Arc::new(Counters::create(4, 1).unwrap());
        let eps = EndpointTable::new(4, counters);
        let mut sp = SpinePart::new(&cfg, Arc::new(EventFd::new().unwrap()));
        let raw = PacketPort::open(
            &veth.a,
            RingConfig {
                protocol: PROTO,
                ..RingConfig::default()
            },
        )
        .unwrap();
        let poller = Poller::new().unwrap();
        let port = sp.ports.add(raw, veth.a.clone(), 70, 0, None).unwrap();
        sp.ports.sync(&mut sp.rt);
        let peer = PacketSocket::open(&veth.b, PROTO).unwrap();
        Rig {
            sp,
            eps,
            poller,
            port,
            peer,
            _veth: veth,
        }
    }

    fn turn(&mut self) -> usize {
        SpineTurn {
            spine: &mut self.sp,
            eps: &mut self.eps,
        }
        .turn(&mut cx())
    }
}

fn cx() -> Context<'static> {
    static CFG: std::sync::OnceLock<EngineConfig> = std::sync::OnceLock::new();
    static COUNTERS: std::sync::OnceLock<Counters> = std::sync::OnceLock::new();
    Context {
        port: None,
        counters: COUNTERS.get_or_init(|| Counters::create(1, 1).unwrap()),
        cfg: CFG.get_or_init(EngineConfig::default),
    }
}

#[test]
fn frames_for_a_handler_nobody_installed_are_dropped_and_counted() {
    let mut r = Rig::new();
    assert_eq!(r.turn(), 0, "nothing waits");
    let sent: Vec<Vec<u8>> = (0..10).map(|k| frame(60, k)).collect();
    let refs: Vec<&[u8]> = sent.iter().map(|f| &f[..]).collect();
    assert_eq!(r.peer.send_batch(&refs).unwrap(), 10);
    let end = Instant::now() + Duration::from_secs(5);
    let mut taken = 0;
    while taken < 10 && Instant::now() < end {
        taken += r.turn();
    }
    assert_eq!(taken, 10);
    let p = r.sp.ports.get_mut(r.port).unwrap();
    assert_eq!(p.drops()[PortDrop::NoHandler as usize], 10);
    assert_eq!(p.frames_in, 0);
    assert_eq!((r.sp.rt.msgs.live(), r.sp.rt.bufs.live()), (0, 0));
}

#[test]
fn a_send_to_a_port_leaves_as_its_frame_and_a_closed_port_is_refused() {
    let mut r = Rig::new();
    let dest = DEST_PORT << 24 | r.port;
    r.sp.rt.cur.slot = NO_OWNER;
    // A frame from the arguments alone, one from a bulk buffer, one from
    // both (arguments first).
    let small = frame(60, 1);
    let big = frame(1500, 2);
    assert_eq!(r.sp.rt.send(dest, 0, &small[..], None), 0);
    let b = r.sp.rt.bufs.alloc(&big).unwrap();
    assert_eq!(r.sp.rt.send(dest, 0, &[][..] as &[u8], Some(b)), 0);
    let b = r.sp.rt.bufs.alloc(&big[14..]).unwrap();
    assert_eq!(r.sp.rt.send(dest, 0, &big[..14], Some(b)), 0);
    // Too short for an Ethernet frame: placed nowhere, counted.
    assert_eq!(r.sp.rt.send(dest, 0, &[1u8; 6][..], None), 0);
    assert!(r.turn() > 0);
    let mut bufs = vec![vec![0u8; 2048]; BATCH_MAX];
    let mut lens = vec![0usize; BATCH_MAX];
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < 3 && Instant::now() < end {
        let _ = unet_sys::wait_readable(r.peer.fd(), Some(Duration::from_millis(100)));
        let n = r.peer.recv_batch(&mut bufs, &mut lens).unwrap();
        got.extend((0..n).map(|k| bufs[k][..lens[k]].to_vec()));
    }
    assert_eq!(got, vec![small.clone(), big.clone(), big.clone()]);
    let p = r.sp.ports.get_mut(r.port).unwrap();
    assert_eq!(p.drops()[PortDrop::TxBadLen as usize], 1);
    assert_eq!(p.raw.counters().tx_frames, 3);
    assert_eq!((r.sp.rt.msgs.live(), r.sp.rt.bufs.live()), (0, 0));
    // Closed: a send to it is a bad destination.
    let id = r.port;
    assert!(r.sp.ports.remove(id, &r.poller));
    r.sp.ports.sync(&mut r.sp.rt);
    assert_eq!(r.sp.rt.send(dest, 0, &small[..], None), E_BAD_DEST);
    assert!(!r.sp.ports.remove(id, &r.poller), "closed once");
}

/// Hands `f` to [`port_out`] for port `id`, placing it at once with
/// `now`.
fn port_out_to(r: &mut Rig, now: bool, id: u32, f: &[u8]) -> Result<(), PortOutRefused> {
    let rt = &mut r.sp.rt;
    let parts = RtParts {
        msgs: &mut rt.msgs,
        bufs: &mut rt.bufs,
        queue: &mut rt.queue,
        ports: &rt.ports,
    };
    port_out(parts, now.then_some(&mut r.sp.ports), &id.to_le_bytes(), f)
}

/// What the far end of the veth pair received within a few seconds,
/// until `n` frames.
fn received(r: &Rig, n: usize) -> Vec<Vec<u8>> {
    let mut bufs = vec![vec![0u8; 2048]; BATCH_MAX];
    let mut lens = vec![0usize; BATCH_MAX];
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < n && Instant::now() < end {
        let _ = unet_sys::wait_readable(r.peer.fd(), Some(Duration::from_millis(100)));
        let k = r.peer.recv_batch(&mut bufs, &mut lens).unwrap();
        got.extend((0..k).map(|i| bufs[i][..lens[i]].to_vec()));
    }
    got
}

#[test]
fn a_port_out_frame_goes_on_the_ring_at_once_or_as_an_event_and_a_full_ring_is_counted() {
    let mut r = Rig::new();
    let id = r.port;
    // At once: no message, buffer or event; it leaves at the turn's end.
    let a = frame(60, 1);
    assert_eq!(port_out_to(&mut r, true, id, &a), Ok(()));
    assert_eq!((r.sp.rt.msgs.live(), r.sp.rt.bufs.live()), (0, 0));
    assert_eq!(r.sp.rt.queue.len(), 0);
    assert!(r.sp.ports.has_out(), "the turn's end flushes it");
    send_out(&mut r.sp);
    assert!(!r.sp.ports.has_out());
    assert_eq!(received(&r, 1), vec![a]);
    // Queued (the event graph recording): a `WireTx` event, placed by
    // the turn.
    let b = frame(100, 2);
    assert_eq!(port_out_to(&mut r, false, id, &b), Ok(()));
    assert_eq!(r.sp.rt.queue.len(), 1);
    assert!(r.turn() > 0);
    assert_eq!(received(&r, 1), vec![b]);
    assert_eq!((r.sp.rt.msgs.live(), r.sp.rt.bufs.live()), (0, 0));
    // A port that is not open, either way.
    for now in [true, false] {
        assert_eq!(
            port_out_to(&mut r, now, id + 1, &frame(60, 3)),
            Err(PortOutRefused::BadPort)
        );
    }
    // More than the transmit ring holds before a flush: the rest are
    // refused, counted on the port and by the runtime.
    let full = r.sp.rt.queue.drops[DropReason::DestFull as usize];
    let slots = RingConfig::default().tx_frames as usize;
    let sent = r.sp.ports.get_mut(id).unwrap().raw.counters().tx_frames;
    let mut refused = 0;
    for k in 0..slots + 10 {
        match port_out_to(&mut r, true, id, &frame(60, k as u8)) {
            Ok(()) => {}
            Err(PortOutRefused::TxRefused) => refused += 1,
            Err(e) => panic!("frame {k}: {e:?}"),
        }
    }
    assert!(refused >= 10, "{refused} refused");
    let p = r.sp.ports.get_mut(id).unwrap();
    assert_eq!(p.drops()[PortDrop::TxFull as usize], refused);
    assert_eq!(
        r.sp.rt.queue.drops[DropReason::DestFull as usize] - full,
        refused
    );
    // The rest go with the flush (the far end's socket may not hold
    // them all, so they are counted here).
    let p = r.sp.ports.get_mut(id).unwrap();
    assert_eq!(p.raw.tx_pending(), slots + 10 - refused as usize);
    assert_eq!(
        p.raw.counters().tx_frames - sent,
        slots as u64 + 10 - refused
    );
    send_out(&mut r.sp);
    assert_eq!(r.sp.ports.get_mut(id).unwrap().raw.tx_pending(), 0);
    assert!(!r.sp.ports.has_out());
}
