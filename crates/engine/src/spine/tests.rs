//! The part's unit tests without extensions: what the runtime does with
//! host messages no handler takes and with deliveries it may not make.
//! The end-to-end tests with real extensions are in the client crate
//! (`crates/unet/tests/spine.rs`).

use std::sync::Arc;

use unet_abi::spine::{AmHeader, AM_SRC_HANDLER};

use super::*;
use crate::counters::Counters;
use crate::unet::am::HostAm;

fn part() -> (SpinePart, EndpointTable) {
    let cfg = EngineConfig {
        spine_bufs_max: 1,
        spine_buf_size: 8,
        ..EngineConfig::default()
    };
    let counters = Arc::new(Counters::create(4, 1).unwrap());
    let eps = EndpointTable::new(4, counters);
    (SpinePart::new(&cfg, Arc::new(EventFd::new().unwrap())), eps)
}

fn host_am(handler: u16, args: &[u8], bulk: &[u8]) -> HostAm {
    let mut data = (args.len() as u16).to_le_bytes().to_vec();
    data.extend_from_slice(args);
    data.extend_from_slice(bulk);
    HostAm {
        endpoint: 9,
        handler,
        data,
    }
}

#[test]
fn an_extension_has_at_most_its_share_of_messages_in_flight() {
    use crate::spine::msgs::EXT_MSGS_MAX;
    use crate::spine::rt::E_LIMIT;
    use unet_abi::spine::DEST_HOST;
    let (mut sp, _eps) = part();
    let rt = &mut sp.rt;
    let to_host = DEST_HOST << 24 | 9;
    // A flooding extension (slot 3) fills its share and no more.
    rt.cur.slot = 3;
    for i in 0..EXT_MSGS_MAX {
        assert_eq!(rt.send(to_host, 70, b"x", None), 0, "send {i}");
    }
    assert_eq!(rt.send(to_host, 70, b"x", None), E_LIMIT);
    assert_eq!(rt.queue.drops[DropReason::ExtLimit as usize], 1);
    assert_eq!(rt.msgs.charged(3), EXT_MSGS_MAX);
    // Its neighbour (slot 4) still sends.
    rt.cur.slot = 4;
    assert_eq!(rt.send(to_host, 71, b"y", None), 0);
    assert_eq!(rt.msgs.charged(4), 1);
    // As the flood's messages go, its share comes back.
    rt.cur.slot = 3;
    let ev = rt.queue.pop().unwrap();
    assert!(rt.msgs.free(ev.msg, &mut rt.bufs));
    assert_eq!(rt.msgs.charged(3), EXT_MSGS_MAX - 1);
    assert_eq!(rt.send(to_host, 70, b"x", None), 0);
    // The runtime's own sends (no invocation running) are charged to no
    // extension.
    rt.cur.slot = u32::MAX;
    assert_eq!(rt.send(to_host, 70, b"x", None), 0);
    assert_eq!(rt.msgs.charged(3), EXT_MSGS_MAX);
}

#[test]
fn a_message_no_handler_takes_is_dropped_and_counted() {
    let (mut sp, mut eps) = part();
    eps.am.queue.push_back(host_am(70, b"hi", &[]));
    eps.am.queue.push_back(host_am(71, b"", &[1, 2, 3]));
    // One turn takes both in and runs them to their (missing) handlers.
    assert!(
        SpineTurn {
            spine: &mut sp,
            eps: &mut eps
        }
        .turn(&mut cx())
            > 0
    );
    let q = &sp.rt.queue;
    assert_eq!(q.drops[DropReason::NoHandler as usize], 2);
    assert_eq!(q.run[EventKind::HostTx as usize], 2);
    assert_eq!((sp.rt.msgs.live(), sp.rt.bufs.live()), (0, 0));
    assert_eq!(
        SpineTurn {
            spine: &mut sp,
            eps: &mut eps
        }
        .turn(&mut cx()),
        0
    );
}

#[test]
fn a_bulk_message_without_a_buffer_is_dropped_and_counted() {
    let (mut sp, mut eps) = part();
    let held = sp.rt.bufs.alloc(b"x").unwrap();
    eps.am.queue.push_back(host_am(70, b"", &[1]));
    SpineTurn {
        spine: &mut sp,
        eps: &mut eps,
    }
    .turn(&mut cx());
    assert_eq!(sp.rt.queue.drops[DropReason::NoBuffer as usize], 1);
    assert_eq!(sp.rt.msgs.live(), 0);
    sp.rt.bufs.release(held);
    assert_eq!(sp.rt.bufs.live(), 0);
}

#[test]
fn a_delivery_to_an_endpoint_of_another_owner_is_refused() {
    let (mut sp, mut eps) = part();
    let hdr = AmHeader {
        handler: 70,
        src_kind: AM_SRC_HANDLER,
        src: 5,
        ..AmHeader::default()
    };
    let m = sp.rt.msgs.alloc(hdr, b"x", None).unwrap();
    let ev = Event {
        kind: EventKind::DeliverHost,
        msg: m,
        arg: 3,
    };
    sp.rt.queue.push(ev).unwrap();
    SpineTurn {
        spine: &mut sp,
        eps: &mut eps,
    }
    .turn(&mut cx());
    assert_eq!(sp.rt.queue.drops[DropReason::BadDest as usize], 1);
    assert_eq!(sp.rt.msgs.live(), 0);
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
