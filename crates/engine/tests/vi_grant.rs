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
        Some((Reply::ViConnected { vi, conn_id, .. }, _)) if conn_id != 0 => vi,
        r => panic!("not a local VI: {r:?}"),
    };
    (id(va), id(vb))
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
