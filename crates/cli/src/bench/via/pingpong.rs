//! The VI ping-pong: remote in a process pair of its own, local in turns
//! with the endpoint baseline.

use std::time::Duration;

use unet::{
    Channel, ChannelOptions, Endpoint, EndpointAddr, EndpointConfig, MemRegion, PathChoice, Vi,
    ViError, ViSeg,
};

use super::args::ViaPath;
use super::row::Point;
use super::vi::{attrs, done, err, line_up, post_err, recv_next, Side, Slots, PING_POSTED};
use super::Res;
use crate::bench::child::{stop_len, ChildKind, DATA, PATIENCE, STOP};
use crate::bench::stats::{self, Samples};
use crate::bench::unet_paths;

/// Ping-pong between two VIs (this process sends first), in a process
/// pair of its own (`--path remote`).
pub(super) fn vi_pingpong(p: &Point) -> Res<Samples> {
    let side = Side::start(p.path, 0)?;
    let ch = side.spawn(ChildKind::ViaPingpong, p.size, PING_POSTED, p.s.pin)?;
    let (iters, warmup) = p.iters();
    let res = (|| {
        let mut vi = side.connect(&ch, &attrs(p.reliability))?.0;
        let mut pinger = Pinger::new(&side, &mut vi, p.size)?;
        let samples = pinger.block(&mut vi, warmup, iters, p.s.limit)?;
        pinger.stop(&mut vi, p.path)?;
        Ok(samples)
    })();
    ch.wait(res)
}

/// `--path local`: the endpoint direct path and the VIs measured in
/// turns by one pair of processes, `--runs` blocks of each (direct, VI,
/// direct, VI…): both see the same placement of the two processes on the
/// host's cores, which can change a round trip 3-4x between pairs of
/// processes. `show(block, kind)` tells which block runs. Returns each
/// turn's round trips, direct and VI.
pub(super) fn local_pingpong(
    p: &Point,
    show: &dyn Fn(usize, &str),
) -> Res<Vec<(Samples, Samples)>> {
    let side = Side::start(p.path, 0)?;
    let ch = side.spawn(ChildKind::ViaPingpong, p.size, PING_POSTED, p.s.pin)?;
    let (iters, warmup) = p.iters();
    let size = p.size;
    let res = (|| {
        let (mut vi, ep_id) = side.connect(&ch, &attrs(p.reliability))?;
        let ep_id = ep_id.ok_or("the child sent no endpoint")?;
        let mut ep = side
            .session
            .create_endpoint(EndpointConfig::default())
            .map_err(err("endpoint"))?;
        let c = ep
            .open_channel(
                EndpointAddr {
                    host: None,
                    id: ep_id,
                },
                ChannelOptions {
                    path: PathChoice::Direct,
                },
            )
            .map_err(err("open_channel"))?;
        let mut pinger = Pinger::new(&side, &mut vi, size)?;
        let mut turns = Vec::new();
        for rep in 0..p.s.runs {
            show(rep, "direct");
            let b = unet_paths::time_pingpong(&mut ep, c, size, warmup, iters, p.s.limit)?;
            // The child turns to its VI.
            send_ep(&mut ep, c, &vec![STOP; stop_len(size)])?;
            show(rep, "VI");
            let v = pinger.block(&mut vi, warmup, iters, p.s.limit)?;
            pinger.stop(&mut vi, p.path)?;
            turns.push((b, v));
        }
        send_ep(&mut ep, c, &vec![END; stop_len(size)])?;
        Ok(turns)
    })();
    ch.wait(res)
}

/// A message on the endpoint's direct channel (the ends of the
/// endpoint's turns).
fn send_ep(ep: &mut Endpoint, c: Channel, m: &[u8]) -> Res<()> {
    ep.send_blocking(c, m, PATIENCE)
        .map_err(|e| format!("unet send: {e}"))
}

/// The first byte of the message that ends the child's last turn (on the
/// endpoint; STOP ends the others).
pub(super) const END: u8 = 3;

/// The sending end of a VI ping-pong. Region: the message at 0, the STOP
/// message, then the receive slots.
struct Pinger {
    region: MemRegion,
    size: usize,
    stop_at: usize,
    base: usize,
    stride: usize,
    /// The receive slot that completed last: posted again while the next
    /// message travels.
    pending: Option<u64>,
}

impl Pinger {
    fn new(side: &Side, vi: &mut Vi, size: usize) -> Res<Pinger> {
        let stop_at = line_up(size);
        let base = stop_at + 64;
        let stride = line_up(size.max(16));
        let region = side.register(base + PING_POSTED * stride)?;
        region.write(0, &vec![DATA; size]);
        region.write(stop_at, &vec![STOP; stop_len(size)]);
        let p = Pinger {
            region,
            size,
            stop_at,
            base,
            stride,
            pending: None,
        };
        p.slots().post_all(vi)?;
        Ok(p)
    }

    fn slots(&self) -> Slots<'_> {
        Slots {
            region: &self.region,
            base: self.base,
            stride: self.stride,
            n: PING_POSTED,
        }
    }

    /// `warmup` untimed round trips, then up to `iters` timed one by one
    /// (fewer if `limit` passes first).
    fn block(&mut self, vi: &mut Vi, warmup: usize, iters: usize, limit: Duration) -> Res<Samples> {
        let size = self.size;
        let mut pending = self.pending.take();
        let rx = self.slots();
        let out = [ViSeg::new(&self.region, 0, size)];
        let mut rt = || -> Res<()> {
            vi.post_send(0, &out).map_err(post_err("post_send"))?;
            // While the message travels: the receive that completed last
            // time goes back, and completed sends are taken back.
            if let Some(k) = pending.take() {
                rx.post(vi, k)?;
            }
            while let Some(c) = vi.send_done() {
                done(c, "send")?;
            }
            let (k, n) = recv_next(vi)?;
            if n != size {
                return Err(format!("VI ping-pong: a {n}-byte answer, not {size}"));
            }
            pending = Some(k);
            Ok(())
        };
        for _ in 0..warmup {
            rt()?;
        }
        let samples = stats::time_round_trips(iters, limit, &mut rt)?;
        self.pending = pending;
        Ok(samples)
    }

    /// STOP, and its completion: then it is in the ring (or placed),
    /// where the child finds it even once this VI is closed.
    fn stop(&mut self, vi: &mut Vi, path: ViaPath) -> Res<()> {
        const STOP_ID: u64 = 1;
        let stop = [ViSeg::new(&self.region, self.stop_at, stop_len(self.size))];
        vi.post_send(STOP_ID, &stop)
            .map_err(post_err("post_send"))?;
        loop {
            let c = vi
                .send_wait(Some(PATIENCE))
                .map_err(|e| format!("VI send: {e}"))?;
            match c.status {
                Ok(_) if c.id == STOP_ID => return Ok(()),
                Ok(_) => {}
                // Through the engines, the child may have had STOP and
                // closed its VI before our sends were acknowledged (its
                // exit status says whether it ended well).
                Err(ViError::PeerGone) if path == ViaPath::Remote => return Ok(()),
                Err(e) => return Err(format!("VI send descriptor {} failed: {e}", c.id)),
            }
        }
    }
}
