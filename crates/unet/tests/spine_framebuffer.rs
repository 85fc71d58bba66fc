//! Framebuffers a SPINE extension writes (`spine/framebuffer.rs`): a
//! handler copies bytes of a bulk buffer into its framebuffer with
//! `Spine.fbWrite`; writes land where asked, writes out of range (of the
//! framebuffer or of the buffer) are refused with `E_RANGE`, counted and
//! write nothing; the caps and the process's memory quota refuse by
//! name; the framebuffer goes (and stops being charged) with its
//! extension.

use std::sync::OnceLock;
use std::time::Duration;

use unet::spine::ExtensionOptions;
use unet::spine_framebuffer::FbCounters;
use unet::{EndpointConfig, EngineConfig, Error, Session};

mod common;
use common::{engine_with, javac, recv_am, wait_listing};

/// The extension's handlers: `fbWrite`, `fbFill`.
const POKE: u16 = 64;
const FILL: u16 = 65;
/// `Spine.E_RANGE`.
const E_RANGE: i32 = -6;

/// `FbPoke`: `[fb, fbOffset, bufOffset, len]` and a bulk buffer: calls
/// `fbWrite` with them (the message's own bulk buffer, or the handle in a
/// fifth int when there is one) and answers its result and
/// `fbWidth(fb)`, `fbHeight(fb)`; `onFill` (the next handler):
/// `[fb, fbOffset, len, value]`, answers `fbFill`'s result.
fn class() -> &'static [u8] {
    static CLASS: OnceLock<Vec<u8>> = OnceLock::new();
    CLASS.get_or_init(|| {
        let src = r#"
import unet.spine.Spine;

public class FbPoke {
    static byte[] out;

    static void init(int base) {
        out = new byte[12];
        Spine.addHandler("onPoke", base, base);
        Spine.addHandler("onFill", base + 1, base + 1);
    }

    static void onFill(int self, int msg) {
        put(0, Spine.fbFill(Spine.argInt(msg, 0), Spine.argInt(msg, 4), Spine.argInt(msg, 8),
                Spine.argInt(msg, 12)));
        Spine.reply(msg, self, out, 0, 4);
    }

    static void put(int at, int v) {
        out[at] = (byte) v;
        out[at + 1] = (byte) (v >> 8);
        out[at + 2] = (byte) (v >> 16);
        out[at + 3] = (byte) (v >> 24);
    }

    static void onPoke(int self, int msg) {
        int fb = Spine.argInt(msg, 0);
        int buf = Spine.bulk(msg);
        if (Spine.argsLength(msg) >= 20) {
            buf = Spine.argInt(msg, 16);
        }
        put(0, Spine.fbWrite(fb, Spine.argInt(msg, 4), buf, Spine.argInt(msg, 8),
                Spine.argInt(msg, 12)));
        put(4, Spine.fbWidth(fb));
        put(8, Spine.fbHeight(fb));
        Spine.reply(msg, self, out, 0, 12);
    }
}
"#;
        let dir = std::env::temp_dir().join(format!("unet-spine-fb-{}", std::process::id()));
        javac(&dir, &[], &[("FbPoke", src)])
            .remove("FbPoke")
            .expect("FbPoke.class")
    })
}

fn load(s: &Session, first: u16) -> u32 {
    let opts = ExtensionOptions {
        arg: i32::from(first),
        ..ExtensionOptions::named("fbpoke")
    };
    s.load_extension(class(), opts).unwrap().id
}

/// Ask for `fbWrite(fb, at, bulk, from, len)`: (result, width, height).
fn poke(ep: &mut unet::Endpoint, args: &[i32], bulk: &[u8]) -> (i32, i32, i32) {
    let a: Vec<u8> = args.iter().flat_map(|v| v.to_le_bytes()).collect();
    ep.send_am(POKE, &a, bulk).unwrap();
    let (h, r, _) = recv_am(ep, Duration::from_secs(10));
    assert_eq!(h, POKE);
    let int = |i: usize| i32::from_le_bytes(r[4 * i..4 * i + 4].try_into().unwrap());
    (int(0), int(1), int(2))
}

/// Ask for `fbFill(fb, at, len, value)`: its result.
fn fill(ep: &mut unet::Endpoint, args: &[i32]) -> i32 {
    let a: Vec<u8> = args.iter().flat_map(|v| v.to_le_bytes()).collect();
    ep.send_am(FILL, &a, &[]).unwrap();
    let (h, r, _) = recv_am(ep, Duration::from_secs(10));
    assert_eq!(h, FILL);
    i32::from_le_bytes(r[..4].try_into().unwrap())
}

