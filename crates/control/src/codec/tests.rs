//! The control codec's tests: every kind's sample (the fuzz target's
//! seeds), round trips, cuts and garbage.

use super::*;

/// The control fuzz target's property, for the tests: `b` decoded as a
/// request and as a reply never panics, and whatever decodes encodes to a
/// packet of at most [`MAX_PACKET`] bytes that decodes to the same value.
fn round_trips(b: &[u8]) {
    if let Ok((id, req)) = Request::decode(b) {
        let e = req.encode(id);
        assert!(e.len() <= MAX_PACKET && e.len() <= b.len(), "{req:?}");
        assert_eq!(Request::decode(&e), Ok((id, req)), "from {b:02x?}");
    }
    if let Ok((id, rep)) = Reply::decode(b) {
        let e = rep.encode(id);
        assert!(e.len() <= MAX_PACKET && e.len() <= b.len(), "{rep:?}");
        assert_eq!(Reply::decode(&e), Ok((id, rep)), "from {b:02x?}");
    }
}

/// The limits the samples' `Stat` replies carry.
fn sample_limits() -> Limits {
    Limits {
        client_memory: 4 << 30,
        user_memory: u64::MAX,
        client_endpoints: 16,
        client_idle_connections: 32,
        user_idle_connections: 128,
        client_regions: 1024,
        client_vis: 1024,
        client_listeners: 64,
        client_udm_jobs: 32,
        client_udm_nodes: 256,
        vi_held_budget: 4 << 20,
    }
}

