//! Authenticated control frames: a cluster key shared by the engines that
//! may open channels to each other.
//!
//! With a key ([`ClusterKey`], `EngineConfig::cluster_key`), every frame
//! but those of the data path, Data and ViAck ([`Kind::is_data_path`]), is
//! followed in its datagram by a trailer of [`TRAILER_LEN`] bytes (open
//! request, accept, refuse, confirm, close, keepalive, and VIA's open,
//! accept, refuse and close); [`carries_trailer`] tells a received datagram
//! that must have one:
//!
//! ```text
//!  frame (as drawn in `frame`) | stamp u64 | nonce u64 | mac [u8; 32]
//! ```
//!
//! `stamp` is the sender's wall clock (nanoseconds since the Unix epoch),
//! `nonce` a random number, and `mac` the keyed BLAKE3 hash of everything
//! before it (the frame, the stamp and the nonce). A receiver checks the
//! MAC (in constant time) before it reads anything else of the frame, then
//! refuses a stamp further than the replay window from its own clock, and
//! a (sender, nonce) it saw within the window ([`ReplayGuard`]). So an open
//! request gets an answer (and a token) only when it comes from a holder of
//! the key, once; a retransmission is a new frame with a new nonce.
//!
//! Data and ViAck frames carry no MAC (they are sent at a high rate): a
//! message or an ack is authenticated by its channel's or VI's token (64
//! random bits chosen by the receiver and handed out only in an
//! authenticated open or accept) and the peer's address. An attacker who
//! cannot see the traffic cannot guess a token; one who can (on the path)
//! can read tokens and inject or cut messages on those channels and VIs, as
//! with any unencrypted protocol. The clocks of the engines must agree
//! within the replay window.

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::frame::{Kind, KIND_OFFSET};

/// Bytes of the authentication trailer: stamp, nonce, MAC.
pub const TRAILER_LEN: usize = 8 + 8 + 32;

/// How far a frame's stamp may be from the receiver's clock, in
/// nanoseconds (30 s).
pub const REPLAY_WINDOW_NS: u64 = 30_000_000_000;

/// Nonces remembered at most (older ones leave first; beyond, frames are
/// refused as replays until the window moves on).
pub const REPLAY_CAPACITY: usize = 1 << 16;

/// The 32-byte key shared by the engines of a cluster. Its `Debug` does
/// not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterKey([u8; 32]);

impl fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterKey(..)")
    }
}

impl ClusterKey {
    /// A key of these bytes.
    pub fn from_bytes(b: [u8; 32]) -> ClusterKey {
        ClusterKey(b)
    }

    /// Reads a key file: 32 raw bytes, or 64 hexadecimal digits (white
    /// space around them ignored). Refuses a file that is not a regular
    /// file or that its group or others may read or write.
    pub fn from_file(path: &Path) -> Result<ClusterKey, String> {
        let shown = path.display();
        let f = fs::File::open(path).map_err(|e| format!("cannot open {shown}: {e}"))?;
        let meta = f
            .metadata()
            .map_err(|e| format!("cannot read {shown}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("{shown} is not a regular file"));
        }
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "{shown} may be read or written by others (mode {:03o}): \
                 a cluster key file must be private to its owner (chmod 600)",
                mode & 0o777
            ));
        }
        let mut bytes = Vec::new();
        f.take(4096)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {shown}: {e}"))?;
        ClusterKey::parse(&bytes).map_err(|e| format!("{shown}: {e}"))
    }

    /// A key from the contents of a key file (see
    /// [`ClusterKey::from_file`]).
    pub fn parse(bytes: &[u8]) -> Result<ClusterKey, String> {
        let text = std::str::from_utf8(bytes).ok().map(str::trim);
        if let Some(t) = text.filter(|t| t.len() == 64) {
            let mut k = [0u8; 32];
            for (i, b) in k.iter_mut().enumerate() {
                *b = u8::from_str_radix(t.get(2 * i..2 * i + 2).unwrap_or("?"), 16)
                    .map_err(|_| "not 64 hexadecimal digits".to_string())?;
            }
            return Ok(ClusterKey(k));
        }
        match <[u8; 32]>::try_from(bytes) {
            Ok(k) => Ok(ClusterKey(k)),
            Err(_) => Err(format!(
                "a cluster key is 32 bytes or 64 hexadecimal digits, not {} bytes",
                bytes.len()
            )),
        }
    }

    fn mac(&self, covered: &[u8]) -> blake3::Hash {
        blake3::keyed_hash(&self.0, covered)
    }
}

