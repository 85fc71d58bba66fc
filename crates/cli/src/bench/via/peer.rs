//! The child's half of a local VI run: it echoes (ping-pong) or counts
//! (stream).

use std::time::Duration;

use unet::{
    EndpointConfig, Engine, Reliability, Session, Vi, ViAttributes, ViError, ViSeg, WaitError,
};

use super::pingpong::END;
use super::vi::{
    attrs, done, err, line_up, post_err, remote_engine, send_next, Slots, ANSWER, CHILD_SEED,
    RESEND,
};
use super::Res;
use crate::bench::child::{ChildArgs, ChildKind, PathArg, PATIENCE, STOP, SYNC};
use crate::bench::unet_paths;

/// The child's half of a local VI run: connect to the engine at
/// `--socket`, listen on a discriminator and print it after `ready`,
/// accept one VI (of the reliability the other side asks for), then echo
/// (ping-pong) or receive and count (stream), with `--batch` receives
/// posted.
pub fn child(a: &ChildArgs, ready: fn(&str)) -> Res<()> {
    // Remote: an engine of its own on UDP loopback; local: the parent's.
    let (_engine, session) = if a.path == Some(PathArg::Udp) {
        let e = Engine::start(remote_engine(a.drop_ppm, CHILD_SEED))
            .map_err(|e| format!("starting the unet engine: {e}"))?;
        let s = Session::embedded(&e).map_err(err("session"))?;
        (Some(e), s)
    } else {
        let sock = a.socket.as_ref().ok_or("--socket is required")?;
        (None, Session::connect(sock).map_err(err("connect"))?)
    };
    let tag = u64::from(std::process::id());
    let server = session.vi_listen(tag).map_err(err("vi_listen"))?;
    let remote = a.path == Some(PathArg::Udp);
    // A local ping-pong also echoes on an endpoint, in turns with the VI
    // (the baseline, measured by the same pair of processes).
    let mut ep = if !remote && a.kind == ChildKind::ViaPingpong {
        Some(
            session
                .create_endpoint(EndpointConfig::default())
                .map_err(err("endpoint"))?,
        )
    } else {
        None
    };
    match (session.udp_addr(), &ep) {
        (Some(u), _) if remote => ready(&format!("{tag} {u}")),
        (_, Some(ep)) => ready(&format!("{tag} {}", ep.id())),
        _ => ready(&tag.to_string()),
    }
    let req = server
        .wait_request(Some(PATIENCE))
        .map_err(err("wait_request"))?;
    let posted = a.batch.max(1);
    let attrs = ViAttributes {
        recv_queue: posted.max(1024) as u32,
        ..attrs(req.reliability())
    };
    let mut vi = req.accept(&attrs).map_err(err("accept"))?;
    let stride = line_up(a.size.max(16));
    match a.kind {
        ChildKind::ViaPingpong => {
            let region = session
                .register_memory(posted * stride)
                .map_err(err("register_memory"))?;
            let rx = Slots {
                region: &region,
                base: 0,
                stride,
                n: posted,
            };
            rx.post_all(&mut vi)?;
            let mut posted = rx.n;
            let Some(ep) = &mut ep else {
                return echo(&mut vi, &rx, a.size, &mut posted).map(|_| ());
            };
            // Turns: the endpoint's until STOP, then the VI's until STOP,
            // until END on the endpoint.
            let mut buf = vec![0u8; a.size.max(16)];
            loop {
                if unet_paths::echo(ep, &mut buf, a.size)? == END {
                    return Ok(());
                }
                if echo(&mut vi, &rx, a.size, &mut posted)? {
                    return Err("the VI's peer went before its last turn".into());
                }
            }
        }
        ChildKind::ViaStream => {
            let region = session
                .register_memory(64 + posted * stride)
                .map_err(err("register_memory"))?;
            let rx = Slots {
                region: &region,
                base: 64,
                stride,
                n: posted,
            };
            count(&mut vi, &rx)
        }
        k => Err(format!("not a VI child: {k:?}")),
    }
}

