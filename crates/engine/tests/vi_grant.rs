//! Regions a local VI's sender lets its peer read. A large send on a local
//! VI is read by the receiver straight from the sender's region; the
//! engine hands the receiver that region's memory only when its owner
//! granted it to that very VI, and only for reading. Checked through the
//! real control path of a stepped engine, with clients that ask for what
//! they should not get.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use unet_control::{ErrorCode, Reply, Request, ViParams};
use unet_engine::invoker::LocalClient;
use unet_engine::{Dispatcher, EngineConfig};

const REGION: usize = 64 << 10;

/// Connect a local VI of `ca` to one `cb` accepts on `tag`: their ids.
fn connect_local(
    e: &mut Dispatcher,
    ca: &mut LocalClient,
    cb: &mut LocalClient,
    tag: u64,
) -> (u32, u32) {
    let (a, b, _) = connect_local_seg(e, ca, cb, tag);
    (a, b)
}

/// [`connect_local`], with the segment of their connection.
fn connect_local_seg(
    e: &mut Dispatcher,
    ca: &mut LocalClient,
    cb: &mut LocalClient,
    tag: u64,
) -> (u32, u32, OwnedFd) {
    cb.vi_listen(e, tag).unwrap();
    let attrs = ViParams::default();
    let connect = ca
        .send_request(
            &Request::ViConnect {
                host: None,
                tag,
                attrs,
                timeout_ms: 5000,
            },
            &[],
        )
        .unwrap();
    let (mut accept, mut va, mut vb) = (None, None, None);
    let start = Instant::now();
    while va.is_none() || vb.is_none() {
        e.step();
        if accept.is_none() {
            if let Some(request) = cb.take_vi_request(tag).unwrap() {
                accept = Some(
                    cb.send_request(&Request::ViAccept { request, attrs }, &[])
                        .unwrap(),
                );
            }
        }
        if va.is_none() {
            va = ca.take_reply(connect).unwrap();
        }
        if let (Some(id), None) = (accept, &vb) {
            vb = cb.take_reply(id).unwrap();
        }
        assert!(start.elapsed() < Duration::from_secs(5), "not connected");
    }
    let id = |r: Option<(Reply, Vec<OwnedFd>)>| match r {
        Some((Reply::ViConnected { vi, conn_id, .. }, fds)) if conn_id != 0 => (vi, fds),
        r => panic!("not a local VI: {r:?}"),
    };
    let ((a, mut fds), (b, _)) = (id(va), id(vb));
    assert!(!fds.is_empty(), "a local VI without its segment");
    (a, b, fds.remove(0))
}

fn refused(r: (Reply, Vec<OwnedFd>)) -> ErrorCode {
    match r {
        (Reply::Error(c), fds) => {
            assert!(fds.is_empty(), "a refusal came with descriptors");
            c
        }
        (r, _) => panic!("expected a refusal, got {r:?}"),
    }
}

#[test]
fn a_region_is_handed_only_to_the_vi_it_was_granted_to_and_only_for_reading() {
    let mut e = Dispatcher::new(EngineConfig::default()).unwrap();
    let mut ca = LocalClient::new(&mut e).unwrap();
    let mut cb = LocalClient::new(&mut e).unwrap();
    let mut cc = LocalClient::new(&mut e).unwrap();
    let (va, vb) = connect_local(&mut e, &mut ca, &mut cb, 7);
    // A third process with a VI of its own to `ca`.
    let (va2, vc) = connect_local(&mut e, &mut ca, &mut cc, 8);
    let mem = ca.register_memory(&mut e, REGION).unwrap();
    let secret: Vec<u8> = (0..REGION).map(|i| (i * 13 + 5) as u8).collect();
    mem.write(0, &secret);
    let h = mem.handle();
    let peer_region = |c: &mut LocalClient, e: &mut Dispatcher, vi| {
        c.call(e, &Request::ViPeerRegion { vi, handle: h }, &[])
            .unwrap()
    };

    // Not granted yet: nobody gets it.
    assert_eq!(
        refused(peer_region(&mut cb, &mut e, vb)),
        ErrorCode::NoSuchRegion
    );
    // Only the owner grants, only on its own VI.
    let grant = |c: &mut LocalClient, e: &mut Dispatcher, vi| {
        c.call(e, &Request::ViGrantRegion { vi, handle: h }, &[])
            .unwrap()
    };
    assert_eq!(refused(grant(&mut cb, &mut e, vb)), ErrorCode::NoSuchRegion);
    assert_eq!(refused(grant(&mut cc, &mut e, va)), ErrorCode::NoSuchVi);
    assert!(matches!(grant(&mut ca, &mut e, va).0, Reply::Ok));

    // Granted on va: its peer vb gets it; the other process does not,
    // through its own VI or by naming vb; the owner's other VI's peer
    // does not either.
    assert_eq!(
        refused(peer_region(&mut cc, &mut e, vc)),
        ErrorCode::NoSuchRegion
    );
    assert_eq!(
        refused(peer_region(&mut cc, &mut e, vb)),
        ErrorCode::NoSuchVi
    );
    assert_eq!(
        refused(peer_region(&mut ca, &mut e, va2)),
        ErrorCode::NoSuchRegion
    );
    let (r, mut fds) = peer_region(&mut cb, &mut e, vb);
    assert!(
        matches!(r, Reply::PeerRegion { len } if len == REGION as u64),
        "{r:?}"
    );
    assert_eq!(fds.len(), 1);
    let fd = fds.remove(0);

    // Open for reading only: no writable shared mapping, no write.
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own.
    let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
    assert_eq!(flags & libc::O_ACCMODE, libc::O_RDONLY);
    // SAFETY: a fresh mapping at an address the kernel picks (none is
    // made if it fails, as it must); unmapped below if it is made.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            REGION,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            raw,
            0,
        )
    };
    if p != libc::MAP_FAILED {
        // SAFETY: the mapping just made, of REGION bytes.
        unsafe { libc::munmap(p, REGION) };
        panic!("a writable mapping of a granted region");
    }
    // SAFETY: a write of one byte from a live buffer.
    let n = unsafe { libc::write(raw, b"x".as_ptr().cast(), 1) };
    assert_eq!(n, -1, "a write to a granted region");
    // And it is the region's memory.
    let seg = unet_sys::Segment::open_unpopulated(fd, REGION, false).unwrap();
    // SAFETY: the mapping has REGION readable bytes and lives as long as
    // `seg`; nobody writes it meanwhile.
    let seen = unsafe { std::slice::from_raw_parts(seg.ptr().as_ptr(), REGION) };
    assert!(
        seen == &secret[..],
        "the granted memory is not the region's"
    );

    // Once the region is deregistered, it is handed to nobody.
    ca.deregister_memory(&mut e, h).unwrap();
    assert_eq!(
        refused(peer_region(&mut cb, &mut e, vb)),
        ErrorCode::NoSuchRegion
    );
}