/// Why a trailer was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthError {
    /// No trailer, or a MAC that does not check.
    BadMac,
}

/// Whether, with a cluster key, `datagram` must carry the trailer: true
/// unless its `kind` byte (offset 3) is of the data path
/// ([`Kind::is_data_path`]: Data, ViAck; and SPINE's messages, kind 0x34). A datagram too short to hold a
/// kind, or of a kind this version does not know, must carry one too (so
/// that, unauthenticated, it is refused as [`AuthError::BadMac`] before
/// anything else is read).
pub fn carries_trailer(datagram: &[u8]) -> bool {
    match datagram.get(KIND_OFFSET) {
        Some(&k) => match Kind::from_u8(k) {
            Some(k) => !k.is_data_path(),
            // SPINE's message frames are of the data path too.
            None => !super::frame::spine::is_data_path(k),
        },
        None => true,
    }
}

/// Appends the trailer to the frame in `buf[..frame_len]`; `buf` has
/// room for [`TRAILER_LEN`] more bytes. Returns the datagram's length.
pub fn seal_in_place(
    key: &ClusterKey,
    buf: &mut [u8],
    frame_len: usize,
    stamp: u64,
    nonce: u64,
) -> Option<usize> {
    let end = frame_len.checked_add(TRAILER_LEN)?;
    let buf = buf.get_mut(..end)?;
    buf[frame_len..frame_len + 8].copy_from_slice(&stamp.to_be_bytes());
    buf[frame_len + 8..frame_len + 16].copy_from_slice(&nonce.to_be_bytes());
    let mac = key.mac(&buf[..frame_len + 16]);
    buf[frame_len + 16..end].copy_from_slice(mac.as_bytes());
    Some(end)
}

/// `frame` with its trailer, as a new datagram.
pub fn seal(key: &ClusterKey, frame: &[u8], stamp: u64, nonce: u64) -> Vec<u8> {
    let mut v = frame.to_vec();
    v.resize(frame.len() + TRAILER_LEN, 0);
    let n = seal_in_place(key, &mut v, frame.len(), stamp, nonce);
    debug_assert_eq!(n, Some(v.len()));
    v
}

/// Checks the trailer of `datagram`: the frame before it, its stamp and
/// its nonce when the MAC checks (compared in constant time).
pub fn open<'a>(key: &ClusterKey, datagram: &'a [u8]) -> Result<(&'a [u8], u64, u64), AuthError> {
    let Some(frame_len) = datagram.len().checked_sub(TRAILER_LEN) else {
        return Err(AuthError::BadMac);
    };
    let (covered, mac) = datagram.split_at(frame_len + 16);
    let mut m = [0u8; 32];
    m.copy_from_slice(mac);
    // `blake3::Hash`'s equality runs in constant time.
    if key.mac(covered) != blake3::Hash::from(m) {
        return Err(AuthError::BadMac);
    }
    let mut s = [0u8; 8];
    s.copy_from_slice(&datagram[frame_len..frame_len + 8]);
    let mut n = [0u8; 8];
    n.copy_from_slice(&datagram[frame_len + 8..frame_len + 16]);
    Ok((
        &datagram[..frame_len],
        u64::from_be_bytes(s),
        u64::from_be_bytes(n),
    ))
}

/// The wall clock in nanoseconds since the Unix epoch (0 before it).
pub fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Refuses authenticated frames seen before or stamped outside the window.
#[derive(Debug, Default)]
pub struct ReplayGuard {
    /// (sender's incarnation, nonce) → stamp.
    seen: HashMap<(u64, u64), u64>,
    /// The oldest stamp kept, for pruning.
    pruned_at: u64,
}

impl ReplayGuard {
    /// A guard that has seen nothing.
    pub fn new() -> ReplayGuard {
        ReplayGuard::default()
    }