fn bytes(fb: &unet::spine_framebuffer::Framebuffer) -> Vec<u8> {
    let mut b = vec![0u8; fb.pixel_bytes()];
    assert!(fb.read(0, &mut b));
    b
}

#[test]
fn writes_land_where_asked_and_writes_out_of_range_are_refused_and_counted() {
    let (_e, s) = engine_with(EngineConfig::default());
    let ext = load(&s, POKE);
    let fb = s.spine_framebuffer(ext, 8, 4, false).unwrap();
    assert_eq!((fb.index(), fb.width(), fb.height()), (0, 8, 4));
    assert_eq!(fb.pixel_bytes(), 128);
    assert_eq!(fb.counters(), FbCounters::default());
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    let data: Vec<u8> = (1..=40).collect();
    // 12 bytes of the buffer from its byte 4, to byte 20 of the pixels.
    assert_eq!(poke(&mut ep, &[0, 20, 4, 12], &data), (12, 8, 4));
    let mut want = vec![0u8; 128];
    want[20..32].copy_from_slice(&data[4..16]);
    assert_eq!(bytes(&fb), want);
    // The last bytes of the pixels, and the whole of them.
    assert_eq!(poke(&mut ep, &[0, 116, 0, 12], &data).0, 12);
    want[116..128].copy_from_slice(&data[..12]);
    assert_eq!(bytes(&fb), want);
    let full: Vec<u8> = (0..128u32).map(|i| (i * 7 + 3) as u8).collect();
    assert_eq!(poke(&mut ep, &[0, 0, 0, 128], &full).0, 128);
    assert_eq!(bytes(&fb), full);
    assert_eq!(
        fb.counters(),
        FbCounters {
            writes: 3,
            bytes: 152,
            refused: 0
        }
    );
    // Out of range, each: nothing written, E_RANGE, counted.
    let refused: &[[i32; 4]] = &[
        [0, -1, 0, 4],       // before the pixels
        [0, 125, 0, 4],      // past their end by one
        [0, 128, 0, 1],      // at their end
        [0, i32::MAX, 0, 4], // an offset that overflows
        [0, 0, 38, 4],       // past the buffer's end
        [0, 0, -4, 4],       // before the buffer
        [0, 0, 0, -1],       // a negative length
        [0, 4, 0, i32::MAX], // a length past both
        [0, 0, i32::MAX, 2], // a buffer offset that overflows
    ];
    for r in refused {
        assert_eq!(poke(&mut ep, r, &data).0, E_RANGE, "{r:?}");
    }
    assert_eq!(bytes(&fb), full, "a refused write wrote nothing");
    assert_eq!(
        fb.counters(),
        FbCounters {
            writes: 3,
            bytes: 152,
            refused: refused.len() as u64
        }
    );
    // A fill: a pixel value repeated, checked as a write is.
    assert_eq!(fill(&mut ep, &[0, 8, 600, 7]), E_RANGE);
    assert_eq!(fill(&mut ep, &[0, -4, 8, 7]), E_RANGE);
    assert_eq!(fill(&mut ep, &[0, 4, -8, 7]), E_RANGE);
    assert_eq!(bytes(&fb), full, "a refused fill wrote nothing");
    assert_eq!(fill(&mut ep, &[0, 8, 12, 0x0403_0201]), 12);
    let mut want = full.clone();
    want[8..20].copy_from_slice(&[1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4]);
    assert_eq!(bytes(&fb), want);
    assert_eq!(
        fb.counters(),
        FbCounters {
            writes: 4,
            bytes: 164,
            refused: refused.len() as u64 + 3
        }
    );
    let full = want;
    // A framebuffer the extension does not have.
    assert_eq!(
        poke(&mut ep, &[1, 0, 0, 4], &data),
        (E_RANGE, E_RANGE, E_RANGE)
    );
    assert_eq!(poke(&mut ep, &[-1, 0, 0, 4], &data).0, E_RANGE);
    // A buffer the invocation does not hold stops it (a fault, counted),
    // as for every native, and writes nothing.
    ep.send_am(
        POKE,
        &[
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0x55, 0x55, 0, 0,
        ],
        &data,
    )
    .unwrap();
    wait_listing(&s, "the forged buffer faulted", |l| {
        l.extensions[0].handlers[0].terminated() == 1
    });
    assert_eq!(bytes(&fb), full);
    assert_eq!(fb.counters().refused, refused.len() as u64 + 3);
}

