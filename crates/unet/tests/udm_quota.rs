//! UDM jobs and the limits per process: a job's memory is charged to the
//! process (and user) that made it for as long as the job lives, not only
//! while the creating connection is open.

use std::thread;
use std::time::Duration;

mod common;
use common::engine_counter;
use unet::udm::*;
use unet::*;
use unet_abi::EngineCounter;

/// A job of two nodes with 8 MiB virtual buffers: a little over 16 MiB
/// charged.
fn big_job() -> JobConfig {
    JobConfig {
        nodes: 2,
        buffer_size: 8 << 20,
        ..JobConfig::default()
    }
}

/// How many jobs one process gets under 40 MiB process and user limits,
/// each made on a session of its own (closed after its node 0 is joined
/// on a session the process keeps) when `throwaway`, else on the kept
/// session.
fn jobs_held(throwaway: bool) -> usize {
    let e = Engine::start(EngineConfig {
        client_memory: 40 << 20,
        user_memory: 40 << 20,
        ..Default::default()
    })
    .unwrap();
    let kept = Session::embedded(&e).unwrap();
    let mut nodes = Vec::new();
    for _ in 0..8 {
        let maker = throwaway.then(|| Session::embedded(&e).unwrap());
        match maker.as_ref().unwrap_or(&kept).udm_create_job(&big_job()) {
            Ok(t) => nodes.push(kept.udm_join(t, 0).expect("join")),
            Err(Error::Quota(_)) => return nodes.len(),
            Err(e) => panic!("{e}"),
        }
        if let Some(s) = maker {
            drop(s);
            // The engine has seen the session close before the next ask.
            thread::sleep(Duration::from_millis(50));
        }
    }
    nodes.len()
}

/// Defect: a job was charged only while its creating connection was
/// open, so a process that made jobs on throwaway sessions and joined
/// them on a kept one held as many as it liked.
#[test]
fn a_job_made_on_a_closed_session_is_still_charged_to_its_process() {
    let plain = jobs_held(false);
    assert_eq!(plain, 2, "two 16 MiB jobs fit in 40 MiB");
    assert_eq!(
        jobs_held(true),
        plain,
        "the throwaway session changes nothing"
    );
}

/// Jobs and joined nodes are capped per process, as endpoints are: the
/// N+1th is refused with `ObjectQuota` (an `Error::Quota`), counted; one
/// given back makes room again.
#[test]
fn jobs_and_joined_nodes_are_capped_per_process() {
    let e = Engine::start(EngineConfig {
        client_udm_jobs: 3,
        client_udm_nodes: 5,
        ..Default::default()
    })
    .unwrap();
    let s = Session::embedded(&e).unwrap();
    let other = Session::embedded(&e).unwrap();
    let small = JobConfig {
        nodes: 2,
        buffer_size: 4096,
        ..JobConfig::default()
    };
    let jobs: Vec<JobTicket> = (0..3).map(|_| s.udm_create_job(&small).unwrap()).collect();
    // The fourth, on either session of the process.
    for who in [&s, &other] {
        match who.udm_create_job(&small) {
            Err(Error::Quota(ErrorCode::ObjectQuota)) => {}
            r => panic!("a fourth job: {r:?}"),
        }
    }
    assert_eq!(engine_counter(&s, EngineCounter::QuotaRefusedUdmJobs), 2);

    let mut nodes = Vec::new();
    for (i, t) in jobs.iter().enumerate() {
        for rank in 0..2 {
            let who = if i % 2 == 0 { &s } else { &other };
            match who.udm_join(*t, rank) {
                Ok(n) => nodes.push(n),
                Err(Error::Quota(ErrorCode::ObjectQuota)) => {
                    assert_eq!(nodes.len(), 5, "refused at the sixth");
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert_eq!(nodes.len(), 5);
    assert_eq!(engine_counter(&s, EngineCounter::QuotaRefusedUdmNodes), 1);
    // A node that leaves makes room for another.
    nodes.pop();
    let last = jobs[2];
    let n = s.udm_join(last, 1).expect("room again");
    drop(n);
}

/// A job every rank of which has joined and left can never be joined
/// again: it ends then, even while the session that made it stays open,
/// so a process that makes, uses and leaves jobs one after another on one
/// session (as `unet bench udm` does) is not refused at its job cap, and
/// its memory is not held for the dead jobs.
#[test]
fn a_job_whose_every_rank_left_ends_while_its_creator_stays() {
    let e = Engine::start(EngineConfig {
        client_udm_jobs: 3,
        ..Default::default()
    })
    .unwrap();
    let s = Session::embedded(&e).unwrap();
    let small = JobConfig {
        nodes: 2,
        buffer_size: 4096,
        ..JobConfig::default()
    };
    for i in 0..10 {
        let t = s
            .udm_create_job(&small)
            .unwrap_or_else(|err| panic!("job {i}: {err}"));
        let a = s.udm_join(t, 0).unwrap();
        let b = s.udm_join(t, 1).unwrap();
        drop(a);
        drop(b);
    }
    assert_eq!(engine_counter(&s, EngineCounter::QuotaRefusedUdmJobs), 0);
    // A job with a rank never joined lives on for it.
    let t = s.udm_create_job(&small).unwrap();
    drop(s.udm_join(t, 0).unwrap());
    let _late = s.udm_join(t, 1).expect("the other rank joins later");
}
