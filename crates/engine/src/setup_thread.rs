//! The set-up thread: set-up work whose cost grows with the memory it
//! touches, done away from the engine's loop.
//!
//! Making an endpoint's segment zeroes and maps every page of it up front
//! (`MAP_POPULATE`: a first touch on the data path would be a page fault of
//! microseconds in the middle of a message). For a 1 GiB endpoint that is
//! about a second of work, and unmapping it again takes a while too. Done
//! on the engine's thread, it froze every client's traffic for that long.
//! So the engine reserves the endpoint's id and counter slot, hands the
//! segment to this thread, and answers the request when the segment is
//! ready (the same way an applet's verification finishes); a closed
//! endpoint's segment is unmapped here as well. The loop carries on
//! meanwhile.
//!
//! There are two such threads, *lanes*: segments up to [`SMALL_SEGMENT`]
//! are made and unmapped on one, larger ones on the other. A client
//! making (or dropping) 128 MiB endpoints one after another thus never
//! puts another client's small endpoint behind a queue of seconds of
//! zeroing: each lane is first-come first-served, and the small lane's
//! jobs are each a fraction of a millisecond of work.
//!
//! A lane's thread is started at its first job; if it cannot be started,
//! the work is done on the engine's thread as before (slow, never wrong).

use std::io;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use unet_abi::Layout;
use unet_sys::{EventFd, Segment};

use crate::endpoints::{ClientId, EndpointTable};

/// An endpoint whose segment is being made.
pub(crate) struct PendingCreate {
    ticket: u64,
    /// The client that asked, and its request.
    pub client: ClientId,
    pub req_id: u32,
    pub layout: Layout,
    pub accept: bool,
    /// Its virtual buffer's limit in bytes (0: not buffered).
    pub buffer_limit: u64,
    /// The counter slot and id reserved for it.
    pub slot: usize,
    pub id: u32,
}

enum Job {
    Endpoint {
        ticket: u64,
        id: u32,
        engine_id: u64,
        layout: Layout,
    },
    Discard(Segment),
}

struct Made {
    ticket: u64,
    seg: io::Result<Segment>,
}

/// Segments of at most this many bytes are made and unmapped on the small
/// lane (see the module docs): the default endpoint's is a few MiB.
pub(crate) const SMALL_SEGMENT: u64 = 8 << 20;

