//! A client killed with SIGKILL in the middle of a stream: the daemon stays
//! up, the peer sees the channel fail, the dead client's endpoint, slot and
//! descriptors are reclaimed, and a new client can talk to the peer at once.
//! On the direct and on the engine path.

mod common;

use std::time::{Duration, Instant};

use common::*;
use unet::{RecvError, SendError};

#[test]
fn child() {
    let Some(role) = role() else { return };
    watchdog(90);
    match role.as_str() {
        // Streams (windowed) until killed.
        "victim" => {
            let mut ep = connect_endpoint();
            let path = path_named(&env("UNET_PATH"));
            let ch = ep
                .open_channel(peer_addr(), unet::ChannelOptions { path })
                .unwrap_or_else(|e| fail(&format!("open channel: {e}")));
            say(&format!("ID {}", ep.id()));
            stream_send(&mut ep, ch, u64::MAX / 2, WINDOW, &size_of_seq);
            fail("the stream ended");
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

fn survivor() {
    let mut ep = connect_endpoint();
    say(&format!("ID {}", ep.id()));
    let mut buf = vec![0u8; 1 << 17];
    let mut scratch = Vec::new();
    let mut seq = 0u64;
    let mut chan = None;
    // Phase 1: the victim's stream, in order and intact, until it is gone.
    loop {
        match ep.recv(&mut buf, Some(Duration::from_millis(100))) {
            Ok(r) => {
                if *chan.get_or_insert(r.channel) != r.channel {
                    fail(&format!("message {seq} on channel {:?}", r.channel));
                }
                if r.len != size_of_seq(seq) || !check(seq, &buf[..r.len], &mut scratch) {
                    fail(&format!("message {seq} differs ({} bytes)", r.len));
                }
                seq += 1;
                if seq.is_multiple_of(64) {
                    // The ack may fail once the victim is gone.
                    let _ = ep.send(r.channel, &seq.to_le_bytes());
                }
                if seq == 2000 {
                    say("GOT");
                    // Fall behind: the victim dies with messages queued for
                    // us, which must still be delivered.
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
            Err(RecvError::Timeout) => {}
            Err(e) => fail(&format!("recv after {seq}: {e}")),
        }
        if let Some(ch) = chan {
            if seq >= 2000 && wait_peer_gone(&mut ep, ch, Duration::ZERO) {
                break;
            }
        }
    }
    let ch = chan.expect("a channel");
    // What was sent before the crash may still be queued: drain it.
    while let Ok(r) = ep.recv(&mut buf, Some(Duration::from_millis(200))) {
        if r.channel != ch || !check(seq, &buf[..r.len], &mut scratch) {
            fail(&format!("message {seq} after the crash differs"));
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
    assert!(
        fd_count(d.pid()) > fds0,
        "the victim's segments are not held by the daemon?"
    );
    victim.kill9();

    let gone = survivor.expect("GONE", Duration::from_secs(20));
    let mut f = gone.split_whitespace();
    let received: u64 = f.next().unwrap().parse().unwrap();
    assert!(received >= 2000, "{gone}");
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