/// One of each request and reply, the seeds of the control fuzz target
/// (`fuzz/seeds/control/`).
fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let reqs = [
        ("hello", Request::Hello { version: 1 }),
        (
            "create_endpoint",
            Request::CreateEndpoint {
                geometry: Geometry::default(),
                accept: true,
                buffer_limit: 0,
            },
        ),
        (
            "create_endpoint_buffered",
            Request::CreateEndpoint {
                geometry: Geometry::default(),
                accept: true,
                buffer_limit: 16 << 20,
            },
        ),
        (
            "open_channel_v4",
            Request::OpenChannel {
                endpoint: 3,
                dst: EndpointAddr {
                    host: Some("10.0.0.1:7000".parse().unwrap()),
                    id: 9,
                },
                path: PathChoice::Engine,
            },
        ),
        (
            "open_channel_v6",
            Request::OpenChannel {
                endpoint: 3,
                dst: EndpointAddr {
                    host: Some("[::1]:7000".parse().unwrap()),
                    id: 9,
                },
                path: PathChoice::Direct,
            },
        ),
        (
            "open_channel_local",
            Request::OpenChannel {
                endpoint: 1,
                dst: EndpointAddr::local(2),
                path: PathChoice::Auto,
            },
        ),
        (
            "close_channel",
            Request::CloseChannel {
                endpoint: 1,
                channel: 2,
            },
        ),
        ("close_endpoint", Request::CloseEndpoint { endpoint: 1 }),
        (
            "set_accept",
            Request::SetAccept {
                endpoint: 1,
                accept: false,
            },
        ),
        ("stat", Request::Stat),
        (
            "spine_load",
            Request::SpineLoad {
                len: 2048,
                budget_us: 10,
                arg: -7,
                name: "echo é".into(),
                domains: vec!["spine".into(), "router".into()],
            },
        ),
        ("spine_unload", Request::SpineUnload { id: 3 }),
        ("spine_list", Request::SpineList),
        ("peer_join", Request::PeerJoin { side: 1 }),
        ("peer_doorbell", Request::PeerDoorbell { index: 17 }),
        ("peer_leave", Request::PeerLeave { index: 17 }),
        ("peer_list", Request::PeerList),
        (
            "attach_applet",
            Request::AttachApplet {
                endpoint: 1,
                len: 700,
                fuel: 5,
                heap: 9,
            },
        ),
        ("detach_applet", Request::DetachApplet { endpoint: 1 }),
        ("register_memory", Request::RegisterMemory { len: 1 << 20 }),
        ("deregister_memory", Request::DeregisterMemory { handle: 3 }),
        ("vi_listen", Request::ViListen { tag: 42 }),
        ("vi_unlisten", Request::ViUnlisten { tag: 42 }),
        (
            "vi_connect",
            Request::ViConnect {
                host: Some("127.0.0.1:7700".parse().unwrap()),
                tag: 42,
                attrs: ViParams {
                    reliability: Reliability::ReliableReception,
                    strict_rnr: true,
                    break_timeout_ms: 0,
                },
                timeout_ms: 5000,
            },
        ),
        (
            "vi_accept",
            Request::ViAccept {
                request: 7,
                attrs: ViParams::default(),
            },
        ),
        ("vi_reject", Request::ViReject { request: 7 }),
        ("vi_close", Request::ViClose { vi: 5 }),
        (
            "vi_grant_region",
            Request::ViGrantRegion { vi: 5, handle: 9 },
        ),
        ("vi_peer_region", Request::ViPeerRegion { vi: 5, handle: 9 }),
        (
            "udm_create_job",
            Request::UdmCreateJob {
                nodes: 4,
                fast_cap: 8,
                buffer_size: 1 << 20,
                atomicity_timeout_us: 2000,
            },
        ),
        (
            "udm_join",
            Request::UdmJoin {
                job: 1,
                key: 0x1234_5678_9abc_def0,
                rank: 3,
            },
        ),
        ("udm_leave", Request::UdmLeave { job: 1, rank: 3 }),
        (
            "udm_schedule",
            Request::UdmSchedule {
                job: 1,
                key: 0x1234_5678_9abc_def0,
                ranks: 0b1010,
                running: false,
            },
        ),
        (
            "udm_join_remote",
            Request::UdmJoinRemote {
                home: "127.0.0.1:9".parse().unwrap(),
                job: 1,
                key: 0x1234_5678_9abc_def0,
                rank: 3,
            },
        ),
        (
            "trace_set",
            Request::TraceSet {
                on: true,
                capacity: 1 << 16,
            },
        ),
        ("trace_dump", Request::TraceDump),
        (
            "spine_link_listen",
            Request::SpineLinkListen {
                token: 0x0123_4567_89ab_cdef,
            },
        ),
        (
            "spine_link_connect",
            Request::SpineLinkConnect {
                peer: "127.0.0.1:7700".parse().unwrap(),
                token: 0x0123_4567_89ab_cdef,
            },
        ),
        ("spine_link_close", Request::SpineLinkClose { link: 0x102 }),
        ("spine_links", Request::SpineLinks),
        (
            "spine_table",
            Request::SpineTable {
                ext: 3,
                table: 1,
                len: 10_044_400,
            },
        ),
        (
            "spine_port_open",
            Request::SpinePortOpen {
                interface: "veth0".into(),
                handler: 70,
            },
        ),
        ("spine_port_close", Request::SpinePortClose { port: 0x101 }),
        ("spine_ports", Request::SpinePorts),
        (
            "spine_framebuffer",
            Request::SpineFramebuffer {
                ext: 3,
                width: 640,
                height: 480,
            },
        ),
        (
            "spine_framebuffer_view",
            Request::SpineFramebufferView { ext: 3, index: 1 },
        ),
    ];
    let reps = [
        (
            "reply_hello",
            Reply::Hello {
                engine_id: 5,
                udp: Some("127.0.0.1:9".parse().unwrap()),
            },
        ),
        (
            "reply_endpoint_created",
            Reply::EndpointCreated { endpoint: 4 },
        ),
        (
            "reply_channel_opened",
            Reply::ChannelOpened {
                channel: 1,
                conn_id: 2,
                side: 1,
            },
        ),
        ("reply_ok", Reply::Ok),
        ("reply_error", Reply::Error(ErrorCode::QuotaExceeded)),
        (
            "reply_stat",
            Reply::Stat {
                max_endpoints: 64,
                limits: sample_limits(),
            },
        ),
        (
            "reply_rejected",
            Reply::Rejected("method run: bytecode 12: stack underflow é".into()),
        ),
        (
            "reply_spine_loaded",
            Reply::SpineLoaded {
                id: 3,
                handlers: vec![64, 70, 1023],
            },
        ),
        ("reply_spine_listing", Reply::SpineListing { len: 4096 }),
        ("reply_peer_joined", Reply::PeerJoined { index: 17 }),
        ("reply_peer_listing", Reply::PeerListing { len: 512 }),
        (
            "reply_memory_registered",
            Reply::MemoryRegistered { handle: 3 },
        ),
        ("reply_peer_region", Reply::PeerRegion { len: 1 << 20 }),
        (
            "reply_vi_connected",
            Reply::ViConnected {
                vi: 5,
                conn_id: 6,
                side: 1,
            },
        ),
        (
            "reply_vi_request",
            Reply::ViRequest {
                tag: 42,
                request: 7,
                attrs: ViParams {
                    reliability: Reliability::Unreliable,
                    strict_rnr: false,
                    break_timeout_ms: 250,
                },
                pid: 1234,
                host: None,
            },
        ),
        (
            "reply_udm_job",
            Reply::UdmJob {
                job: 1,
                key: 0x1234_5678_9abc_def0,
            },
        ),
        ("reply_udm_joined", Reply::UdmJoined { job: 1, rank: 3 }),
        (
            "reply_udm_advice",
            Reply::UdmAdvice {
                job: 1,
                near_full: 0b10,
                descheduled: 0b1010,
            },
        ),
        (
            "reply_direct_conn",
            Reply::DirectConn {
                endpoint: 1,
                channel: 2,
                conn_id: 3,
                side: 1,
            },
        ),
        (
            "reply_trace_state",
            Reply::TraceState {
                on: true,
                capacity: 1 << 16,
                recorded: 70_000,
                overwritten: 4_464,
            },
        ),
        (
            "reply_trace_dump",
            Reply::TraceDump {
                events: 3,
                len: 4096,
            },
        ),
        (
            "reply_spine_link",
            Reply::SpineLink {
                link: 0x102,
                token: 0x0123_4567_89ab_cdef,
            },
        ),
        (
            "reply_spine_link_listing",
            Reply::SpineLinkListing { len: 512 },
        ),
        (
            "reply_spine_table_loaded",
            Reply::SpineTableLoaded {
                version: 2,
                bytes: 10_044_480,
            },
        ),
        ("reply_spine_port", Reply::SpinePort { port: 0x101 }),
        (
            "reply_spine_port_listing",
            Reply::SpinePortListing { len: 512 },
        ),
        (
            "reply_spine_framebuffer",
            Reply::SpineFramebuffer {
                index: 1,
                len: 1_228_864,
            },
        ),
        (
            "reply_spine_framebuffer_view",
            Reply::SpineFramebufferView {
                width: 640,
                height: 480,
                len: 1_228_864,
            },
        ),
    ];
    let mut v: Vec<(&str, Vec<u8>)> = reqs.iter().map(|(n, r)| (*n, r.encode(17))).collect();
    v.extend(reps.iter().map(|(n, r)| (*n, r.encode(17))));
    v
}