/// One set-up thread and the channel of its jobs.
#[derive(Default)]
struct Lane {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Lane {
    /// The channel to the lane's thread, started at the first call (None
    /// if it cannot be started).
    fn jobs(
        &mut self,
        name: &str,
        made: &Sender<Made>,
        waker: &Arc<EventFd>,
    ) -> Option<&Sender<Job>> {
        if self.jobs.is_none() {
            let (jtx, jrx) = mpsc::channel::<Job>();
            let mtx = made.clone();
            let waker = waker.clone();
            let t = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    // Zeroing pages is background work: the threads on a
                    // data path (the engine's, its clients') come first.
                    let _ = unet_sys::lower_thread_priority();
                    for job in jrx {
                        match job {
                            Job::Endpoint {
                                ticket,
                                id,
                                engine_id,
                                layout,
                            } => {
                                let seg = EndpointTable::make_segment(&layout, id, engine_id);
                                if mtx.send(Made { ticket, seg }).is_err() {
                                    return;
                                }
                                waker.notify();
                            }
                            Job::Discard(seg) => drop(seg),
                        }
                    }
                })
                .ok()?;
            self.jobs = Some(jtx);
            self.thread = Some(t);
        }
        self.jobs.as_ref()
    }

    /// Hand `job` to the lane's thread; gives it back if there is none.
    fn send(
        &mut self,
        name: &str,
        made: &Sender<Made>,
        waker: &Arc<EventFd>,
        job: Job,
    ) -> Result<(), Job> {
        match self.jobs(name, made, waker) {
            Some(tx) => tx.send(job).map_err(|mpsc::SendError(job)| job),
            None => Err(job),
        }
    }

    /// Let the thread finish its jobs, then wait for it.
    fn finish(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The set-up threads and the creations in flight (see the module docs).
pub(crate) struct SetupThread {
    waker: Arc<EventFd>,
    /// Segments up to [`SMALL_SEGMENT`], and larger ones.
    small: Lane,
    large: Lane,
    /// Where both lanes send what they made.
    made_tx: Sender<Made>,
    made: Receiver<Made>,
    /// Made on the engine's thread (no set-up thread could be started).
    made_here: Vec<Made>,
    pending: Vec<PendingCreate>,
    /// Every segment asked for and not yet collected, as (ticket, on the
    /// large lane): the pending creations and those whose client went
    /// away meanwhile (their segments must still be collected, to be
    /// unmapped).
    outstanding: Vec<(u64, bool)>,
    next_ticket: u64,
}

impl SetupThread {
    /// `waker` is rung when a segment is ready.
    pub(crate) fn new(waker: Arc<EventFd>) -> SetupThread {
        let (made_tx, made) = mpsc::channel::<Made>();
        SetupThread {
            waker,
            small: Lane::default(),
            large: Lane::default(),
            made_tx,
            made,
            made_here: Vec::new(),
            pending: Vec::new(),
            outstanding: Vec::new(),
            next_ticket: 1,
        }
    }

    /// Hand `job`, on a segment of `size` bytes, to its lane; gives it
    /// back if that lane has no thread.
    fn send(&mut self, size: u64, job: Job) -> Result<(), Job> {
        let (lane, name) = if size <= SMALL_SEGMENT {
            (&mut self.small, "unet-setup")
        } else {
            (&mut self.large, "unet-setup-big")
        };
        lane.send(name, &self.made_tx, &self.waker, job)
    }

    /// Start making the segment of endpoint `p.id`; the endpoint comes
    /// back from [`SetupThread::poll`] when it is ready.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        &mut self,
        engine_id: u64,
        client: ClientId,
        req_id: u32,
        layout: Layout,
        (accept, buffer_limit): (bool, u64),
        (slot, id): (usize, u32),
    ) {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let large = layout.segment_size > SMALL_SEGMENT;
        let job = Job::Endpoint {
            ticket,
            id,
            engine_id,
            layout,
        };
        if self.send(layout.segment_size, job).is_err() {
            let seg = EndpointTable::make_segment(&layout, id, engine_id);
            self.made_here.push(Made { ticket, seg });
            self.waker.notify();
        }
        self.pending.push(PendingCreate {
            ticket,
            client,
            req_id,
            layout,
            accept,
            buffer_limit,
            slot,
            id,
        });
        self.outstanding.push((ticket, large));
    }

    /// Whether segments are being made (for a client, or for one that
    /// went away: either way [`SetupThread::poll`] must collect them).
    #[inline]
    pub(crate) fn busy(&self) -> bool {
        !self.outstanding.is_empty()
    }

    /// The creations in flight.
    pub(crate) fn pending(&self) -> &[PendingCreate] {
        &self.pending
    }

    /// The creations whose segment is ready (or failed), in the order they
    /// finished.
    pub(crate) fn poll(&mut self) -> Vec<(PendingCreate, io::Result<Segment>)> {
        let mut made = std::mem::take(&mut self.made_here);
        while let Ok(m) = self.made.try_recv() {
            made.push(m);
        }
        // A lane's thread ends only once its jobs channel is dropped; should
        // it end otherwise (it cannot panic, but should it), what it had
        // not made fails and the lane starts a new thread at its next job.
        for large in [false, true] {
            let lane = if large {
                &mut self.large
            } else {
                &mut self.small
            };
            if lane.thread.as_ref().is_some_and(|t| t.is_finished()) {
                lane.jobs = None;
                lane.thread = None;
                while let Ok(m) = self.made.try_recv() {
                    made.push(m);
                }
                for &(ticket, _) in self.outstanding.iter().filter(|o| o.1 == large) {
                    if !made.iter().any(|m| m.ticket == ticket) {
                        made.push(Made {
                            ticket,
                            seg: Err(io::Error::other("the set-up thread stopped")),
                        });
                    }
                }
            }
        }
        self.outstanding
            .retain(|o| !made.iter().any(|m| m.ticket == o.0));
        let mut done = Vec::new();
        for m in made {
            match self.pending.iter().position(|p| p.ticket == m.ticket) {
                Some(i) => done.push((self.pending.remove(i), m.seg)),
                // Its client went away meanwhile.
                None => {
                    if let Ok(seg) = m.seg {
                        self.discard(seg);
                    }
                }
            }
        }
        done
    }

    /// Forget the creations of a client that went away (their segments
    /// are unmapped when they are ready); returns them, so that their
    /// reserved slots can be given back.
    pub(crate) fn forget_client(&mut self, client: ClientId) -> Vec<PendingCreate> {
        let (gone, kept) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.client == client);
        self.pending = kept;
        gone
    }

    /// Unmap `seg` off the engine's thread (on it if there is no set-up
    /// thread).
    pub(crate) fn discard(&mut self, seg: Segment) {
        let size = seg.len() as u64;
        // A refused job is dropped here: the segment is unmapped on the
        // engine's thread.
        let _ = self.send(size, Job::Discard(seg));
    }
}

