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
//! The thread is started at the first job; if it cannot be started, the
//! work is done on the engine's thread as before (slow, never wrong).

use std::io;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
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

/// The set-up thread and the creations in flight (see the module docs).
pub(crate) struct SetupThread {
    waker: Arc<EventFd>,
    jobs: Option<Sender<Job>>,
    made: Option<Receiver<Made>>,
    thread: Option<JoinHandle<()>>,
    /// Made on the engine's thread (no set-up thread could be started).
    made_here: Vec<Made>,
    pending: Vec<PendingCreate>,
    next_ticket: u64,
}

impl SetupThread {
    /// `waker` is rung when a segment is ready.
    pub(crate) fn new(waker: Arc<EventFd>) -> SetupThread {
        SetupThread {
            waker,
            jobs: None,
            made: None,
            thread: None,
            made_here: Vec::new(),
            pending: Vec::new(),
            next_ticket: 1,
        }
    }

    /// The channel to the thread, started at the first call (None if it
    /// cannot be started).
    fn jobs(&mut self) -> Option<&Sender<Job>> {
        if self.jobs.is_none() {
            let (jtx, jrx) = mpsc::channel::<Job>();
            let (mtx, mrx) = mpsc::channel::<Made>();
            let waker = self.waker.clone();
            let t = std::thread::Builder::new()
                .name("unet-setup".into())
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
            self.made = Some(mrx);
            self.thread = Some(t);
        }
        self.jobs.as_ref()
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
        accept: bool,
        (slot, id): (usize, u32),
    ) {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let job = Job::Endpoint {
            ticket,
            id,
            engine_id,
            layout,
        };
        let sent = match self.jobs() {
            Some(tx) => tx.send(job).is_ok(),
            None => false,
        };
        if !sent {
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
            slot,
            id,
        });
    }

    /// Whether creations are in flight.
    #[inline]
    pub(crate) fn busy(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The creations in flight.
    pub(crate) fn pending(&self) -> &[PendingCreate] {
        &self.pending
    }

    /// The creations whose segment is ready (or failed), in the order they
    /// finished.
    pub(crate) fn poll(&mut self) -> Vec<(PendingCreate, io::Result<Segment>)> {
        let mut made = std::mem::take(&mut self.made_here);
        if let Some(rx) = &self.made {
            loop {
                match rx.try_recv() {
                    Ok(m) => made.push(m),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        // The thread is gone (it cannot panic, but should
                        // it): what it had not made fails.
                        for p in &self.pending {
                            if !made.iter().any(|m| m.ticket == p.ticket) {
                                made.push(Made {
                                    ticket: p.ticket,
                                    seg: Err(io::Error::other("the set-up thread stopped")),
                                });
                            }
                        }
                        self.jobs = None;
                        self.made = None;
                        break;
                    }
                }
            }
        }
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
        match self.jobs() {
            Some(tx) => {
                if let Err(mpsc::SendError(Job::Discard(seg))) = tx.send(Job::Discard(seg)) {
                    drop(seg);
                }
            }
            None => drop(seg),
        }
    }
}

impl Drop for SetupThread {
    fn drop(&mut self) {
        // The thread finishes its jobs (the segments of closed endpoints
        // are unmapped before the engine is gone), then ends.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
