//! An endpoint's event queue: channels opened and peers gone, applet
//! faults and detaches, turned into [`Event`]s for the user.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use unet_abi::{EventDesc, EventKind, FaultKind};
use unet_control::{EndpointAddr, Reply};

use super::channels::ChanState;
use super::{Endpoint, Event};
use crate::Channel;

impl Endpoint {
    pub(super) fn drain_events(&mut self) {
        let head = self.queues.map.events.head();
        while self.queues.event_tail < head {
            let e = self.queues.map.events.read(self.queues.event_tail);
            self.queues.event_tail += 1;
            self.handle_event(e);
        }
        if self.queues.event_tail == head {
            self.queues.map.events.set_tail(self.queues.event_tail);
        }
    }

    fn handle_event(&mut self, e: EventDesc) {
        match EventKind::from_u16(e.kind) {
            Some(EventKind::ChannelOpened) => {
                let mut direct = false;
                if e.arg != 0 {
                    if let Some((Reply::DirectConn { channel, side, .. }, mut fds)) =
                        self.session.inner.take_notice(e.arg)
                    {
                        if let Some(fd) = fds.pop() {
                            direct = self.attach_conn(fd, channel, side == 1).is_ok();
                        }
                    }
                }
                if !direct {
                    self.chans.set_chan(e.channel, ChanState::Engine);
                }
                let host = match e.family {
                    4 => Some(SocketAddr::new(
                        IpAddr::V4(Ipv4Addr::new(e.addr[0], e.addr[1], e.addr[2], e.addr[3])),
                        e.port,
                    )),
                    6 => Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(e.addr)), e.port)),
                    _ => None,
                };
                self.user_events.push_back(Event::ChannelOpened {
                    channel: Channel(e.channel),
                    peer: EndpointAddr {
                        host,
                        id: e.peer_endpoint,
                    },
                    direct,
                });
            }
            Some(EventKind::AppletFault) => {
                self.user_events.push_back(Event::AppletFault {
                    kind: FaultKind::from_u32(e.arg),
                });
            }
            Some(EventKind::AppletDetached) => {
                self.user_events.push_back(Event::AppletDetached {
                    kind: FaultKind::from_u32(e.arg),
                });
            }
            Some(EventKind::PeerGone) => {
                // A direct ring stays readable until drained: what the peer
                // sent before it went is still delivered, and the
                // connection is released after.
                match self.chans.state.get(e.channel as usize).copied() {
                    Some(ChanState::Direct(i)) if self.chans.conns[i].ready() => {
                        let c = &mut self.chans.conns[i];
                        self.chans.conns_gone += usize::from(!c.gone);
                        c.gone = true;
                    }
                    Some(ChanState::Direct(i)) => {
                        self.chans.release_conn(i);
                        self.chans.state[e.channel as usize] = ChanState::Gone;
                    }
                    Some(_) => self.chans.state[e.channel as usize] = ChanState::Gone,
                    None => {}
                }
                self.user_events.push_back(Event::PeerGone {
                    channel: Channel(e.channel),
                });
            }
            _ => {}
        }
    }

    /// The next channel event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.drain_events();
        self.user_events.pop_front()
    }
}