impl Drop for SetupThread {
    fn drop(&mut self) {
        // The threads finish their jobs (the segments of closed endpoints
        // are unmapped before the engine is gone), then end.
        self.small.finish();
        self.large.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};
    use unet_abi::Geometry;

    /// Collect until nothing is outstanding (at most 20 s).
    fn drain(st: &mut SetupThread) -> Vec<(PendingCreate, io::Result<Segment>)> {
        let t0 = Instant::now();
        let mut done = Vec::new();
        while st.busy() {
            assert!(t0.elapsed() < Duration::from_secs(20), "never made");
            done.extend(st.poll());
            std::thread::sleep(Duration::from_millis(1));
        }
        done
    }

    #[test]
    fn small_and_large_segments_are_made_and_handed_back() {
        let mut st = SetupThread::new(Arc::new(EventFd::new().unwrap()));
        let small = Layout::new(Geometry::default()).unwrap();
        let large = Layout::new(Geometry {
            buffer_area_size: 2 * SMALL_SEGMENT,
            ..Geometry::default()
        })
        .unwrap();
        assert!(small.segment_size <= SMALL_SEGMENT && large.segment_size > SMALL_SEGMENT);
        st.start(7, 1, 10, large, (true, 0), (0, 100));
        st.start(7, 2, 20, small, (true, 0), (1, 101));
        let done = drain(&mut st);
        let mut got: Vec<(u32, usize)> = done
            .iter()
            .map(|(p, seg)| (p.req_id, seg.as_ref().expect("a segment").len()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                (10, large.segment_size as usize),
                (20, small.segment_size as usize)
            ]
        );
        assert!(st.pending().is_empty());
    }

    /// A creation whose client went away stays outstanding until its
    /// segment is collected (and unmapped): otherwise the engine stops
    /// polling and the segment waits in the channel for the next create.
    #[test]
    fn a_forgotten_creation_is_still_collected() {
        let mut st = SetupThread::new(Arc::new(EventFd::new().unwrap()));
        let layout = Layout::new(Geometry::default()).unwrap();
        st.start(7, 3, 30, layout, (true, 0), (0, 100));
        let gone = st.forget_client(3);
        assert_eq!(gone.len(), 1);
        assert!(st.pending().is_empty());
        assert!(st.busy(), "the segment being made must still be collected");
        assert!(drain(&mut st).is_empty(), "nothing handed to a client");
    }
}
