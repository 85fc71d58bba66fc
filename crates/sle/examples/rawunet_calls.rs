//! Invocations of an applet (RawUnet, `applets/RawUnet.java` compiled
//! with the SDK) by the runner, over an endpoint held in memory, on this
//! thread: what entering an applet, its compiled code and its natives
//! cost per message, without a client library, an engine or a wire.
//!
//! `cargo run --release -p unet-sle --example rawunet_calls --
//! RawUnet.class [SIZE] [MESSAGES]` prints the time per `doTx` and per
//! `doRx` (a message of SIZE bytes, 64 by default), the latter with the
//! message copied into `RxBuf` first (as the library's inline placement
//! does) and handed over as the engine does (lent to `RxBuf` where the
//! applet allows). Under
//! `valgrind --tool=callgrind` its instruction count, less that of a run
//! with fewer messages, is the count per message.

use std::ptr::NonNull;
use std::time::Instant;

use unet_abi::{RecvDesc, RECV_INLINE};
use unet_sle::{Outcome, Port, Runner, RunnerConfig};

const BUF: u32 = 2048;
const AREA: usize = 256 << 10;

/// One endpoint in memory: a buffer area whose buffers from 8 KiB on are
/// free, and counts of what the applet sent and delivered.
struct MemPort {
    area: Vec<u8>,
    free: Vec<u32>,
    sent: u64,
    delivered: u64,
    last: Option<RecvDesc>,
}

impl Port for MemPort {
    fn area_size(&self) -> u64 {
        self.area.len() as u64
    }
    fn area(&mut self) -> NonNull<u8> {
        NonNull::new(self.area.as_mut_ptr()).expect("a Vec's pointer is not null")
    }
    fn buffer_size(&self) -> u32 {
        BUF
    }
    fn pop_free(&mut self) -> Option<u32> {
        self.free.pop()
    }
    fn push_free(&mut self, off: u32) -> bool {
        self.free.push(off);
        true
    }
    fn tx_push(&mut self, _chan: u16, data: &[u8]) -> Result<(), String> {
        self.sent += data.len() as u64;
        Ok(())
    }
    fn try_tx_push(&mut self, _chan: u16, data: &[u8]) -> bool {
        self.sent += data.len() as u64;
        true
    }
    fn push_recv(&mut self, desc: &RecvDesc) -> bool {
        self.delivered += 1;
        self.last = Some(*desc);
        true
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: rawunet_calls CLASS [SIZE] [MESSAGES]");
        std::process::exit(2);
    };
    let class = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let size: usize = args.get(2).map_or(64, |s| s.parse().expect("SIZE"));
    let n: u64 = args
        .get(3)
        .map_or(1_000_000, |s| s.parse().expect("MESSAGES"));
    let mut port = MemPort {
        area: vec![0; AREA],
        free: (4..AREA as u32 / BUF).map(|i| i * BUF).collect(),
        sent: 0,
        delivered: 0,
        last: None,
    };
    let mut r = Runner::load(
        &class,
        unet_sle::default_limits(),
        &mut port,
        RunnerConfig::inline(),
    )
    .unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(r.is_compiled(), "the applet runs compiled");
    let msg: Vec<u8> = (0..size).map(|i| i as u8).collect();
    port.area[..size].copy_from_slice(&msg);

    let t = Instant::now();
    for _ in 0..n {
        let o = r.tx(&mut port, size as u32, 0, 0);
        assert_eq!(o, Outcome::Done);
    }
    let tx_ns = t.elapsed().as_nanos() as f64 / n as f64;

    let t = Instant::now();
    for _ in 0..n {
        let o = r.rx_fill(&mut port, size, |_, buf| {
            buf[..size].copy_from_slice(&msg);
            Ok::<_, ()>(Some((size, 0)))
        });
        assert_eq!(o, Ok(Some(Outcome::Done)));
        if let Some(d) = port.last.take() {
            if d.flags & RECV_INLINE == 0 {
                port.free.push(d.offset(0));
            }
        }
    }
    let rx_ns = t.elapsed().as_nanos() as f64 / n as f64;

    // The engine's way: the message handed over where it is, lent to
    // `RxBuf` (from `unet_sle::LEND_MIN` bytes on) or copied in.
    let t = Instant::now();
    for _ in 0..n {
        let o = r.rx(&mut port, &msg, 0);
        assert_eq!(o, Outcome::Done);
        if let Some(d) = port.last.take() {
            if d.flags & RECV_INLINE == 0 {
                port.free.push(d.offset(0));
            }
        }
    }
    let lent_ns = t.elapsed().as_nanos() as f64 / n as f64;
    assert_eq!(port.sent, n * size as u64);
    assert_eq!(port.delivered, 2 * n);
    println!(
        "{size} B: doTx {tx_ns:.1} ns, doRx {rx_ns:.1} ns (copied into RxBuf), \
         {lent_ns:.1} ns (handed over: {}) per message ({n} messages)",
        if r.lends_rx() && size >= unet_sle::LEND_MIN {
            "lent"
        } else {
            "copied"
        }
    );
}