/// Issue 39, defect 2: a grant outlived its VI. After the VI it was made
/// for closed, its former peer could still map the region and read what
/// the owner wrote there afterwards. A grant now ends when either VI of
/// the connection closes or the connection breaks, and a lookup needs a
/// live connection.
#[test]
fn a_grant_ends_when_its_vi_closes_from_either_side_or_breaks() {
    let mut e = Dispatcher::new(EngineConfig::default()).unwrap();
    let mut ca = LocalClient::new(&mut e).unwrap();
    let mut cb = LocalClient::new(&mut e).unwrap();
    let mem = ca.register_memory(&mut e, REGION).unwrap();
    let h = mem.handle();
    let grant = |c: &mut LocalClient, e: &mut Dispatcher, vi| {
        c.call(e, &Request::ViGrantRegion { vi, handle: h }, &[])
            .unwrap()
    };
    let peer_region = |c: &mut LocalClient, e: &mut Dispatcher, vi| {
        c.call(e, &Request::ViPeerRegion { vi, handle: h }, &[])
            .unwrap()
    };

    // The owner closes its VI: the peer's VI stays (closed), its lookup
    // is refused.
    let (va, vb) = connect_local(&mut e, &mut ca, &mut cb, 1);
    assert!(matches!(grant(&mut ca, &mut e, va).0, Reply::Ok));
    assert!(matches!(
        peer_region(&mut cb, &mut e, vb).0,
        Reply::PeerRegion { .. }
    ));
    ca.close_vi(&mut e, va).unwrap();
    assert_eq!(
        refused(peer_region(&mut cb, &mut e, vb)),
        ErrorCode::NoSuchVi,
        "the region was handed over after the owner closed the VI it was granted for"
    );
    // Nor can the owner grant on the closed connection's remains.
    assert_eq!(refused(grant(&mut cb, &mut e, vb)), ErrorCode::NoSuchVi);

    // The peer closes its VI: the grant ends with it (the region no
    // longer lists it), and a new VI of the peer's does not inherit it.
    let (va, vb) = connect_local(&mut e, &mut ca, &mut cb, 2);
    assert!(matches!(grant(&mut ca, &mut e, va).0, Reply::Ok));
    cb.close_vi(&mut e, vb).unwrap();
    assert_eq!(
        refused(peer_region(&mut cb, &mut e, vb)),
        ErrorCode::NoSuchVi
    );
    let (_va3, vb3) = connect_local(&mut e, &mut ca, &mut cb, 3);
    assert_eq!(
        refused(peer_region(&mut cb, &mut e, vb3)),
        ErrorCode::NoSuchRegion
    );

    // The connection breaks (a side in the error state): the lookup is
    // refused while the VIs still exist.
    let (va, vb, conn) = connect_local_seg(&mut e, &mut ca, &mut cb, 4);
    assert!(matches!(grant(&mut ca, &mut e, va).0, Reply::Ok));
    assert!(matches!(
        peer_region(&mut cb, &mut e, vb).0,
        Reply::PeerRegion { .. }
    ));
    let seg =
        unet_sys::Segment::open(conn, std::mem::size_of::<unet_abi::ConnHeader>(), true).unwrap();
    // SAFETY: the segment starts with the connection's header (mapped
    // with at least its size); its error words are atomics.
    let hdr = unsafe { seg.ptr().cast::<unet_abi::ConnHeader>().as_ref() };
    hdr.a_error.store(
        unet_abi::ViError::PeerGone as u32,
        std::sync::atomic::Ordering::Release,
    );
    assert_eq!(
        refused(peer_region(&mut cb, &mut e, vb)),
        ErrorCode::NoSuchVi,
        "the region was handed over on a broken connection"
    );

    // The peer's process dies: its VIs close, the grants to them end.
    let (va, _vb) = connect_local(&mut e, &mut ca, &mut cb, 5);
    assert!(matches!(grant(&mut ca, &mut e, va).0, Reply::Ok));
    let ended = |e: &mut Dispatcher| {
        e.counters()
            .engine_value(unet_abi::EngineCounter::ViGrantsEnded)
    };
    let before = ended(&mut e);
    drop(cb);
    let start = Instant::now();
    while ended(&mut e) == before {
        e.step();
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the grant outlived its peer's process"
        );
    }
}
