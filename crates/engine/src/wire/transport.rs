//! The transport under the wire: where an engine's datagrams leave and
//! arrive. The remote side knows only this interface; the UDP port is one
//! implementation, [`MemoryPort`] (engines in one process, for tests and
//! simulations) another, and a raw-frame port (AF_PACKET, for SPINE's
//! router) or a second socket per adapter go beside them.
//!
//! A transport moves whole datagrams between addresses; frames, tokens,
//! fragmentation and reassembly stay above it, the same for every
//! transport.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};

use unet_sys::EventFd;

use super::{PortConfig, SendBatch, UdpPort, WireStats};

/// A port of the wire (see the module documentation).
pub trait Transport: Send {
    /// A descriptor that is readable when datagrams wait (the engine
    /// sleeps on it).
    fn raw_fd(&self) -> RawFd;
    /// The address peers send to.
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// The settings in force (datagram size and batch).
    fn config(&self) -> &PortConfig;
    /// Send what `batch` holds until it is empty or the transport would
    /// block; never blocks. Returns the datagrams taken; what stays in
    /// `batch` goes in a later call.
    fn send_batch(&mut self, batch: &mut SendBatch) -> io::Result<usize>;
    /// Hand waiting datagrams to `f(source, datagram)` until it returns
    /// false (the rest stay, first in the next call) or none waits.
    /// Returns the datagrams taken; never blocks.
    fn recv_batch_until(
        &mut self,
        f: &mut dyn FnMut(SocketAddr, &[u8]) -> bool,
    ) -> io::Result<usize>;
    /// What the transport counted: datagrams, bytes, calls, drops.
    fn stats(&self) -> WireStats;
    /// Read drops the transport only learns of when asked (the kernel's
    /// socket overflow count); the engine calls it before it sleeps.
    fn sync_drops(&mut self) {}
}

impl Transport for UdpPort {
    fn raw_fd(&self) -> RawFd {
        UdpPort::raw_fd(self)
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        UdpPort::local_addr(self)
    }
    fn config(&self) -> &PortConfig {
        UdpPort::config(self)
    }
    fn send_batch(&mut self, batch: &mut SendBatch) -> io::Result<usize> {
        UdpPort::send_batch(self, batch)
    }
    fn recv_batch_until(
        &mut self,
        f: &mut dyn FnMut(SocketAddr, &[u8]) -> bool,
    ) -> io::Result<usize> {
        UdpPort::recv_batch_until(self, f)
    }
    fn stats(&self) -> WireStats {
        self.stats
    }
    fn sync_drops(&mut self) {
        self.sync_socket_drops();
    }
}

type Queue = VecDeque<(SocketAddr, Vec<u8>)>;

/// Every bound port: its doorbell and the datagrams waiting for it.
type Ports = HashMap<SocketAddr, (Arc<EventFd>, Queue)>;

/// Ports of engines in one process, joined as if by a network: a datagram
/// sent to an address is queued for the port bound there (and dropped,
/// counted as sent, when there is none, as UDP would). Deterministic: what
/// is sent is there at once, in order, never lost.
#[derive(Clone, Default)]
pub struct MemoryHub {
    ports: Arc<Mutex<Ports>>,
}

impl MemoryHub {
    /// An empty hub.
    pub fn new() -> MemoryHub {
        MemoryHub::default()
    }

    /// A port at `addr` (refused if one is bound there already).
    pub fn bind(&self, addr: SocketAddr, cfg: PortConfig) -> io::Result<MemoryPort> {
        let bell = Arc::new(EventFd::new()?);
        let mut ports = self.ports.lock().unwrap_or_else(|p| p.into_inner());
        if ports.contains_key(&addr) {
            return Err(io::ErrorKind::AddrInUse.into());
        }
        ports.insert(addr, (bell.clone(), VecDeque::new()));
        Ok(MemoryPort {
            hub: self.clone(),
            addr,
            cfg,
            bell,
            stats: WireStats::default(),
        })
    }
}

/// A port of a [`MemoryHub`].
pub struct MemoryPort {
    hub: MemoryHub,
    addr: SocketAddr,
    cfg: PortConfig,
    bell: Arc<EventFd>,
    stats: WireStats,
}

impl Drop for MemoryPort {
    fn drop(&mut self) {
        let mut ports = self.hub.ports.lock().unwrap_or_else(|p| p.into_inner());
        ports.remove(&self.addr);
    }
}

impl Transport for MemoryPort {
    fn raw_fd(&self) -> RawFd {
        self.bell.fd().as_raw_fd()
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }
    fn config(&self) -> &PortConfig {
        &self.cfg
    }
    fn send_batch(&mut self, batch: &mut SendBatch) -> io::Result<usize> {
        if batch.is_empty() {
            return Ok(0);
        }
        self.stats.send_batches += 1;
        self.stats.send_syscalls += 1;
        let mut n = 0;
        {
            let mut ports = self.hub.ports.lock().unwrap_or_else(|p| p.into_inner());
            for (dst, d) in batch.datagrams() {
                n += 1;
                self.stats.datagrams_sent += 1;
                self.stats.bytes_sent += d.len() as u64;
                if let Some((bell, q)) = ports.get_mut(&dst) {
                    q.push_back((self.addr, d.to_vec()));
                    bell.notify();
                }
            }
        }
        batch.clear();
        Ok(n)
    }
    fn recv_batch_until(
        &mut self,
        f: &mut dyn FnMut(SocketAddr, &[u8]) -> bool,
    ) -> io::Result<usize> {
        self.stats.recv_syscalls += 1;
        let mut n = 0;
        while n < self.cfg.batch {
            let next = {
                let mut ports = self.hub.ports.lock().unwrap_or_else(|p| p.into_inner());
                ports.get_mut(&self.addr).and_then(|(_, q)| q.pop_front())
            };
            let Some((src, d)) = next else {
                break;
            };
            n += 1;
            self.stats.datagrams_received += 1;
            self.stats.bytes_received += d.len() as u64;
            if !f(src, &d) {
                break;
            }
        }
        if n == 0 {
            self.stats.recv_empty += 1;
            self.bell.drain();
            // A datagram queued between the empty look and the drain
            // would leave the queue full and the bell quiet: ring again.
            let ports = self.hub.ports.lock().unwrap_or_else(|p| p.into_inner());
            if ports.get(&self.addr).is_some_and(|(_, q)| !q.is_empty()) {
                self.bell.notify();
            }
        }
        Ok(n)
    }
    fn stats(&self) -> WireStats {
        self.stats
    }
}
