//! Set-up of the VIs the engine carries to other engines: connecting to
//! a discriminator at another engine (its open retried until answered),
//! accepting one of its requests, and the set-up frames of the VIA wire
//! (opens, accepts, refusals and closes), each checked before it is used.

use super::*;

impl ViaSetup<'_> {
    /// Ask the engine at `to` for a connection to discriminator `tag`.
    pub(super) fn vi_connect_remote(
        &mut self,
        ci: ClientId,
        req_id: u32,
        to: std::net::SocketAddr,
        tag: u64,
        attrs: ViParams,
        wait: Duration,
    ) -> Result<(), ErrorCode> {
        if self.remote.is_none() {
            return Err(ErrorCode::NoWire);
        }
        if !self.remote.as_mut().is_some_and(|w| w.vi_peer_add(to)) {
            return Err(ErrorCode::NoResources);
        }
        let vi = match self.new_engine_vi(ci, attrs, None) {
            Ok(v) => v,
            Err(e) => {
                if let Some(w) = self.remote.as_mut() {
                    w.vi_peer_remove(to);
                }
                return Err(e);
            }
        };
        let now = Instant::now();
        self.vias.add_open(RemoteOpen {
            client: ci,
            req_id,
            vi,
            to,
            tag,
            attrs,
            my_token: unet_sys::random_u64(),
            next_try: now,
            tries: 0,
            deadline: now + wait,
        });
        self.retry_opens(now);
        Ok(())
    }

    /// (Re)send due ViOpens; fail those past their time.
    pub(crate) fn retry_opens(&mut self, now: Instant) {
        for id in self.vias.take_due_opens(now) {
            let Some(o) = self.vias.opens.get_mut(&id) else {
                continue;
            };
            if o.deadline <= now {
                let o = self.vias.opens.remove(&id).expect("present");
                self.count(EngineCounter::ViRefused);
                self.reply_to(o.client, o.req_id, Reply::Error(ErrorCode::Unreachable));
                self.drop_engine_vi(o.vi, 0);
                if let Some(w) = self.remote.as_mut() {
                    w.vi_peer_remove(o.to);
                }
                continue;
            }
            o.tries += 1;
            o.next_try = now + OPEN_RETRY;
            let next = o.next_try;
            let f = Body::ViOpen(ViOpen {
                request_id: id,
                src_vi: o.vi,
                tag: o.tag,
                src_token: o.my_token,
                reliability: o.attrs.reliability,
                strict_rnr: o.attrs.strict_rnr,
                hold: HOLD,
            });
            let to = o.to;
            self.vias.open_due_at(id, next);
            if let Some(w) = self.remote.as_mut() {
                w.send_vi_control(to, f);
            }
        }
    }

    /// Accept a request from another engine's VI with a VI of `attrs`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn vi_accept_remote(
        &mut self,
        ci: ClientId,
        req_id: u32,
        attrs: ViParams,
        addr: std::net::SocketAddr,
        request_id: u32,
        src_vi: u32,
        src_token: u64,
    ) -> Option<Reply> {
        let connector = Connector::Remote {
            addr,
            src_engine: 0,
            request_id,
            src_vi,
            src_token,
        };
        if !self.remote.as_mut().is_some_and(|w| w.vi_peer_add(addr)) {
            self.refuse(connector, ErrorCode::NoResources);
            return Some(Reply::Error(ErrorCode::NoResources));
        }
        let my_token = unet_sys::random_u64();
        let peer = RemoteVi {
            addr,
            vi: src_vi,
            peer_token: src_token,
            my_token,
        };
        let id = match self.new_engine_vi(ci, attrs, Some(peer)) {
            Ok(id) => id,
            Err(code) => {
                if let Some(w) = self.remote.as_mut() {
                    w.vi_peer_remove(addr);
                }
                self.refuse(connector, code);
                return Some(Reply::Error(code));
            }
        };
        self.vias.answered.insert((addr, request_id), id);
        if let Some(w) = self.remote.as_mut() {
            w.vi_route(id, Some((addr, my_token)));
        }
        self.count(EngineCounter::ViConnected);
        if let Some(w) = self.remote.as_mut() {
            w.send_vi_control(
                addr,
                Body::ViAccept(ViAcceptFrame {
                    request_id,
                    dst_vi: src_vi,
                    src_vi: id,
                    accept_token: my_token,
                    hold: HOLD,
                }),
            );
        }
        self.hand_over(ci, req_id, id);
        None
    }

    /// Forget engine-carried VI `id`: tell its peer (with `reason`) and
    /// release its segment.
    pub(crate) fn drop_engine_vi(&mut self, id: u32, reason: u32) {
        self.vias.remove_vi(id);
        let Some(mut v) = self.vias.engine.remove(&id) else {
            return;
        };
        self.poller.remove(v.doorbell.fd().as_raw_fd());
        if let Some(w) = self.remote.as_mut() {
            w.vi_route(id, None);
        }
        if let (Some(p), Some(w)) = (v.peer, self.remote.as_mut()) {
            if let Some(ack) = v.last_ack() {
                w.send_vi_ack(p.addr, ViAck::from_ack(p.vi, p.peer_token, ack));
            }
            let reason = if v.state != 0 { v.state } else { reason };
            w.send_vi_control(
                p.addr,
                Body::ViClose(ViClose {
                    dst_vi: p.vi,
                    token: p.peer_token,
                    reason,
                }),
            );
            w.vi_peer_remove(p.addr);
        }
        self.vias.answered.retain(|_, v| *v != id);
    }

    /// Act on the VIA set-up frames that came from the wire.
    pub(crate) fn vi_wire(&mut self, frames: Vec<ConnIn>) {
        for f in frames {
            match f {
                ConnIn::Open(from, src_engine, o) => self.vi_open_from(from, src_engine, o),
                ConnIn::Accept(from, a) => self.vi_accepted(from, a),
                ConnIn::Refuse(from, r) => {
                    let ok = self
                        .vias
                        .opens
                        .get(&r.request_id)
                        .is_some_and(|o| o.to == from && o.vi == r.dst_vi);
                    if !ok {
                        self.count_forged();
                        continue;
                    }
                    let o = self.vias.opens.remove(&r.request_id).expect("present");
                    let code = match r.reason {
                        RefuseReason::NoListener => ErrorCode::NoListener,
                        RefuseReason::AttributesMismatch => ErrorCode::AttributesMismatch,
                        RefuseReason::NoResources => ErrorCode::NoResources,
                        _ => ErrorCode::Refused,
                    };
                    self.count(EngineCounter::ViRefused);
                    self.reply_to(o.client, o.req_id, Reply::Error(code));
                    self.vias.remove_vi(o.vi);
                    if let Some(v) = self.vias.engine.remove(&o.vi) {
                        self.poller.remove(v.doorbell.fd().as_raw_fd());
                    }
                    if let Some(w) = self.remote.as_mut() {
                        w.vi_peer_remove(from);
                    }
                }
                // Handled on the data path (or by UDM's links).
                ConnIn::Data { .. }
                | ConnIn::Frag { .. }
                | ConnIn::Ack(..)
                | ConnIn::Close(..)
                | ConnIn::UdmJoin(..)
                | ConnIn::UdmAccept(..) => {}
            }
        }
    }

    pub(super) fn count_forged(&self) {
        self.counters
            .engine(crate::wire::WireDrop::ForgedToken.counter(), 1);
    }

    /// A ViOpen from `from`: queue it for the listener (or answer again a
    /// retransmitted one).
    pub(super) fn vi_open_from(&mut self, from: std::net::SocketAddr, src_engine: u64, o: ViOpen) {
        if let Some(&id) = self.vias.answered.get(&(from, o.request_id)) {
            // Retransmitted: the same answer.
            if let (Some(v), Some(w)) = (self.vias.engine.get(&id), self.remote.as_mut()) {
                if let Some(p) = v.peer {
                    w.send_vi_control(
                        from,
                        Body::ViAccept(ViAcceptFrame {
                            request_id: o.request_id,
                            dst_vi: o.src_vi,
                            src_vi: id,
                            accept_token: p.my_token,
                            hold: HOLD,
                        }),
                    );
                }
            }
            return;
        }
        if self.vias.pending.remote(from, o.request_id).is_some() {
            // Retransmitted while it waits.
            return;
        }
        let connector = Connector::Remote {
            addr: from,
            src_engine,
            request_id: o.request_id,
            src_vi: o.src_vi,
            src_token: o.src_token,
        };
        let Some(&listener) = self.vias.listeners.get(&o.tag) else {
            return self.refuse(connector, ErrorCode::NoListener);
        };
        let attrs = ViParams {
            reliability: o.reliability,
            strict_rnr: o.strict_rnr,
            break_timeout_ms: 0,
        };
        let request = match self.queue_request(Pending {
            tag: o.tag,
            listener,
            connector,
            attrs,
            deadline: Instant::now() + CONNECT_TIMEOUT_MAX,
            who: Asker::Peer(from),
        }) {
            Ok(id) => id,
            Err(code) => return self.refuse(connector, code),
        };
        let notice = Reply::ViRequest {
            tag: o.tag,
            request,
            attrs,
            pid: 0,
            host: Some(from),
        };
        self.reply_to(listener, 0, notice);
    }

    /// Our ViOpen was accepted: the VI is connected; its client gets it.
    pub(super) fn vi_accepted(&mut self, from: std::net::SocketAddr, a: ViAcceptFrame) {
        let ok = self
            .vias
            .opens
            .get(&a.request_id)
            .is_some_and(|o| o.to == from && o.vi == a.dst_vi);
        if !ok {
            // A duplicate of an accept already taken, or forged.
            return self.count_forged();
        }
        let o = self.vias.opens.remove(&a.request_id).expect("present");
        if let Some(v) = self.vias.engine.get_mut(&o.vi) {
            v.peer = Some(RemoteVi {
                addr: from,
                vi: a.src_vi,
                peer_token: a.accept_token,
                my_token: o.my_token,
            });
        }
        crate::via::via_loop::touch(self.vias, o.vi);
        if let Some(w) = self.remote.as_mut() {
            w.vi_route(o.vi, Some((from, o.my_token)));
        }
        self.count(EngineCounter::ViConnected);
        self.hand_over(o.client, o.req_id, o.vi);
    }
}
