//! Read-only views of a SPINE framebuffer (`spine/framebuffer.rs`,
//! `view`): another client of the extension's user maps an existing
//! framebuffer read-only and sees the extension's writes; the descriptor
//! the engine hands cannot be mapped writable; an unknown extension or
//! framebuffer is refused; once the extension goes no view is given, and
//! a view mapped before stays readable. Another user's extension is
//! refused too (the engine's unit test, which can give clients other
//! users; here every client is this test's user).

use std::sync::OnceLock;
use std::time::Duration;

use unet::spine::ExtensionOptions;
use unet::{EndpointConfig, EngineConfig, Error, ErrorCode, Session};

mod common;
use common::{engine_with, javac, recv_am, repo, wait_listing};

/// The extension's handler.
const POKE: u16 = 64;

/// `extensions/FbWrite.java`: `[fb, fbOffset]` and a bulk message: copies the whole bulk
/// buffer to that offset of framebuffer `fb` and answers `fbWrite`'s
/// result.
fn class() -> &'static [u8] {
    static CLASS: OnceLock<Vec<u8>> = OnceLock::new();
    CLASS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("unet-spine-fbview-{}", std::process::id()));
        javac(&dir, &[repo().join("extensions/FbWrite.java")], &[])
            .remove("FbWrite")
            .expect("FbWrite.class")
    })
}

fn load(s: &Session) -> u32 {
    let opts = ExtensionOptions {
        arg: i32::from(POKE),
        ..ExtensionOptions::named("fbwrite")
    };
    s.load_extension(class(), opts).unwrap().id
}

/// `fbWrite(fb, at, bytes)` by the extension: its result.
fn write(ep: &mut unet::Endpoint, fb: i32, at: i32, bytes: &[u8]) -> i32 {
    let a: Vec<u8> = [fb, at].iter().flat_map(|v| v.to_le_bytes()).collect();
    ep.send_am(POKE, &a, bytes).unwrap();
    let (h, r, _) = recv_am(ep, Duration::from_secs(10));
    assert_eq!(h, POKE);
    i32::from_le_bytes(r[..4].try_into().unwrap())
}

fn bytes(fb: &unet::spine_framebuffer::Framebuffer) -> Vec<u8> {
    let mut b = vec![0u8; fb.pixel_bytes()];
    assert!(fb.read(0, &mut b));
    b
}

/// A refusal's text.
fn refused(r: Result<unet::spine_framebuffer::Framebuffer, Error>) -> String {
    match r {
        Err(Error::Rejected(why)) => why,
        Err(e) => panic!("refused otherwise: {e:?}"),
        Ok(_) => panic!("not refused"),
    }
}

#[test]
fn a_view_sees_the_extensions_writes_and_cannot_write() {
    let (e, owner) = engine_with(EngineConfig::default());
    let ext = load(&owner);
    let fb = owner.spine_framebuffer(ext, 8, 4, true).unwrap();
    let _second = owner.spine_framebuffer(ext, 2, 2, false).unwrap();
    // A viewer: another client of the same user.
    let viewer = Session::embedded(&e).unwrap();
    let view = viewer.spine_framebuffer_view(ext, 0).unwrap();
    assert_eq!((view.index(), view.width(), view.height()), (0, 8, 4));
    let small = viewer.spine_framebuffer_view(ext, 1).unwrap();
    assert_eq!((small.width(), small.height()), (2, 2));
    let mut ep = owner.create_endpoint(EndpointConfig::default()).unwrap();
    let data: Vec<u8> = (1..=24).collect();
    assert_eq!(write(&mut ep, 0, 40, &data), 24);
    let mut want = vec![0u8; 128];
    want[40..64].copy_from_slice(&data);
    assert_eq!(bytes(&view), want, "the view sees the extension's write");
    assert_eq!(view.counters(), fb.counters());
    assert_eq!((view.counters().writes, view.counters().bytes), (1, 24));
    // The owner's own drawing shows too; the view writes nothing.
    assert!(fb.write(0, &[5, 6, 7, 8]));
    want[..4].copy_from_slice(&[5, 6, 7, 8]);
    assert_eq!(bytes(&view), want);
    assert!(!view.write(0, &[0; 4]), "a view is read-only");
    assert_eq!(bytes(&fb), want);
    assert_eq!(bytes(&small), vec![0; 16]);
}

#[test]
fn the_views_descriptor_maps_only_read_only() {
    let (e, owner) = engine_with(EngineConfig::default());
    let ext = load(&owner);
    let fb = owner.spine_framebuffer(ext, 16, 16, true).unwrap();
    let viewer = Session::embedded(&e).unwrap();
    let view = viewer.spine_framebuffer_view(ext, 0).unwrap();
    let len = 1024 + 64;
    let fd = || view.fd().try_clone().unwrap();
    let err = unet_sys::Segment::open(fd(), len, true)
        .err()
        .expect("a writable mapping of a view is refused");
    assert_eq!(err.raw_os_error(), Some(libc::EACCES), "{err}");
    unet_sys::Segment::open(fd(), len, false).expect("a read-only mapping");
    // The owner's descriptor maps writable (the test's own check).
    unet_sys::Segment::open(fb.fd().try_clone().unwrap(), len, true).unwrap();
}

#[test]
fn an_unknown_extension_or_framebuffer_is_refused_and_a_gone_extension_gives_no_view() {
    let (e, owner) = engine_with(EngineConfig::default());
    let ext = load(&owner);
    let viewer = Session::embedded(&e).unwrap();
    let why = refused(viewer.spine_framebuffer_view(ext, 0));
    assert_eq!(
        why,
        format!("extension {ext} has 0 framebuffers: no framebuffer 0")
    );
    let fb = owner.spine_framebuffer(ext, 4, 4, true).unwrap();
    let why = refused(viewer.spine_framebuffer_view(ext, 2));
    assert_eq!(
        why,
        format!("extension {ext} has 1 framebuffers: no framebuffer 2")
    );
    assert!(matches!(
        viewer.spine_framebuffer_view(ext + 1, 0),
        Err(Error::Engine(ErrorCode::NoSuchExtension))
    ));
    let view = viewer.spine_framebuffer_view(ext, 0).unwrap();
    let mut ep = owner.create_endpoint(EndpointConfig::default()).unwrap();
    assert_eq!(write(&mut ep, 0, 0, &[1, 2, 3, 4]), 4);
    // The extension's owner goes, and the extension with it: the view
    // mapped before stays readable, and no new one is given.
    drop(ep);
    drop(fb);
    drop(owner);
    wait_listing(&viewer, "the owner's extension gone", |l| {
        l.extensions.iter().all(|x| x.id != ext)
    });
    assert_eq!(&bytes(&view)[..4], &[1, 2, 3, 4]);
    assert!(matches!(
        viewer.spine_framebuffer_view(ext, 0),
        Err(Error::Engine(ErrorCode::NoSuchExtension))
    ));
}