fn seeds_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/control")
}

/// The committed seeds are the samples' encodings (`UNET_BLESS=1`
/// rewrites them), and each round-trips.
#[test]
fn fuzz_seeds_are_the_samples_and_round_trip() {
    let dir = seeds_dir();
    if std::env::var_os("UNET_BLESS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, b) in samples() {
            std::fs::write(dir.join(name), b).unwrap();
        }
    }
    let mut n = 0;
    for (name, b) in samples() {
        let seed = std::fs::read(dir.join(name))
            .unwrap_or_else(|e| panic!("seed {name}: {e} (UNET_BLESS=1 writes it)"));
        assert_eq!(seed, b, "seed {name} differs from its sample");
        assert!(
            Request::decode(&b).is_ok() || Reply::decode(&b).is_ok(),
            "{name}"
        );
        round_trips(&b);
        n += 1;
    }
    assert_eq!(n, std::fs::read_dir(&dir).unwrap().count());
}

/// Each kind of the table has its sample (so its seed), and no number
/// is both a request's and a reply's kind.
#[test]
fn every_kind_has_a_sample_and_the_directions_do_not_share_numbers() {
    let kinds: std::collections::BTreeSet<u16> = samples()
        .iter()
        .map(|(_, b)| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    for k in ReqKind::ALL {
        assert!(kinds.contains(&(*k as u16)), "no sample of {k:?}");
        assert_eq!(ReqKind::from_u16(*k as u16), Some(*k));
        assert_eq!(ReplyKind::from_u16(*k as u16), None, "{k:?}");
    }
    for k in ReplyKind::ALL {
        assert!(kinds.contains(&(*k as u16)), "no sample of {k:?}");
        assert_eq!(ReplyKind::from_u16(*k as u16), Some(*k));
    }
    assert_eq!(kinds.len(), ReqKind::ALL.len() + ReplyKind::ALL.len());
}

/// xorshift64*: a fixed sequence, so a failure replays.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The fuzz target's property over a few thousand packets: random
/// ones, and the samples mutated (bytes changed, cut, extended, kinds
/// swapped).
#[test]
fn random_and_mutated_packets_decode_totally_and_round_trip() {
    let samples = samples();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut decoded = 0;
    for i in 0..20_000 {
        let mut b = if i % 4 == 0 {
            let len = rng.below(48);
            (0..len).map(|_| rng.next() as u8).collect()
        } else {
            samples[rng.below(samples.len())].1.clone()
        };
        for _ in 0..1 + rng.below(4) {
            match rng.below(6) {
                0 if !b.is_empty() => {
                    let at = rng.below(b.len());
                    b[at] = rng.next() as u8;
                }
                1 if !b.is_empty() => {
                    let at = rng.below(b.len());
                    b[at] ^= 1 << rng.below(8);
                }
                2 => b.truncate(rng.below(b.len() + 1)),
                3 => b.extend((0..rng.below(16)).map(|_| rng.next() as u8)),
                4 if b.len() >= 2 => {
                    // Another kind: one of the defined ones, or near them.
                    let kinds = [0u16, 1, 5, 9, 10, 100, 101, 105, 108, 109];
                    let k = kinds[rng.below(kinds.len())];
                    b[..2].copy_from_slice(&k.to_le_bytes());
                }
                5 if b.len() > 10 => {
                    // A text length or address family byte set large.
                    let at = 8 + rng.below(3);
                    b[at] = 0xff;
                }
                _ => {}
            }
        }
        round_trips(&b);
        decoded += (Request::decode(&b).is_ok() || Reply::decode(&b).is_ok()) as u32;
    }
    // The mutations keep many packets valid: the round trip is tried.
    assert!(decoded > 2_000, "only {decoded} packets decoded");
}

#[test]
fn rejected_text_that_is_not_utf8_is_refused() {
    let mut b = Reply::Rejected("abc".into()).encode(1);
    let n = b.len();
    b[n - 1] = 0xff;
    assert_eq!(Reply::decode(&b), Err(ControlError::BadField("text")));
    // Before, this decoded lossily to 900 replacement characters, which
    // encode to 900 bytes of 300 of them: not the same reply.
    let mut b = packet(ReplyKind::Rejected as u16, 1);
    b.u16(MAX_TEXT as u16);
    b.put(&[0xff; MAX_TEXT]);
    assert_eq!(Reply::decode(b.done()), Err(ControlError::BadField("text")));
    round_trips(b.done());
}

#[test]
fn requests_round_trip_and_prefixes_fail() {
    let reqs = [
        Request::Hello { version: 1 },
        Request::CreateEndpoint {
            geometry: Geometry::default(),
            accept: true,
            buffer_limit: 0,
        },
        Request::CreateEndpoint {
            geometry: Geometry::default(),
            accept: false,
            buffer_limit: 1 << 20,
        },
        Request::OpenChannel {
            endpoint: 3,
            dst: EndpointAddr {
                host: Some("10.0.0.1:7000".parse().unwrap()),
                id: 9,
            },
            path: PathChoice::Engine,
        },
        Request::OpenChannel {
            endpoint: 3,
            dst: EndpointAddr {
                host: Some("[::1]:7000".parse().unwrap()),
                id: 9,
            },
            path: PathChoice::Direct,
        },
        Request::CloseChannel {
            endpoint: 1,
            channel: 2,
        },
        Request::CloseEndpoint { endpoint: 1 },
        Request::SetAccept {
            endpoint: 1,
            accept: false,
        },
        Request::Stat,
        Request::AttachApplet {
            endpoint: 1,
            len: 700,
            fuel: 5,
            heap: 9,
        },
        Request::DetachApplet { endpoint: 1 },
        Request::UdmSchedule {
            job: 7,
            key: u64::MAX,
            ranks: u64::MAX,
            running: true,
        },
        Request::TraceSet {
            on: false,
            capacity: 0,
        },
        Request::TraceDump,
    ];
    for r in reqs {
        let b = r.encode(77);
        assert_eq!(Request::decode(&b), Ok((77, r.clone())));
        for cut in 0..b.len() {
            assert!(Request::decode(&b[..cut]).is_err(), "{r:?} cut at {cut}");
        }
    }
}

#[test]
fn replies_round_trip() {
    let reps = [
        Reply::Hello {
            engine_id: 5,
            udp: Some("127.0.0.1:9".parse().unwrap()),
        },
        Reply::EndpointCreated { endpoint: 4 },
        Reply::ChannelOpened {
            channel: 1,
            conn_id: 2,
            side: 1,
        },
        Reply::Ok,
        Reply::Error(ErrorCode::Refused),
        Reply::Stat {
            max_endpoints: 64,
            limits: sample_limits(),
        },
        Reply::DirectConn {
            endpoint: 1,
            channel: 2,
            conn_id: 3,
            side: 1,
        },
        Reply::UdmAdvice {
            job: 7,
            near_full: u64::MAX,
            descheduled: 1,
        },
        Reply::TraceState {
            on: false,
            capacity: 1 << 20,
            recorded: u64::MAX,
            overwritten: 1,
        },
        Reply::TraceDump {
            events: 65_536,
            len: 2 << 20,
        },
    ];
    for r in reps {
        let b = r.encode(9);
        assert_eq!(Reply::decode(&b), Ok((9, r.clone())));
    }
}

#[test]
fn every_error_code_round_trips() {
    for v in 1..=32u16 {
        let c = ErrorCode::from_u16(v).unwrap_or_else(|| panic!("code {v}"));
        assert_eq!(c as u16, v);
        let r = Reply::Error(c);
        assert_eq!(Reply::decode(&r.encode(3)), Ok((3, r)));
        assert!(!c.to_string().is_empty());
    }
    assert_eq!(ErrorCode::from_u16(0), None);
    assert_eq!(ErrorCode::from_u16(33), None);
}

#[test]
fn garbage_is_an_error() {
    assert_eq!(
        Request::decode(&[0xff, 0xff, 0, 0, 0, 0, 0, 0]),
        Err(ControlError::UnknownKind(0xffff))
    );
    let mut b = Request::SetAccept {
        endpoint: 1,
        accept: true,
    }
    .encode(1);
    *b.last_mut().unwrap() = 7;
    assert_eq!(Request::decode(&b), Err(ControlError::BadField("bool")));
}

#[test]
fn endpoint_addr_parses() {
    assert_eq!("5".parse::<EndpointAddr>().unwrap(), EndpointAddr::local(5));
    assert_eq!(
        "local/5".parse::<EndpointAddr>().unwrap(),
        EndpointAddr::local(5)
    );
    let a: EndpointAddr = "127.0.0.1:7000/3".parse().unwrap();
    assert_eq!(a.host, Some("127.0.0.1:7000".parse().unwrap()));
    assert!("x/3".parse::<EndpointAddr>().is_err());
}
