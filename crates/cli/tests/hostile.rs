//! A hostile client scribbles random bytes over its own queues and pushes
//! random send descriptors as fast as it can, in its own process, while two
//! honest clients exchange 100 000 messages through the engine: nothing
//! crashes, the honest traffic is intact and complete, and the engine's
//! counters put the rejections on the hostile endpoints only.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use unet::{ChannelOptions, EndpointConfig, PathChoice, Session};
use unet_abi::{Layout, SendDesc, RING_HEADER_SIZE};

const COUNT: u64 = 100_000;

#[test]
fn child() {
    let Some(role) = role() else { return };
    if stream_role(&role) {
        return;
    }
    assert_eq!(role, "hostile", "unknown role");
    watchdog(120);
    let s = Session::connect(env("UNET_SOCKET")).unwrap_or_else(|e| fail(&format!("connect: {e}")));
    let cfg = EndpointConfig::default();
    let mut h1 = s.create_endpoint(cfg).expect("endpoint");
    let mut h2 = s.create_endpoint(cfg).expect("endpoint");
    let sink = s.create_endpoint(cfg).expect("endpoint");
    let engine = ChannelOptions {
        path: PathChoice::Engine,
    };
    let c_sink = h1.open_channel(sink.addr(), engine).expect("channel");
    let c_h2 = h1.open_channel(h2.addr(), engine).expect("channel");
    let c2 = h2.open_channel(sink.addr(), engine).expect("channel");
    say(&format!("ID {} {} {}", h1.id(), h2.id(), sink.id()));

    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    std::thread::spawn(move || {
        let _ = read_command();
        st.store(true, Ordering::Relaxed);
    });

    let layout = Layout::new(cfg.geometry).expect("layout");
    let g = cfg.geometry;
    let area = g.buffer_area_size;
    let (base, seg_len) = h2.raw_segment();
    let rings = [
        (layout.send_off, g.send_cap, 16u64),
        (
            layout.recv_off,
            g.recv_cap,
            std::mem::size_of::<unet::RecvDesc>() as u64,
        ),
        (layout.free_off, g.free_cap, 4),
        (layout.event_off, g.event_cap, 32),
    ];
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut iters = 0u64;
    let mut pushed = 0u64;
    while !stop.load(Ordering::Relaxed) {
        iters += 1;
        // Random descriptors through the library's unchecked push (h1).
        let d = random_send_desc(&mut rng, &[c_sink.0, c_h2.0], area);
        if h1.push_raw_desc(d) {
            pushed += 1;
        }
        // Raw scribbles over h2's segment: ring heads and tails, send
        // descriptors, free-ring entries, the doorbell line.
        let (at, v) = random_scribble(&mut rng, &rings);
        assert!((at as usize) + 8 <= seg_len);
        // SAFETY: inside our own mapping, 8-byte aligned; the bytes are ours
        // to corrupt (that is the point of the test).
        unsafe { std::ptr::write_volatile(base.add(at as usize).cast::<u64>(), v) };
        if iters.is_multiple_of(64) {
            // A raw descriptor on h2's valid channel, published by moving
            // its (possibly scribbled) send head on.
            let d = SendDesc {
                offset: rng.below(area) as u32,
                len: rng.below(20000) as u32,
                channel: c2.0,
                flags: 0,
                status: 0,
            };
            let head_at = layout.send_off as usize;
            // SAFETY: as above; the entry index is reduced modulo the
            // capacity, so it stays inside the ring.
            unsafe {
                let head = std::ptr::read_volatile(base.add(head_at).cast::<u64>());
                let e = head_at + RING_HEADER_SIZE + (head % g.send_cap as u64) as usize * 16;
                std::ptr::write_volatile(base.add(e).cast::<SendDesc>(), d);
                std::ptr::write_volatile(base.add(head_at).cast::<u64>(), head.wrapping_add(1));
            }
            std::thread::yield_now();
        }
        if iters == 20_000 {
            say("RUNNING");
        }
    }
    say(&format!("STOPPED {iters} {pushed}"));
    hold();
    std::mem::forget(h2);
}

const BAD: [&str; 6] = [
    "tx_bad_channel",
    "tx_bad_buffer",
    "tx_bad_length",
    "tx_bad_flags",
    "ring_corrupt",
    "free_bad_offset",
];

#[test]
fn hostile_client_does_not_disturb_honest_traffic() {
    let t = Instant::now();
    let mut d = Daemon::start(&[]);
    let mut hc = child_cmd(None, "hostile");
    hc.env("UNET_SOCKET", &d.socket);
    let mut hostile = Proc::spawn("hostile", hc);
    let ids: Vec<u32> = hostile
        .expect("ID", Duration::from_secs(20))
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    hostile.expect("RUNNING", Duration::from_secs(30));

    let mut x = run_stream((None, None), &d.socket, &d.socket, None, "engine", COUNT);
    let st = d.stat();
    hostile.tell("stop");
    let stopped = hostile.expect("STOPPED", Duration::from_secs(10));
    eprintln!("hostile: {stopped} (iterations, descriptors pushed)");

    let get = |id: u32, name: &str| -> u64 {
        endpoint_stats(&st, id).unwrap_or_else(|| panic!("endpoint {id} not live:\n{st}"))[name]
            .as_u64()
            .unwrap()
    };
    for id in [x.sender_id, x.receiver_id] {
        for c in BAD {
            assert_eq!(get(id, c), 0, "honest endpoint {id}: {c}\n{st}");
        }
        assert_eq!(get(id, "rx_drop_no_buffer"), 0, "{st}");
    }
    assert_eq!(get(x.sender_id, "tx_msgs"), COUNT, "{st}");
    assert_eq!(get(x.receiver_id, "rx_msgs"), COUNT, "{st}");
    let (h1, h2) = (ids[0], ids[1]);
    for id in [h1, h2] {
        let e = endpoint_stats(&st, id).expect("hostile endpoints are live");
        let shown: Vec<String> = BAD.iter().map(|c| format!("{c}={}", e[*c])).collect();
        eprintln!("hostile endpoint {id}: {}", shown.join(" "));
    }
    for c in ["tx_bad_channel", "tx_bad_buffer", "tx_bad_length"] {
        assert!(get(h1, c) > 0, "hostile endpoint {h1}: {c} is 0\n{st}");
    }
    let h2_bad: u64 = ["ring_corrupt", "free_bad_offset"]
        .iter()
        .map(|c| get(h2, c))
        .sum();
    assert!(
        h2_bad > 0,
        "scribbled endpoint {h2}: nothing rejected\n{st}"
    );

    x.sender.finish(Duration::from_secs(10));
    x.receiver.finish(Duration::from_secs(10));
    hostile.finish(Duration::from_secs(10));
    // The daemon survived all of it.
    d.stop();
    eprintln!("hostile test: {:?}", t.elapsed());
}
