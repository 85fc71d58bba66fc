//! An endpoint's channels and the direct connections behind them: the
//! state of each channel tag, the connections mapped in, the turn of the
//! next receive among them, and sending and receiving on them.

use std::os::fd::OwnedFd;

use unet_abi::{ClientCounter, CONN_HEADER_SIZE};
use unet_sys::Segment;

use super::{bump, Endpoint, Recv};
use crate::direct::{DirectConn, DirectRecv, DirectSendError};
use crate::{Channel, Error, RecvError, SendError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ChanState {
    Free,
    Engine,
    Direct(usize),
    Gone,
}

/// The channels of an endpoint and its direct connections.
#[derive(Default)]
pub(super) struct Channels {
    /// Each channel tag's state, by tag.
    pub(super) state: Vec<ChanState>,
    /// The direct connections in use, no closed one among them: a
    /// connection is unmapped (its segment and descriptor released) when
    /// its channel is closed, when it is found broken, and when its peer
    /// is gone and everything the peer sent has been read.
    pub(super) conns: Vec<DirectConn>,
    /// How many of `conns` have a peer that is gone but still hold
    /// messages (released once drained).
    pub(super) conns_gone: usize,
    /// The connection the next receive looks at first.
    pub(super) rr: usize,
}

impl Channels {
    pub(super) fn set_chan(&mut self, ch: u16, st: ChanState) {
        let i = ch as usize;
        if self.state.len() <= i {
            self.state.resize(i + 1, ChanState::Free);
        }
        self.state[i] = st;
    }

    /// Close direct connection `i` (our side: the peer sees it closed)
    /// and unmap it; its channel keeps whatever state the caller gives
    /// it. The last connection takes its place.
    pub(super) fn release_conn(&mut self, i: usize) {
        let c = self.conns.swap_remove(i);
        c.close();
        if c.gone {
            self.conns_gone -= 1;
        }
        drop(c);
        if let Some(moved) = self.conns.get(i) {
            let ch = moved.channel as usize;
            if self.state.get(ch) == Some(&ChanState::Direct(self.conns.len())) {
                self.state[ch] = ChanState::Direct(i);
            }
        }
        if self.rr >= self.conns.len() {
            self.rr = 0;
        }
    }

    /// Release the connections whose peer is gone and that hold nothing
    /// more: their channels are gone.
    #[cold]
    pub(super) fn release_drained(&mut self) {
        let mut i = self.conns.len();
        while i > 0 && self.conns_gone > 0 {
            i -= 1;
            let c = &self.conns[i];
            if c.gone && !c.ready() {
                let ch = c.channel;
                self.release_conn(i);
                self.set_chan(ch, ChanState::Gone);
            }
        }
    }

    /// The direct connections' indices in the order receives look at
    /// them: from the round-robin position on, wrapping.
    #[inline(always)]
    pub(super) fn in_turn(&self) -> impl Iterator<Item = usize> {
        let (n, rr) = (self.conns.len(), self.rr);
        (0..n).map(move |k| if rr + k >= n { rr + k - n } else { rr + k })
    }

    /// The next receive starts at the connection after `i`.
    #[inline(always)]
    pub(super) fn turn_after(&mut self, i: usize) {
        self.rr = if i + 1 == self.conns.len() { 0 } else { i + 1 };
    }
}

impl Endpoint {
    pub(super) fn attach_conn(
        &mut self,
        fd: OwnedFd,
        channel: u16,
        side_b: bool,
    ) -> Result<(), Error> {
        let seg = Segment::open(fd, CONN_HEADER_SIZE, true)?;
        let c = DirectConn::open(seg, channel, side_b, &self.header().client_counters)
            .map_err(Error::Protocol)?;
        // A channel tag the engine hands out again replaces what it named.
        if let Some(ChanState::Direct(old)) = self.chans.state.get(channel as usize).copied() {
            self.chans.release_conn(old);
        }
        self.chans.conns.push(c);
        self.chans
            .set_chan(channel, ChanState::Direct(self.chans.conns.len() - 1));
        Ok(())
    }

    /// A send on `ch` if it is a direct channel (None if not). A send that
    /// fails changes nothing.
    #[inline(always)]
    pub(super) fn try_send_direct(
        &mut self,
        ch: Channel,
        data: &[u8],
    ) -> Option<Result<(), SendError>> {
        let &ChanState::Direct(i) = self.chans.state.get(ch.0 as usize)? else {
            return None;
        };
        let c = self.chans.conns.get_mut(i)?;
        Some(match c.send(data) {
            Ok(false) => Ok(()),
            r => self.direct_sent(r),
        })
    }

    /// The outcome of a direct send other than "sent, nobody woken".
    #[cold]
    pub(super) fn direct_sent(&self, r: Result<bool, DirectSendError>) -> Result<(), SendError> {
        match r {
            Ok(woke) => {
                if woke {
                    bump(
                        &self.header().client_counters[ClientCounter::PeerWakeups as usize],
                        1,
                    );
                }
                Ok(())
            }
            Err(DirectSendError::Full) => Err(SendError::Full),
            Err(DirectSendError::TooLarge) => Err(SendError::TooLarge),
            Err(DirectSendError::Closed) => Err(SendError::PeerGone),
        }
    }

    #[inline]
    pub(super) fn send_direct(&mut self, i: usize, data: &[u8]) -> Result<(), SendError> {
        match self.chans.conns[i].send(data) {
            Ok(false) => Ok(()),
            r => self.direct_sent(r),
        }
    }

    /// A message of `len` bytes was taken from connection `i`: the next
    /// receive starts at the connection after it.
    #[inline(always)]
    pub(super) fn took_direct(&mut self, i: usize, len: usize) -> Recv {
        self.chans.turn_after(i);
        Recv {
            len,
            channel: Channel(self.chans.conns[i].channel),
        }
    }

    #[inline]
    pub(super) fn try_recv_direct(&mut self, buf: &mut [u8]) -> Result<Option<Recv>, RecvError> {
        for i in self.chans.in_turn() {
            if let Some(r) = self.try_recv_conn(i, buf)? {
                return Ok(Some(r));
            }
        }
        if self.chans.conns_gone > 0 {
            self.chans.release_drained();
        }
        Ok(None)
    }

    /// The next message of direct connection `i` (an index into
    /// `chans.conns`), if one is waiting.
    #[inline(always)]
    pub(super) fn try_recv_conn(
        &mut self,
        i: usize,
        buf: &mut [u8],
    ) -> Result<Option<Recv>, RecvError> {
        let c = &mut self.chans.conns[i];
        match c.recv(buf) {
            DirectRecv::Empty => Ok(None),
            DirectRecv::Message(len) => Ok(Some(self.took_direct(i, len))),
            DirectRecv::TooSmall(need) => Err(RecvError::BufferTooSmall(need)),
            DirectRecv::Broken => {
                let ch = c.channel;
                bump(
                    &self.header().client_counters[ClientCounter::DirectRxBad as usize],
                    1,
                );
                // Nothing more can be read from it: close our side
                // (the peer's sends fail) and unmap it.
                self.chans.release_conn(i);
                self.chans.set_chan(ch, ChanState::Gone);
                Err(RecvError::Broken(Channel(ch)))
            }
        }
    }
}
