//! The little-endian writer and the total reader every encoding of this
//! crate is written with: the control packets and the listings handed
//! over in memory files (SPINE's extensions, peer queues and links).
//!
//! The reader never panics: a read past the end is
//! [`ControlError::Truncated`], a value that cannot be is
//! [`ControlError::BadField`]. [`Listing`] reads a listing on top of it,
//! with its lists bounded and its errors as text naming the listing.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::{ControlError, MAX_NAME};

/// A writer of little-endian fields into a growing buffer.
#[derive(Default)]
pub(crate) struct W(Vec<u8>);

impl W {
    pub(crate) fn put(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.put(&v.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }
    /// An address: family (0 none, 4, 6), 16 bytes of address, port.
    pub(crate) fn addr(&mut self, a: Option<SocketAddr>) {
        match a {
            None => {
                self.u8(0);
                self.put(&[0; 18]);
            }
            Some(SocketAddr::V4(v)) => {
                self.u8(4);
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&v.ip().octets());
                self.put(&b);
                self.u16(v.port());
            }
            Some(SocketAddr::V6(v)) => {
                self.u8(6);
                self.put(&v.ip().octets());
                self.u16(v.port());
            }
        }
    }
    /// A name: `u8` length and UTF-8 bytes (at most [`MAX_NAME`]).
    pub(crate) fn name(&mut self, s: &str) {
        let s = cut(s, MAX_NAME);
        self.u8(s.len() as u8);
        self.put(s.as_bytes());
    }
    /// A string of a listing: `u16` length and UTF-8 bytes (at most
    /// 65 535).
    pub(crate) fn str(&mut self, s: &str) {
        let s = cut(s, u16::MAX as usize);
        self.u16(s.len() as u16);
        self.put(s.as_bytes());
    }
    /// A list of (name, count): `u32` entries, each a string and a `u64`.
    pub(crate) fn pairs(&mut self, p: &[(String, u64)]) {
        self.u32(p.len() as u32);
        for (k, v) in p {
            self.str(k);
            self.u64(*v);
        }
    }
    /// What was written.
    #[cfg(test)]
    pub(crate) fn done(&self) -> &[u8] {
        &self.0
    }
    /// What was written, taken.
    pub(crate) fn into_vec(self) -> Vec<u8> {
        self.0
    }
}

/// `s` cut to at most `max` bytes, at a character boundary.
pub(crate) fn cut(s: &str, max: usize) -> &str {
    let mut n = s.len().min(max);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

/// A reader of little-endian fields; every read checks the length left.
pub(crate) struct R<'a>(&'a [u8]);

impl<'a> R<'a> {
    pub(crate) fn new(b: &'a [u8]) -> R<'a> {
        R(b)
    }
    /// Whether every byte was read.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], ControlError> {
        if self.0.len() < n {
            return Err(ControlError::Truncated);
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Ok(h)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ControlError> {
        let (h, t) = self
            .0
            .split_first_chunk::<N>()
            .ok_or(ControlError::Truncated)?;
        self.0 = t;
        Ok(*h)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, ControlError> {
        self.array().map(u8::from_le_bytes)
    }
    pub(crate) fn u16(&mut self) -> Result<u16, ControlError> {
        self.array().map(u16::from_le_bytes)
    }
    pub(crate) fn u32(&mut self) -> Result<u32, ControlError> {
        self.array().map(u32::from_le_bytes)
    }
    pub(crate) fn u64(&mut self) -> Result<u64, ControlError> {
        self.array().map(u64::from_le_bytes)
    }
    /// What [`W::addr`] wrote.
    pub(crate) fn addr(&mut self) -> Result<Option<SocketAddr>, ControlError> {
        let fam = self.u8()?;
        let raw: [u8; 16] = self.array()?;
        let port = self.u16()?;
        match fam {
            0 => Ok(None),
            4 => Ok(Some(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3])),
                port,
            ))),
            6 => Ok(Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(raw)), port))),
            _ => Err(ControlError::BadField("address family")),
        }
    }
    /// What [`W::name`] wrote.
    pub(crate) fn name(&mut self) -> Result<String, ControlError> {
        let n = self.u8()? as usize;
        if n > MAX_NAME {
            return Err(ControlError::BadField("name length"));
        }
        std::str::from_utf8(self.take(n)?)
            .map(str::to_owned)
            .map_err(|_| ControlError::BadField("name"))
    }
    /// A `u8` that is 0 or 1.
    pub(crate) fn bool(&mut self) -> Result<bool, ControlError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(ControlError::BadField("bool")),
        }
    }
}