#[test]
fn a_second_framebuffer_is_written_by_its_number() {
    let (_e, s) = engine_with(EngineConfig::default());
    let ext = load(&s, POKE);
    let a = s.spine_framebuffer(ext, 4, 4, false).unwrap();
    let b = s.spine_framebuffer(ext, 2, 3, true).unwrap();
    assert_eq!((a.index(), b.index()), (0, 1));
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    assert_eq!(poke(&mut ep, &[1, 20, 0, 4], &[9, 8, 7, 6]), (4, 2, 3));
    assert_eq!(&bytes(&b)[20..24], &[9, 8, 7, 6]);
    assert_eq!(bytes(&a), vec![0; 64]);
    // The host's read-write mapping: its own drawing, seen by the
    // engine's mapping too (the extension writes over it).
    assert!(b.write(0, &[1, 2, 3, 4]));
    assert!(!b.write(22, &[0; 4]), "past the pixels");
    assert_eq!(poke(&mut ep, &[1, 2, 0, 2], &[0xaa, 0xbb]).0, 2);
    assert_eq!(&bytes(&b)[..4], &[1, 2, 0xaa, 0xbb]);
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
fn the_caps_and_the_memory_quota_refuse_by_name_and_a_framebuffer_goes_with_its_extension() {
    let cfg = EngineConfig {
        client_memory: 40 << 20,
        ..EngineConfig::default()
    };
    let (_e, s) = engine_with(cfg);
    let ext = load(&s, POKE);
    let why = refused(s.spine_framebuffer(ext, 0, 4, false));
    assert!(why.contains("each side 1 to 16384"), "{why}");
    let why = refused(s.spine_framebuffer(ext, 16385, 1, false));
    assert!(why.contains("each side 1 to 16384"), "{why}");
    let why = refused(s.spine_framebuffer(ext, 4097, 4096, false));
    assert!(
        why.contains("over the framebuffer cap of 67108864 bytes"),
        "{why}"
    );
    assert!(matches!(
        s.spine_framebuffer(ext + 1, 4, 4, false),
        Err(Error::Engine(unet::ErrorCode::NoSuchExtension))
    ));
    // An endpoint of 16 MiB fits the quota before the framebuffer, not
    // beside it: framebuffers count where endpoints do.
    let large = || EndpointConfig {
        geometry: unet::Geometry {
            buffer_area_size: 16 << 20,
            ..unet::Geometry::default()
        },
        ..EndpointConfig::default()
    };
    drop(s.create_endpoint(large()).unwrap());
    // 32 MiB, then 32 MiB more: over the 40 MiB quota with what the
    // process holds besides.
    let big = s.spine_framebuffer(ext, 4096, 2048, false).unwrap();
    assert!(matches!(
        s.create_endpoint(large()),
        Err(Error::Quota(unet::ErrorCode::QuotaExceeded))
    ));
    let why = refused(s.spine_framebuffer(ext, 4096, 2048, false));
    assert!(
        why.contains("over the process's memory quota (client_memory)"),
        "{why}"
    );
    let _small = s.spine_framebuffer(ext, 16, 16, false).unwrap();
    let why = refused(s.spine_framebuffer(ext, 1, 1, false));
    assert!(
        why.contains("has 2 framebuffers, the cap an extension"),
        "{why}"
    );
    // A second extension of the process: the quota counts the first's.
    let other = load(&s, POKE + 2);
    let why = refused(s.spine_framebuffer(other, 4096, 2048, false));
    assert!(why.contains("client_memory"), "{why}");
    // The first goes, and its framebuffers with it: the quota has room
    // again (the mapping here stays readable).
    s.unload_extension(ext).unwrap();
    let fb = s.spine_framebuffer(other, 4096, 2048, false).unwrap();
    assert_eq!(fb.index(), 0);
    assert_eq!(big.pixels().len(), 4096 * 2048);
}

#[test]
fn a_framebuffer_goes_when_its_extensions_owner_goes() {
    let cfg = EngineConfig {
        client_memory: 40 << 20,
        ..EngineConfig::default()
    };
    let (e, s) = engine_with(cfg);
    let owner = Session::embedded(&e).unwrap();
    let ext = load(&owner, POKE);
    let fb = owner.spine_framebuffer(ext, 4096, 2048, false).unwrap();
    let mine = load(&s, POKE + 2);
    let why = refused(s.spine_framebuffer(mine, 4096, 2048, false));
    assert!(why.contains("client_memory"), "{why}");
    // Its owner's connection closes: the extension goes, and the
    // framebuffer with it (this mapping stays readable).
    drop(owner);
    wait_listing(&s, "the owner's extension gone", |l| {
        l.extensions.iter().all(|x| x.id != ext)
    });
    s.spine_framebuffer(mine, 4096, 2048, false).unwrap();
    assert_eq!(fb.pixels().len(), 4096 * 2048);
}
