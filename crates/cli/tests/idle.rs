//! An idle daemon (with a UDP wire) and clients blocked in `Endpoint::recv`
//! on engine-path and direct channels do not run: the engine sleeps in
//! epoll with no timeout, the clients on futexes, before and after a burst
//! of traffic on each path.

mod common;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use unet_abi::{CountersHeader, EngineCounter};

const BURST: u64 = 20_000;
/// Clock ticks (1/100 s on Linux) a process may use over the window.
const MAX_TICKS: u64 = 2;
const WINDOW: Duration = Duration::from_secs(3);
/// Times the engine may wake from its sleep over the window: none is
/// due (no timer, no wire peer, no message); one is allowed for a stray
/// event. An engine that woke every 10 ms would wake 300 times.
const MAX_ENGINE_WAKEUPS: u64 = 1;
/// Context switches all the daemon's threads together may make over the
/// window (a few for a stray event; waking every 10 ms would be 300).
const MAX_DAEMON_SWITCHES: u64 = 6;
/// Context switches all of a client's threads may make over the window:
/// a blocked `recv` with a timeout wakes once a second to look at the
/// clock (3 in the window), plus a few strays.
const MAX_CLIENT_SWITCHES: u64 = 3 * WINDOW.as_secs() + 6;

/// A client blocked in `recv` (60 s at a time) until its stdin closes;
/// any message is a failure.
fn block_in_recv(mut ep: unet::Endpoint) -> ! {
    let mut buf = vec![0u8; 1 << 17];
    loop {
        match ep.recv(&mut buf, Some(Duration::from_secs(60))) {
            Err(unet::RecvError::Timeout) => {}
            r => fail(&format!("unexpected after the burst: {r:?}")),
        }
    }
}

#[test]
fn child() {
    let Some(role) = role() else { return };
    if stream_role(&role) {
        return;
    }
    watchdog(120);
    std::thread::spawn(|| {
        hold();
        std::process::exit(0);
    });
    match role.as_str() {
        // Receives a burst on the engine path, then one on a direct
        // channel, then blocks with both open.
        "sleeper" => {
            let mut ep = connect_endpoint();
            say(&format!("ID {}", ep.id()));
            let (_, bytes) = stream_recv(&mut ep, BURST, 64, &size_of_seq);
            say(&format!("GOT {bytes}"));
            let (_, bytes) = stream_recv(&mut ep, BURST, 64, &size_of_seq);
            say(&format!("GOT {bytes}"));
            block_in_recv(ep)
        }
        // Sends a burst on a channel of UNET_PATH, then blocks in recv
        // with the channel open.
        "burster" => {
            let mut ep = connect_endpoint();
            let path = path_named(&env("UNET_PATH"));
            let ch = ep
                .open_channel(peer_addr(), unet::ChannelOptions { path })
                .unwrap_or_else(|e| fail(&format!("open channel: {e}")));
            stream_send(&mut ep, ch, BURST, WINDOW_MSGS, &size_of_seq);
            say("DONE");
            block_in_recv(ep)
        }
        r => panic!("unknown role {r}"),
    }
}

/// The stream's window of unacknowledged messages.
const WINDOW_MSGS: u64 = common::WINDOW;

/// Context switches (voluntary and not) of each thread of `pid`.
fn switches(pid: u32) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            continue; // the thread ended
        };
        let n: u64 = status
            .lines()
            .filter(|l| {
                l.starts_with("voluntary_ctxt_switches")
                    || l.starts_with("nonvoluntary_ctxt_switches")
            })
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        out.insert(t.file_name().to_string_lossy().into_owned(), n);
    }
    out
}

