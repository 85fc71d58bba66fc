//! The golden layout vector: the bytes this crate builds must equal the
//! committed `golden/endpoint_v1.hex`, and the listed facts must hold in it.
//! Set `UNET_BLESS=1` to rewrite the file after a deliberate layout change
//! (and bump `VERSION`).

use unet_abi::golden::{write_golden, GOLDEN_FACTS, GOLDEN_LEN};

#[repr(C, align(4096))]
struct Page([u8; GOLDEN_LEN]);

fn build() -> Vec<u8> {
    let mut p = Box::new(Page([0; GOLDEN_LEN]));
    assert!(write_golden(&mut p.0));
    p.0.to_vec()
}

fn to_hex(b: &[u8]) -> String {
    let mut s = String::new();
    for line in b.chunks(32) {
        for x in line {
            s.push_str(&format!("{x:02x}"));
        }
        s.push('\n');
    }
    s
}

fn from_hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|c| c.is_ascii_hexdigit()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/endpoint_v1.hex");

#[test]
fn golden_bytes_match_the_committed_vector() {
    let bytes = build();
    if std::env::var_os("UNET_BLESS").is_some() {
        std::fs::write(PATH, to_hex(&bytes)).unwrap();
    }
    let committed = from_hex(&std::fs::read_to_string(PATH).expect("golden file"));
    assert_eq!(committed.len(), GOLDEN_LEN);
    if committed != bytes {
        let first = committed
            .iter()
            .zip(&bytes)
            .position(|(a, b)| a != b)
            .unwrap();
        panic!("golden vector differs at byte {first:#x}");
    }
}

#[test]
fn golden_facts_hold() {
    let bytes = build();
    for &(name, off, size, value) in GOLDEN_FACTS {
        let mut v = [0u8; 8];
        v[..size].copy_from_slice(&bytes[off..off + size]);
        assert_eq!(u64::from_le_bytes(v), value, "fact {name} at {off:#x}");
    }
}

#[test]
fn write_golden_refuses_wrong_buffers() {
    let mut small = vec![0u8; 100];
    assert!(!write_golden(&mut small));
}
