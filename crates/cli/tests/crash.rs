//! A client killed with SIGKILL in the middle of a stream, with messages
//! queued for its peer: the daemon stays up, the peer gets every message
//! sent before the kill, in order and intact, and then sees the channel
//! fail; the dead client's endpoint, slot and descriptors are reclaimed,
//! and a new client can talk to the peer at once. On the direct and on the
//! engine path.

mod common;

use std::time::{Duration, Instant};

use common::*;
use unet::SendError;

#[test]
fn child() {
    let Some(role) = role() else { return };
    watchdog(90);
    match role.as_str() {
        // Streams (windowed) the first ACKED messages, then sends the
        // rest of SENT unacknowledged, says so, and waits to be killed.
        "victim" => {
            let mut ep = connect_endpoint();
            let path = path_named(&env("UNET_PATH"));
            let ch = ep
                .open_channel(peer_addr(), unet::ChannelOptions { path })
                .unwrap_or_else(|e| fail(&format!("open channel: {e}")));
            say(&format!("ID {}", ep.id()));
            stream_send(&mut ep, ch, ACKED, WINDOW, &size_of_seq);
            let mut msg = vec![0u8; 1 << 17];
            for seq in ACKED..SENT {
                let len = size_of_seq(seq);
                fill(seq, &mut msg[..len]);
                ep.send_blocking(ch, &msg[..len], T)
                    .unwrap_or_else(|e| fail(&format!("message {seq}: {e}")));
            }
            say("SENT");
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        "survivor" => survivor(),
        // Ping-pong with the survivor after the crash.
        "pinger" => {
            let mut ep = connect_endpoint();
            let path = path_named(&env("UNET_PATH"));
            let ch = ep
                .open_channel(peer_addr(), unet::ChannelOptions { path })
                .unwrap_or_else(|e| fail(&format!("open channel: {e}")));
            let mut msg = vec![0u8; 1 << 17];
            let mut buf = vec![0u8; 1 << 17];
            for seq in 0..PINGS {
                let len = size_of_seq(seq);
                fill(seq, &mut msg[..len]);
                ep.send_blocking(ch, &msg[..len], T)
                    .unwrap_or_else(|e| fail(&format!("ping {seq}: {e}")));
                let r = ep
                    .recv(&mut buf, Some(T))
                    .unwrap_or_else(|e| fail(&format!("pong {seq}: {e}")));
                if r.channel != ch || buf[..r.len] != msg[..len] {
                    fail(&format!("pong {seq} differs"));
                }
            }
            say("DONE");
            hold();
        }
        r => panic!("unknown role {r}"),
    }
}

const PINGS: u64 = 1000;
/// Messages of the victim's stream the survivor reads and acknowledges
/// (a multiple of 64: the last is acknowledged).
const ACKED: u64 = 2048;
/// Messages the victim sends before it is killed: those beyond ACKED are
/// queued for the survivor when it dies (fewer than the survivor's
/// receive buffers and the stream's window hold).
const SENT: u64 = ACKED + 52;

fn survivor() {
    let mut ep = connect_endpoint();
    say(&format!("ID {}", ep.id()));
    let mut buf = vec![0u8; 1 << 17];
    let mut scratch = Vec::new();
    let mut seq = 0u64;
    let mut chan = None;
    // Phase 1: the victim's stream, in order and intact, acknowledged
    // every 64 messages, up to ACKED.
    while seq < ACKED {
        match ep.recv(&mut buf, Some(T)) {
            Ok(r) => {
                if *chan.get_or_insert(r.channel) != r.channel {
                    fail(&format!("message {seq} on channel {:?}", r.channel));
                }
                if r.len != size_of_seq(seq) || !check(seq, &buf[..r.len], &mut scratch) {
                    fail(&format!("message {seq} differs ({} bytes)", r.len));
                }
                seq += 1;
                if seq.is_multiple_of(64) {
                    ep.send_blocking(r.channel, &seq.to_le_bytes(), T)
                        .unwrap_or_else(|e| fail(&format!("ack {seq}: {e}")));
                }
            }
            Err(e) => fail(&format!("recv after {seq}: {e}")),
        }
    }
    say("GOT");
    let ch = chan.expect("a channel");
    // Fall behind: read nothing until the victim is gone. It dies with
    // the rest of its messages queued for us, which must still be
    // delivered, every one of them, after the PeerGone event.
    if !wait_peer_gone(&mut ep, ch, T) {
        fail("the victim's channel never went");
    }
    while let Ok(r) = ep.recv(&mut buf, Some(Duration::from_millis(500))) {
        if r.channel != ch || r.len != size_of_seq(seq) || !check(seq, &buf[..r.len], &mut scratch)
        {
            fail(&format!(
                "message {seq} after the crash differs ({} bytes on {:?})",
                r.len, r.channel
            ));
        }
        seq += 1;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let send = loop {
        match ep.send(ch, b"after the crash") {
            Err(e) if e != SendError::Full => break format!("{e:?}"),
            _ if Instant::now() > deadline => break "Ok".to_string(),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    say(&format!("GONE {seq} {send}"));
    // Phase 2: echo a new client's messages.
    for n in 0..PINGS {
        let r = ep
            .recv(&mut buf, Some(T))
            .unwrap_or_else(|e| fail(&format!("echo {n}: {e}")));
        if r.channel == ch {
            fail("a message on the dead channel");
        }
        ep.send_blocking(r.channel, &buf[..r.len], T)
            .unwrap_or_else(|e| fail(&format!("echo {n}: {e}")));
    }
    say("ECHOED");
    hold();
}

fn shm_unet_files() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.to_lowercase().contains("unet"))
                .collect()
        })
        .unwrap_or_default()
}

