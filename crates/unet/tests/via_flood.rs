//! A flood of VI connection requests beside honest clients (issue 39,
//! defect 7). One process listened on 2 000 discriminators and flooded
//! them with connection requests from loopback: every request scanned all
//! those waiting (twice), and each waited 60 s, so the engine's work grew
//! with the square of the flood: honest round trips fell from 167 000/s
//! to 0 and a new client's connect timed out. Waiting requests are now
//! indexed (a request's work does not grow with those waiting), a process
//! listens on a bounded number of discriminators, and the requests
//! waiting are bounded per peer address, per IP and in all.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use unet::*;
use unet_abi::EngineCounter;
use unet_engine::wire::{Body, Frame, ViOpen};

mod common;
use common::engine_counter;

const T: Option<Duration> = Some(Duration::from_secs(5));
const SEND_T: Duration = Duration::from_secs(5);

/// Discriminators the flooding process tries to listen on.
const TAGS: u64 = 2_000;
/// Requests it sends, and how many per pause.
const FLOOD: u32 = 60_000;
const BURST: u32 = 500;

fn engine_path() -> ChannelOptions {
    ChannelOptions {
        path: PathChoice::Engine,
    }
}

/// An honest pair of endpoints whose messages the engine carries.
struct Pair {
    a: Endpoint,
    b: Endpoint,
    ab: Channel,
    ba: Channel,
}

impl Pair {
    fn new(s: &Session) -> Pair {
        let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
        let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
        let ab = a.open_channel(b.addr(), engine_path()).unwrap();
        let ba = b.open_channel(a.addr(), engine_path()).unwrap();
        Pair { a, b, ab, ba }
    }

    /// Round trips per second over `d`.
    fn rate(&mut self, d: Duration) -> f64 {
        let mut buf = vec![0u8; 64];
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < d {
            self.a.send_blocking(self.ab, b"ping", SEND_T).unwrap();
            self.b.recv(&mut buf, T).expect("ping through the engine");
            self.b.send_blocking(self.ba, b"pong", SEND_T).unwrap();
            self.a.recv(&mut buf, T).expect("pong through the engine");
            n += 1;
        }
        n as f64 / start.elapsed().as_secs_f64()
    }
}

/// A connection request for discriminator `tag`, as another engine sends
/// it.
fn vi_open(request_id: u32, tag: u64) -> Vec<u8> {
    let f = Frame {
        src_engine: 0xf100d,
        body: Body::ViOpen(ViOpen {
            request_id,
            src_vi: request_id | 1,
            tag,
            src_token: 0x5eed ^ u64::from(request_id),
            reliability: unet_abi::Reliability::ReliableDelivery,
            strict_rnr: false,
            hold: 64,
        }),
    };
    let mut b = vec![0u8; f.len()];
    f.emit(&mut b).unwrap();
    b
}

#[test]
fn a_flood_of_connection_requests_leaves_honest_clients_served() {
    let e = Engine::start(EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    })
    .unwrap();
    let honest = Session::embedded(&e).unwrap();
    let to = honest.udp_addr().expect("a wire");
    let mut pair = Pair::new(&honest);
    pair.rate(Duration::from_millis(200)); // warm
    let before = pair.rate(Duration::from_secs(1));

    // The flooding process listens on as many discriminators as it may,
    // and never answers.
    let hostile = Session::embedded(&e).unwrap();
    let mut servers = Vec::new();
    for tag in 1..=TAGS {
        match hostile.vi_listen(tag) {
            Ok(s) => servers.push(s),
            Err(Error::Quota(ErrorCode::ObjectQuota)) => break,
            Err(err) => panic!("listen: {err}"),
        }
    }
    let listened = servers.len() as u64;

    // Its requests, from 16 ports of loopback, in bursts, in another
    // thread; the honest pair's round trips meanwhile.
    let flood = std::thread::spawn(move || {
        let socks: Vec<UdpSocket> = (0..16)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let mut id = 0u32;
        while id < FLOOD {
            for _ in 0..BURST {
                id += 1;
                let s = &socks[id as usize % socks.len()];
                let _ = s.send_to(&vi_open(id, 1 + u64::from(id) % TAGS), to);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let start = Instant::now();
    let during = pair.rate(Duration::from_secs(2));
    flood.join().unwrap();
    let flood_time = start.elapsed();

    // A new client connects and makes an endpoint while the requests
    // wait.
    let t0 = Instant::now();
    let newcomer = Session::embedded(&e).expect("a new client connects");
    let _ep = newcomer
        .create_endpoint(EndpointConfig::default())
        .expect("and makes an endpoint");
    let connect = t0.elapsed();
    let after = pair.rate(Duration::from_secs(1));

    let refused = [
        EngineCounter::ViPendingRefusedPeer,
        EngineCounter::ViPendingRefusedIp,
        EngineCounter::ViPendingRefusedTotal,
        EngineCounter::ViPendingRefusedBacklog,
    ]
    .map(|c| engine_counter(&honest, c));
    eprintln!(
        "honest round trips/s: {before:.0} before, {during:.0} during the flood \
         ({FLOOD} requests in {flood_time:?}), {after:.0} after; {listened} \
         discriminators listened on; new client ready in {connect:?}; refused \
         (peer, IP, total, backlog): {refused:?}; listeners refused: {}",
        engine_counter(&honest, EngineCounter::QuotaRefusedListeners)
    );
    assert!(
        listened < TAGS,
        "one process listened on {listened} discriminators"
    );
    assert!(
        engine_counter(&honest, EngineCounter::QuotaRefusedListeners) >= 1,
        "the listener refused was not counted"
    );
    assert!(
        refused.iter().sum::<u64>() > 0,
        "no request of the flood was refused by a bound"
    );
    assert!(
        connect < Duration::from_secs(2),
        "a new client took {connect:?} to connect during the flood"
    );
    assert!(
        during >= before / 5.0,
        "honest round trips fell from {before:.0}/s to {during:.0}/s during the flood"
    );
    assert!(
        after >= before / 3.0,
        "honest round trips fell from {before:.0}/s to {after:.0}/s after the flood"
    );
    drop(servers);
}

/// A connection asked of an engine that never answers is retried and
/// then refused (`Unreachable`) when its timeout passes, from the index of
/// opens by due time.
#[test]
fn a_connect_to_a_silent_engine_is_refused_when_its_timeout_passes() {
    let e = Engine::start(EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    })
    .unwrap();
    let s = Session::embedded(&e).unwrap();
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let t0 = Instant::now();
    let r = s.vi_connect(
        Some(silent.local_addr().unwrap()),
        9,
        &ViAttributes::default(),
        Some(Duration::from_millis(700)),
    );
    let took = t0.elapsed();
    assert!(
        matches!(r, Err(Error::Engine(ErrorCode::Unreachable))),
        "{:?}",
        r.err()
    );
    assert!(
        took >= Duration::from_millis(600) && took < Duration::from_secs(3),
        "refused after {took:?}"
    );
    // The open was sent, then retried.
    silent
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut buf = [0u8; 2048];
    let mut got = 0;
    while silent.recv(&mut buf).is_ok() {
        got += 1;
    }
    assert!(got >= 2, "{got} opens sent");
}
