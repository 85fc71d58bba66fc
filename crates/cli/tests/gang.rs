//! `unet gang` against a running daemon: it gang schedules a UDM job's
//! node processes (attached by pid) against a null job it starts itself,
//! tells the engine at every switch (the engine switches the stopped nodes
//! by the notices, never reading `/proc`), and the job computes what it
//! computes alone; a notice with a wrong key is refused and counted.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;
use unet::udm::JobConfig;

/// A node process of `unet bench`'s applications, joined and ready.
fn node(d: &Daemon, ticket: &str, rank: u32, app: &[&str]) -> Proc {
    let mut c = Command::new(unet_bin());
    c.args(["bench", "__udm-node", "--rank", &rank.to_string()])
        .args(app)
        .arg("--socket")
        .arg(&d.socket)
        .args(["--ticket", ticket]);
    let mut p = Proc::spawn(&format!("node {rank}"), c);
    p.line_starting("ready", Duration::from_secs(20));
    p
}

fn null_job() -> String {
    format!(
        "exec:{} bench __udm-node --app null --rank {{rank}}",
        unet_bin()
    )
}

#[test]
fn gang_schedules_a_udm_job_and_tells_the_engine() {
    let d = Daemon::start(&[]);
    let s = unet::Session::connect(&d.socket).unwrap();
    let t = s
        .udm_create_job(&JobConfig {
            nodes: 2,
            fast_queue: 16,
            ..JobConfig::default()
        })
        .unwrap();
    let ticket = t.to_string();
    let enum5 = ["--app", "enum", "--pegs", "5"];
    let mut nodes: Vec<Proc> = (0..2).map(|r| node(&d, &ticket, r, &enum5)).collect();
    let pids = format!("{},{}", nodes[0].pid(), nodes[1].pid());
    let mut gang = Command::new(unet_bin());
    gang.arg("gang")
        .arg("--socket")
        .arg(&d.socket)
        .args(["--job", &format!("{ticket}@{pids}")])
        .args(["--job", &null_job()])
        .args(["--slice-ms", "5", "--skew", "40", "--json"]);
    let mut gang = Proc::spawn("unet gang", gang);
    // The scheduler has started (the null job's processes run a slice
    // of their own): the nodes go.
    std::thread::sleep(Duration::from_millis(50));
    let mut positions = 0;
    let mut descheduled = 0;
    for n in &mut nodes {
        n.tell("go");
    }
    for n in &mut nodes {
        let line = n.line_starting("done", Duration::from_secs(120));
        let v: Value = serde_json::from_str(line.trim_start_matches("done").trim()).unwrap();
        positions += v["result"]["positions"].as_u64().unwrap();
        descheduled += v["switch_descheduled"].as_u64().unwrap();
        assert!(n
            .wait_exit(Duration::from_secs(10))
            .is_some_and(|s| s.success()));
    }
    // Every position of the 5-peg triangle once.
    assert_eq!(positions, 3016);
    let out = gang
        .raw_line(Duration::from_secs(20))
        .expect("the gang's totals");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(gang
        .wait_exit(Duration::from_secs(10))
        .is_some_and(|s| s.success()));
    eprintln!("unet gang: {v}; the nodes counted {descheduled} switches by a notice");
    assert_eq!(v["errors"].as_array().unwrap().len(), 0, "{v}");
    assert!(v["switches"].as_u64().unwrap() >= 4, "{v}");
    assert!(v["notices"].as_u64().unwrap() >= 2, "{v}");
    let st = d.stat();
    assert!(engine_counter(&st, "udm_sched_notices") >= 2, "{st}");
    assert_eq!(engine_counter(&st, "udm_proc_reads"), 0, "{st}");
    // At most one refused: the notice that found the job ended (its
    // nodes all left), after which the scheduler sends no more.
    assert!(engine_counter(&st, "udm_sched_refused") <= 1, "{st}");
    assert!(
        descheduled >= 1,
        "a node stopped by the scheduler was switched"
    );
}

#[test]
fn a_notice_with_a_wrong_key_is_refused() {
    let d = Daemon::start(&[]);
    let s = unet::Session::connect(&d.socket).unwrap();
    let t = s.udm_create_job(&JobConfig::default()).unwrap();
    let forged = unet::udm::JobTicket {
        key: t.key ^ 1,
        ..t
    };
    let mut sleepers: Vec<std::process::Child> = (0..4)
        .map(|_| Command::new("sleep").arg("30").spawn().unwrap())
        .collect();
    let pids: Vec<String> = sleepers.iter().map(|c| c.id().to_string()).collect();
    let out = Command::new(unet_bin())
        .arg("gang")
        .arg("--socket")
        .arg(&d.socket)
        .args(["--job", &format!("{forged}@{},{}", pids[0], pids[1])])
        .args(["--job", &format!("{},{}", pids[2], pids[3])])
        .args(["--slice-ms", "5", "--rounds", "2"])
        .output()
        .unwrap();
    for c in &mut sleepers {
        let _ = c.kill();
        let _ = c.wait();
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("refused"), "{err}");
    assert!(engine_counter(&d.stat(), "udm_sched_refused") >= 1);
}