    /// Whether a frame of `sender` with `stamp` and `nonce`, received at
    /// `now` (wall clock, ns), is fresh; remembers it if so.
    pub fn fresh(&mut self, sender: u64, stamp: u64, nonce: u64, now: u64) -> bool {
        if stamp.abs_diff(now) > REPLAY_WINDOW_NS {
            return false;
        }
        if self.seen.len() >= REPLAY_CAPACITY || now.saturating_sub(self.pruned_at) > 1_000_000_000
        {
            let oldest = now.saturating_sub(REPLAY_WINDOW_NS);
            self.seen.retain(|_, &mut s| s >= oldest);
            self.pruned_at = now;
        }
        if self.seen.len() >= REPLAY_CAPACITY {
            return false;
        }
        self.seen.insert((sender, nonce), stamp).is_none()
    }

    /// Nonces remembered now.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_and_open() {
        let k = ClusterKey::from_bytes([7; 32]);
        let d = seal(&k, b"frame bytes", 5, 6);
        assert_eq!(d.len(), 11 + TRAILER_LEN);
        assert_eq!(open(&k, &d), Ok((&b"frame bytes"[..], 5, 6)));
        let other = ClusterKey::from_bytes([8; 32]);
        assert_eq!(open(&other, &d), Err(AuthError::BadMac));
        for i in 0..d.len() {
            let mut e = d.clone();
            e[i] ^= 1;
            assert_eq!(open(&k, &e), Err(AuthError::BadMac), "byte {i}");
        }
        assert_eq!(open(&k, &d[..TRAILER_LEN - 1]), Err(AuthError::BadMac));
        assert_eq!(open(&k, &d[1..]), Err(AuthError::BadMac));
    }

    #[test]
    fn only_data_path_kinds_go_without_a_trailer() {
        let mut d = [0u8; 12];
        for v in 0..=u8::MAX {
            d[KIND_OFFSET] = v;
            let bare = v == Kind::Data as u8
                || v == Kind::ViAck as u8
                || v == super::super::frame::spine::KIND_MSG;
            assert_eq!(carries_trailer(&d), !bare, "kind {v:#x}");
            assert_eq!(carries_trailer(&d[..4]), !bare, "kind {v:#x}");
        }
        // Too short to hold a kind: it must authenticate (and cannot).
        assert!(carries_trailer(&[]));
        assert!(carries_trailer(&d[..3]));
    }

    #[test]
    fn replays_and_stale_stamps_are_refused() {
        let mut g = ReplayGuard::new();
        let now = 100 * REPLAY_WINDOW_NS;
        assert!(g.fresh(1, now, 9, now));
        assert!(!g.fresh(1, now, 9, now + 1));
        assert!(g.fresh(2, now, 9, now + 1));
        assert!(!g.fresh(1, now - REPLAY_WINDOW_NS - 1, 10, now));
        assert!(!g.fresh(1, now + REPLAY_WINDOW_NS + 1, 11, now));
        // Old entries leave once out of the window.
        assert!(g.fresh(
            1,
            now + 3 * REPLAY_WINDOW_NS,
            12,
            now + 3 * REPLAY_WINDOW_NS
        ));
        assert_eq!(g.len(), 1);
    }

    #[test]
    fn key_files() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
        let k = ClusterKey::parse(hex.as_bytes()).unwrap();
        assert_eq!(k.0[1], 0x11);
        assert_eq!(ClusterKey::parse(&[3u8; 32]).unwrap().0, [3; 32]);
        assert!(ClusterKey::parse(b"short").is_err());
        assert!(ClusterKey::parse(&[b'z'; 64]).is_err());
        let dir = std::env::temp_dir().join(format!("unet-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("key");
        std::fs::write(&p, hex).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = ClusterKey::from_file(&p).unwrap_err();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(ClusterKey::from_file(&p).unwrap(), k);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What the MAC costs: run with `--ignored --nocapture`.
    #[test]
    #[ignore]
    fn mac_cost() {
        let k = ClusterKey::from_bytes([7; 32]);
        let frame = [0x55u8; 38];
        let n = 200_000u32;
        let t = std::time::Instant::now();
        let mut acc = 0u64;
        for i in 0..n {
            let d = seal(&k, &frame, u64::from(i), 1);
            acc += open(&k, &d).map_or(0, |(_, s, _)| s);
        }
        let per = t.elapsed() / n;
        eprintln!("seal + open of an open request: {per:?} ({acc})");
    }
}