/// A reader of a listing: its lists at most `max` entries, its errors
/// text that names it (`what`: "the {what} is truncated").
pub(crate) struct Listing<'a> {
    r: R<'a>,
    what: &'static str,
    max: u32,
}

impl<'a> Listing<'a> {
    pub(crate) fn new(b: &'a [u8], what: &'static str, max: u32) -> Listing<'a> {
        Listing { r: R(b), what, max }
    }
    /// Whether every byte was read.
    pub(crate) fn is_empty(&self) -> bool {
        self.r.is_empty()
    }
    /// `f` of the reader, a short read said as text.
    fn read<T>(
        &mut self,
        f: impl FnOnce(&mut R<'a>) -> Result<T, ControlError>,
    ) -> Result<T, String> {
        f(&mut self.r).map_err(|_| format!("the {} is truncated", self.what))
    }
    pub(crate) fn u8(&mut self) -> Result<u8, String> {
        self.read(R::u8)
    }
    pub(crate) fn u16(&mut self) -> Result<u16, String> {
        self.read(R::u16)
    }
    pub(crate) fn u32(&mut self) -> Result<u32, String> {
        self.read(R::u32)
    }
    pub(crate) fn u64(&mut self) -> Result<u64, String> {
        self.read(R::u64)
    }
    /// A list's length: a `u32` of at most `max`.
    pub(crate) fn count(&mut self) -> Result<u32, String> {
        let n = self.u32()?;
        if n > self.max {
            return Err(format!("a list of {n} entries in the {}", self.what));
        }
        Ok(n)
    }
    /// What [`W::str`] wrote.
    pub(crate) fn str(&mut self) -> Result<String, String> {
        let n = self.u16()? as usize;
        std::str::from_utf8(self.read(|r| r.take(n))?)
            .map(str::to_owned)
            .map_err(|_| format!("text in the {} is not UTF-8", self.what))
    }
    /// What [`W::pairs`] wrote.
    pub(crate) fn pairs(&mut self) -> Result<Vec<(String, u64)>, String> {
        (0..self.count()?)
            .map(|_| Ok((self.str()?, self.u64()?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back_and_every_cut_is_an_error() {
        let mut w = W::default();
        w.u8(1);
        w.u16(0x0203);
        w.u32(0x0405_0607);
        w.u64(u64::MAX - 1);
        w.addr(Some("[::1]:7".parse().unwrap()));
        w.addr(None);
        w.name("é".repeat(40).as_str());
        w.u8(1);
        let b = w.into_vec();
        let read = |b: &[u8]| -> Result<_, ControlError> {
            let mut r = R::new(b);
            let v = (r.u8()?, r.u16()?, r.u32()?, r.u64()?, r.addr()?, r.addr()?);
            Ok((v, r.name()?, r.bool()?, r.is_empty()))
        };
        let (v, name, on, empty) = read(&b).unwrap();
        assert_eq!(
            v,
            (
                1,
                0x0203,
                0x0405_0607,
                u64::MAX - 1,
                Some("[::1]:7".parse().unwrap()),
                None
            )
        );
        // Cut at a character boundary at most MAX_NAME bytes long.
        assert_eq!(name, "é".repeat(MAX_NAME / 2));
        assert!(on && empty);
        for n in 0..b.len() {
            assert!(read(&b[..n]).is_err(), "cut at {n}");
        }
    }

    #[test]
    fn a_listing_reader_bounds_its_lists_and_names_itself_in_errors() {
        let mut w = W::default();
        w.pairs(&[("a".into(), 1), ("b".into(), 2)]);
        let b = w.into_vec();
        let mut l = Listing::new(&b, "test listing", 2);
        assert_eq!(l.pairs(), Ok(vec![("a".into(), 1), ("b".into(), 2)]));
        assert!(l.is_empty());
        let mut l = Listing::new(&b, "test listing", 1);
        assert_eq!(
            l.pairs(),
            Err("a list of 2 entries in the test listing".into())
        );
        let mut l = Listing::new(&b[..b.len() - 1], "test listing", 2);
        assert_eq!(l.pairs(), Err("the test listing is truncated".into()));
        let bad = [1, 0, 0, 0, 1, 0, 0xff, 0, 0, 0, 0, 0, 0, 0, 0];
        let mut l = Listing::new(&bad, "test listing", 2);
        assert_eq!(
            l.pairs(),
            Err("text in the test listing is not UTF-8".into())
        );
    }
}
