//! `unet stat`: read a running engine's counters from shared memory, like
//! AeronStat reads Aeron's.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use unet_abi::*;

#[derive(clap::Args)]
pub struct Args {
    /// Control socket of the engine.
    #[arg(long, default_value = crate::daemon::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Refresh every this many milliseconds until interrupted.
    #[arg(long, value_name = "MS", num_args = 0..=1, default_missing_value = "1000")]
    pub watch: Option<u64>,
    /// Show counters that are zero too.
    #[arg(long)]
    pub all: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A snapshot of every counter, as (scope, name, value).
pub(crate) fn snapshot(seg: &unet_sys::Segment, max: u32) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    // SAFETY: the segment holds counters_segment_size(max) bytes (checked
    // when it was mapped); the header and slots are atomics read with
    // Relaxed loads, each value independent.
    let h = unsafe { seg.ptr().cast::<CountersHeader>().as_ref() };
    for &c in EngineCounter::ALL {
        out.push((
            "engine".to_string(),
            c.name().to_string(),
            h.engine[c as usize].load(Ordering::Relaxed),
        ));
    }
    for i in 0..max as usize {
        let off = ENDPOINT_SLOTS_OFF + i * std::mem::size_of::<EndpointSlot>();
        let Some(p) = seg.at(off, std::mem::size_of::<EndpointSlot>()) else {
            break;
        };
        // SAFETY: in bounds (checked by at()), 8-byte aligned.
        let s = unsafe { p.cast::<EndpointSlot>().as_ref() };
        if s.live.load(Ordering::Acquire) == 0 {
            continue;
        }
        let scope = format!(
            "endpoint {} (pid {})",
            s.endpoint_id.load(Ordering::Relaxed),
            s.pid.load(Ordering::Relaxed)
        );
        out.push((
            scope.clone(),
            "channels_peak".to_string(),
            s.channels_peak.load(Ordering::Relaxed) as u64,
        ));
        for &c in EndpointCounter::ALL {
            out.push((
                scope.clone(),
                c.name().to_string(),
                s.counters[c as usize].load(Ordering::Relaxed),
            ));
        }
        // Counted by the client library (the direct path, inline applets)
        // and reported through its endpoint header.
        for c in ClientCounter::ALL {
            out.push((
                scope.clone(),
                format!("client.{}", c.name()),
                s.client[c as usize].load(Ordering::Relaxed),
            ));
        }
    }
    out
}

pub fn run(a: Args) -> ExitCode {
    let session = match unet::Session::connect(&a.socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "unet stat: {e} (is `unet daemon --socket {}` running?)",
                a.socket.display()
            );
            return ExitCode::from(1);
        }
    };
    loop {
        // Asked anew each time: the request also has the engine copy the
        // client-side counters into the segment.
        let (seg, max) = match session.counters() {
            Ok(x) => x,
            Err(e) => {
                eprintln!("unet stat: {e}");
                return ExitCode::from(1);
            }
        };
        let snap = snapshot(&seg, max);
        if a.json {
            let mut m = serde_json::Map::new();
            for (scope, name, v) in &snap {
                let mut e = m
                    .entry(scope.clone())
                    .or_insert_with(|| serde_json::json!({}));
                let mut name = name.as_str();
                if let Some(n) = name.strip_prefix("client.") {
                    e = e
                        .as_object_mut()
                        .expect("an object")
                        .entry("client")
                        .or_insert_with(|| serde_json::json!({}));
                    name = n;
                }
                e[name] = serde_json::json!(v);
            }
            println!("{}", serde_json::Value::Object(m));
        } else {
            if a.watch.is_some() {
                print!("\x1b[2J\x1b[H");
            }
            let mut last = String::new();
            for (scope, name, v) in &snap {
                if *v == 0 && !a.all {
                    continue;
                }
                if *scope != last {
                    println!("{scope}:");
                    last = scope.clone();
                }
                println!("  {name:<32} {v:>16}");
            }
        }
        match a.watch {
            Some(ms) => std::thread::sleep(Duration::from_millis(ms.max(50))),
            None => return ExitCode::SUCCESS,
        }
    }
}