/// The next completed receive; `None` once the other side has gone (the
/// end of a run whose last message an unreliable VI lost).
fn recv_or_gone(vi: &mut Vi, timeout: Duration) -> Res<Option<(u64, usize)>> {
    match vi.recv_wait(Some(timeout)) {
        Ok(c) => done(c, "receive").map(Some),
        Err(WaitError::Empty(Some(ViError::PeerGone))) => Ok(None),
        Err(e) => Err(format!("VI receive: {e}")),
    }
}

/// Echoes every `size`-byte message from the buffer it landed in, until
/// one of another length (false) or the other side's going (true); a slot
/// is posted again once its echo completed (the slot of the message that
/// ended the turn at once). `posted`: the slots posted, kept from one turn
/// to the next.
fn echo(vi: &mut Vi, rx: &Slots, size: usize, posted: &mut usize) -> Res<bool> {
    loop {
        // A send through the engines completes later (once acknowledged,
        // for the reliable levels): with every slot waiting for its echo
        // to complete, wait for one.
        if *posted == 0 {
            let (j, _) = send_next(vi)?;
            rx.post(vi, j)?;
            *posted += 1;
        }
        let Some((k, n)) = recv_or_gone(vi, PATIENCE)? else {
            return Ok(true);
        };
        if n != size {
            rx.post(vi, k)?;
            return Ok(false);
        }
        *posted -= 1;
        vi.post_send(k, &[ViSeg::new(rx.region, rx.offset(k), n)])
            .map_err(post_err("post_send"))?;
        while let Some(c) = vi.send_done() {
            let (j, _) = done(c, "send")?;
            rx.post(vi, j)?;
            *posted += 1;
        }
    }
}

/// Counts the bytes placed into the slots, posting each slot again once
/// counted; answers SYNC and STOP (two-byte messages `[kind, number]`)
/// with `[kind, number, u64 bytes since the last SYNC]` from the region's
/// first bytes. After STOP, an unreliable VI stays a while to answer the
/// STOP sent again if its answer was lost.
fn count(vi: &mut Vi, rx: &Slots) -> Res<()> {
    rx.post_all(vi)?;
    let lossy = vi.attributes().reliability == Reliability::Unreliable;
    let mut bytes = 0u64;
    let mut stopped = false;
    loop {
        let wait = if stopped { 2 * RESEND } else { PATIENCE };
        let (k, n) = match recv_or_gone(vi, wait) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(()),
            Err(_) if stopped => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut ctrl = [0u8; 2];
        if n == 2 {
            rx.region.read(rx.offset(k), &mut ctrl);
        }
        rx.post(vi, k)?;
        if n != 2 || (ctrl[0] != SYNC && ctrl[0] != STOP) {
            bytes += n as u64;
            continue;
        }
        let mut ans = [0u8; ANSWER];
        ans[..2].copy_from_slice(&ctrl);
        ans[2..].copy_from_slice(&bytes.to_le_bytes());
        // The previous answer's send has completed (below).
        rx.region.write(0, &ans);
        vi.post_send(0, &[ViSeg::new(rx.region, 0, ANSWER)])
            .map_err(post_err("post_send"))?;
        // Completed: in the ring (or placed, or with the engine), where
        // the sender finds it even once this VI is closed. Through the
        // engines, the sender may have had the answer to STOP and closed
        // before this send was acknowledged.
        let c = vi
            .send_wait(Some(PATIENCE))
            .map_err(|e| format!("VI send: {e}"))?;
        match c.status {
            Ok(_) => {}
            Err(ViError::PeerGone) if ctrl[0] == STOP => return Ok(()),
            Err(e) => return Err(format!("VI send descriptor {} failed: {e}", c.id)),
        }
        match ctrl[0] {
            STOP if !lossy => return Ok(()),
            STOP => stopped = true,
            _ => bytes = 0,
        }
    }
}