/// Context switches of `pid`'s threads since `before` (a thread that
/// started since counts all of its own).
fn switches_since(pid: u32, before: &HashMap<String, u64>) -> u64 {
    switches(pid)
        .iter()
        .map(|(tid, n)| n.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum()
}

/// The engine's wakeup counter, read from its counters segment (shared
/// memory: reading it does not wake the engine).
fn wakeups(seg: &unet_sys::Segment) -> u64 {
    // SAFETY: the segment starts with the counters header (mapped with its
    // full size by counters()); the values are atomics.
    let h = unsafe { seg.ptr().cast::<CountersHeader>().as_ref() };
    h.engine[EngineCounter::Wakeups as usize].load(Ordering::Relaxed)
}

/// Over the window, the engine does not wake, the daemon's threads and
/// each client's barely switch, and no process uses CPU time.
fn assert_idle(what: &str, seg: &unet_sys::Segment, daemon: u32, clients: &[(&str, u32)]) {
    let all: Vec<(&str, u32)> = std::iter::once(("daemon", daemon))
        .chain(clients.iter().copied())
        .collect();
    let ticks: Vec<u64> = all.iter().map(|&(_, p)| cpu_ticks(p)).collect();
    let sw: Vec<HashMap<String, u64>> = all.iter().map(|&(_, p)| switches(p)).collect();
    let w0 = wakeups(seg);
    std::thread::sleep(WINDOW);
    let woke = wakeups(seg) - w0;
    let mut report = format!("{what}: the engine woke {woke} times in {WINDOW:?}");
    let mut bad = woke > MAX_ENGINE_WAKEUPS;
    for (i, &(name, pid)) in all.iter().enumerate() {
        let used = cpu_ticks(pid) - ticks[i];
        let n = switches_since(pid, &sw[i]);
        let max = if i == 0 {
            MAX_DAEMON_SWITCHES
        } else {
            MAX_CLIENT_SWITCHES
        };
        report += &format!("; {name} (pid {pid}) used {used} ticks, {n} context switches");
        bad |= used > MAX_TICKS || n > max;
    }
    eprintln!("{report}");
    assert!(
        !bad,
        "{report} (at most {MAX_ENGINE_WAKEUPS} wakeups, {MAX_TICKS} ticks, \
         {MAX_DAEMON_SWITCHES} switches of the daemon, {MAX_CLIENT_SWITCHES} of a client)"
    );
}

/// An idle daemon with a UDP wire, a client blocked in `recv` with no
/// channel, then (after a burst on each path) that client blocked with an
/// engine-path and a direct channel open and its two peers blocked in
/// `recv` on theirs: over 3 s the engine's `wakeups` counter moves by at
/// most 1, the daemon's threads make at most 6 context switches in all,
/// each client's at most 15 (its `recv` looks at the clock once a
/// second), and no process uses more than 2 clock ticks of CPU.
#[test]
fn idle_daemon_and_blocked_clients_do_not_run() {
    let t = Instant::now();
    let mut d = Daemon::start(&["--udp", "127.0.0.1:0"]);
    let session = unet::Session::connect(&d.socket).expect("connect");
    let (seg, _) = session.counters().expect("counters");
    let mut sc = child_cmd(None, "sleeper");
    sc.env("UNET_SOCKET", &d.socket);
    let mut sleeper = Proc::spawn("sleeper", sc);
    let id = sleeper.expect("ID", Duration::from_secs(20));
    // Let start-up settle: the client is now blocked in recv.
    std::thread::sleep(Duration::from_millis(300));
    assert_idle(
        "before traffic",
        &seg,
        d.pid(),
        &[("sleeper", sleeper.pid())],
    );

    let want: u64 = (0..BURST).map(|s| size_of_seq(s) as u64).sum();
    let mut bursters = Vec::new();
    for path in ["engine", "direct"] {
        let mut bc = child_cmd(None, "burster");
        bc.env("UNET_SOCKET", &d.socket)
            .env("UNET_PEER_ID", &id)
            .env("UNET_PATH", path);
        let mut b = Proc::spawn(&format!("{path} burster"), bc);
        b.expect("DONE", Duration::from_secs(60));
        let got = sleeper.expect("GOT", Duration::from_secs(10));
        assert_eq!(got.parse::<u64>().unwrap(), want, "{path} burst");
        bursters.push(b);
    }
    let busy = engine_counter(&d.stat(), "busy_polls");
    assert!(busy > 0, "the engine did work during the burst");
    let st = d.stat();
    let direct: u64 = endpoints(&st)
        .iter()
        .filter(|e| e["pid"] == sleeper.pid())
        .map(|e| e["client"]["direct_rx_msgs"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(direct, BURST, "the second burst took the direct path: {st}");
    std::thread::sleep(Duration::from_millis(300));
    assert_idle(
        "after a burst on each path",
        &seg,
        d.pid(),
        &[
            ("sleeper", sleeper.pid()),
            ("engine burster", bursters[0].pid()),
            ("direct burster", bursters[1].pid()),
        ],
    );
    for mut b in bursters {
        b.finish(Duration::from_secs(10));
    }
    sleeper.finish(Duration::from_secs(10));
    drop(session);
    d.stop();
    eprintln!("idle test: {:?}", t.elapsed());
}