/// `check_send`: require that sending on the dead channel fails with
/// `PeerGone`.
fn crash(path: &str, check_send: bool) {
    let t = Instant::now();
    let shm_before = shm_unet_files();
    let mut d = Daemon::start(&[]);
    let mut sc = child_cmd(None, "survivor");
    sc.env("UNET_SOCKET", &d.socket);
    let mut survivor = Proc::spawn("survivor", sc);
    let sid = survivor.expect("ID", Duration::from_secs(20));

    // The daemon's state before the victim comes.
    let st0 = d.stat();
    let reclaimed0 = engine_counter(&st0, "endpoints_reclaimed");
    std::thread::sleep(Duration::from_millis(100));
    let fds0 = fd_count(d.pid());
    assert!(fds0 > 0, "cannot read /proc/{}/fd", d.pid());

    let mut vc = child_cmd(None, "victim");
    vc.env("UNET_SOCKET", &d.socket)
        .env("UNET_PEER_ID", &sid)
        .env("UNET_PATH", path);
    let mut victim = Proc::spawn("victim", vc);
    let vid: u32 = victim
        .expect("ID", Duration::from_secs(20))
        .parse()
        .unwrap();
    let vpid = victim.pid();
    survivor.expect("GOT", Duration::from_secs(30));
    victim.expect("SENT", Duration::from_secs(30));
    assert!(
        fd_count(d.pid()) > fds0,
        "the victim's segments are not held by the daemon?"
    );
    if path == "engine" {
        // On the engine path a message is the survivor's once the engine
        // has delivered it (what it had not yet taken from the victim's
        // send queue dies with the victim): kill once all have arrived.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let st = d.stat();
            let got = endpoint_stats(&st, sid.parse().unwrap())
                .and_then(|e| e["rx_msgs"].as_u64())
                .unwrap_or(0);
            if got == SENT {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the engine delivered {got} of {SENT} messages\n{st}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    victim.kill9();

    let gone = survivor.expect("GONE", Duration::from_secs(20));
    let mut f = gone.split_whitespace();
    let received: u64 = f.next().unwrap().parse().unwrap();
    assert_eq!(
        received, SENT,
        "the survivor got {received} messages of the {SENT} sent before the kill"
    );
    let send = f.next();
    if check_send {
        assert_eq!(send, Some("PeerGone"), "send after the crash: {gone}");
    } else {
        eprintln!("{path}: send after the crash: {send:?}");
    }

    // The victim's resources are reclaimed.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = d.stat();
        let reclaimed = engine_counter(&st, "endpoints_reclaimed");
        let live = endpoints_of_pid(&st, vpid);
        let fds = fd_count(d.pid());
        let ok = reclaimed == reclaimed0 + 1
            && live.is_empty()
            && endpoint_stats(&st, vid).is_none()
            && fds == fds0;
        if ok {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not reclaimed: endpoints_reclaimed {reclaimed} (was {reclaimed0}), \
             live slots of pid {vpid}: {live:?}, daemon fds {fds} (were {fds0})\n{st}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(shm_unet_files(), shm_before, "files left in /dev/shm");

    // A new client talks to the survivor at once.
    let mut pc = child_cmd(None, "pinger");
    pc.env("UNET_SOCKET", &d.socket)
        .env("UNET_PEER_ID", &sid)
        .env("UNET_PATH", path);
    let mut pinger = Proc::spawn("pinger", pc);
    pinger.expect("DONE", Duration::from_secs(30));
    survivor.expect("ECHOED", Duration::from_secs(10));
    pinger.finish(Duration::from_secs(10));
    survivor.finish(Duration::from_secs(10));
    d.stop();
    eprintln!("{path}: crash after {received} messages, {:?}", t.elapsed());
}

#[test]
fn killed_client_on_the_direct_path() {
    crash("direct", false);
}

/// The same with the send check: once the peer is gone, a send on the
/// direct channel fails with `PeerGone` (the sender looks at the peer's
/// closed flag on every send), even when the PeerGone event was handled
/// while the ring still held unread messages.
#[test]
fn killed_client_on_the_direct_path_send_fails() {
    crash("direct", true);
}

#[test]
fn killed_client_on_the_engine_path() {
    crash("engine", true);
}
