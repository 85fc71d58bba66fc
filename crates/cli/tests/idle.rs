//! An idle daemon and a client blocked in `Endpoint::recv` use no CPU (the
//! engine sleeps in epoll, the client on a futex), before and after a burst
//! of traffic.

mod common;

use std::time::{Duration, Instant};

use common::*;

const BURST: u64 = 20_000;
/// Clock ticks (1/100 s on Linux) a process may use over the window.
const MAX_TICKS: u64 = 2;
const WINDOW: Duration = Duration::from_secs(3);

#[test]
fn child() {
    let Some(role) = role() else { return };
    if stream_role(&role) {
        return;
    }
    assert_eq!(role, "sleeper", "unknown role");
    watchdog(120);
    std::thread::spawn(|| {
        hold();
        std::process::exit(0);
    });
    let mut ep = connect_endpoint();
    say(&format!("ID {}", ep.id()));
    let (_, bytes) = stream_recv(&mut ep, BURST, 64, &size_of_seq);
    say(&format!("GOT {bytes}"));
    let mut buf = vec![0u8; 1 << 17];
    loop {
        match ep.recv(&mut buf, Some(Duration::from_secs(60))) {
            Err(unet::RecvError::Timeout) => {}
            r => fail(&format!("unexpected after the burst: {r:?}")),
        }
    }
}

fn assert_idle(what: &str, procs: &[(&str, u32)]) {
    let before: Vec<u64> = procs.iter().map(|&(_, p)| cpu_ticks(p)).collect();
    std::thread::sleep(WINDOW);
    for (i, &(name, pid)) in procs.iter().enumerate() {
        let used = cpu_ticks(pid) - before[i];
        assert!(
            used <= MAX_TICKS,
            "{what}: {name} (pid {pid}) used {used} clock ticks in {WINDOW:?}"
        );
        eprintln!("{what}: {name} used {used} ticks in {WINDOW:?}");
    }
}

#[test]
fn idle_daemon_and_blocked_client_use_no_cpu() {
    let t = Instant::now();
    let mut d = Daemon::start(&[]);
    let mut sc = child_cmd(None, "sleeper");
    sc.env("UNET_SOCKET", &d.socket);
    let mut sleeper = Proc::spawn("sleeper", sc);
    let id = sleeper.expect("ID", Duration::from_secs(20));
    // Let start-up settle: the client is now blocked in recv.
    std::thread::sleep(Duration::from_millis(300));
    assert_idle(
        "before traffic",
        &[("daemon", d.pid()), ("client", sleeper.pid())],
    );

    let mut bc = child_cmd(None, "send");
    bc.env("UNET_SOCKET", &d.socket)
        .env("UNET_COUNT", BURST.to_string())
        .env("UNET_PEER_ID", &id)
        .env("UNET_PATH", "engine");
    let mut burster = Proc::spawn("burster", bc);
    burster.expect("DONE", Duration::from_secs(60));
    let got = sleeper.expect("GOT", Duration::from_secs(10));
    let want: u64 = (0..BURST).map(|s| size_of_seq(s) as u64).sum();
    assert_eq!(got.parse::<u64>().unwrap(), want);
    let busy = engine_counter(&d.stat(), "busy_polls");
    assert!(busy > 0, "the engine did work during the burst");
    burster.finish(Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    assert_idle(
        "after a burst",
        &[("daemon", d.pid()), ("client", sleeper.pid())],
    );
    sleeper.finish(Duration::from_secs(10));
    d.stop();
    eprintln!("idle test: {:?}", t.elapsed());
}
