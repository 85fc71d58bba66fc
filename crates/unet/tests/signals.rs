//! A process whose threads take signals (timers, profilers, a fuzzer's
//! watchdog) must not see the library's system calls fail with EINTR: the
//! control requests (connect, create an endpoint, open a channel) and
//! blocking receives retry instead.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use unet::*;

static HANDLED: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn control_requests_and_receives_survive_signals() {
    // A handler without SA_RESTART: a blocking system call the signal
    // interrupts returns EINTR.
    // SAFETY: installs a handler that only touches an atomic; sigaction is
    // plain data, zeroed is a valid empty mask and no flags.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    let dir = std::env::temp_dir().join(format!("unet-signals-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ctl.sock");
    let engine = Engine::start(EngineConfig {
        control_socket: Some(sock.clone()),
        ..EngineConfig::default()
    })
    .unwrap();
    let embedded = Session::embedded(&engine).unwrap();
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let pesterer = std::thread::spawn(move || {
        while !st.load(Ordering::Relaxed) {
            // SAFETY: `me` is the test's thread, alive until `stop` is set
            // and this thread joined.
            unsafe { libc::pthread_kill(me, libc::SIGUSR1) };
            std::thread::sleep(Duration::from_micros(20));
        }
    });
    let start = Instant::now();
    let mut rounds = 0;
    while start.elapsed() < Duration::from_secs(2) || rounds < 50 {
        // Every other round through a session connected over the control
        // socket (a new connection each time).
        let connected;
        let session = if rounds % 2 == 0 {
            &embedded
        } else {
            connected = Session::connect(&sock).unwrap();
            &connected
        };
        let mut a = session.create_endpoint(EndpointConfig::default()).unwrap();
        let mut b = session.create_endpoint(EndpointConfig::default()).unwrap();
        for path in [PathChoice::Direct, PathChoice::Engine] {
            let ch = a.open_channel(b.addr(), ChannelOptions { path }).unwrap();
            a.send_blocking(ch, b"ping", Duration::from_secs(5))
                .unwrap();
            let mut buf = [0u8; 16];
            let r = b.recv(&mut buf, Some(Duration::from_secs(5))).unwrap();
            assert_eq!(&buf[..r.len], b"ping");
            a.close_channel(ch).unwrap();
        }
        rounds += 1;
    }
    stop.store(true, Ordering::Relaxed);
    pesterer.join().unwrap();
    drop(engine);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        HANDLED.load(Ordering::Relaxed) > 100,
        "the signals did not arrive: {}",
        HANDLED.load(Ordering::Relaxed)
    );
}
