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
//! A UDM job's memory is made here the same way: its job segment
//! (`nodes²` fast rings, up to 64 MiB, its header written and every ring
//! initialised), each rank's node segment (header and divert ring) and
//! virtual buffer (sparse), all by [`JobMemory::make`]. The engine reserves
//! the job's id when the request arrives, and enters the job (its key,
//! its doorbell, its counter) and answers the client when the memory is
//! ready. A retired job's segments are unmapped here too. What stays on
//! the loop is the bookkeeping: ids, keys, doorbells, replies. A job's
//! *replica*, made when a node of another engine's job joins through this
//! one, is made here the same way, and comes back marked with the link it
//! is for.
//!
//! A client that goes away while its memory is being made is forgotten
//! ([`SetupThread::forget_client`]: its reserved slots and ids are given
//! back); what was being made for it is still collected when ready, and
//! unmapped here.
//!
//! There are two such threads, *lanes*: work on up to [`SMALL_SEGMENT`]
//! bytes (an endpoint's segment; a job's job and node segments together,
//! the sparse buffers not counted) is done on one, larger work on the
//! other. A client making (or dropping) 128 MiB endpoints or the largest
//! jobs one after another thus never puts another client's small endpoint
//! or job behind a queue of seconds of zeroing: the small lane's jobs are
//! each a few milliseconds of work at most. Within a lane the clients with
//! work waiting take turns, one job each ([`Turns`]; the engine's own
//! unmapping takes its turn as one more client), so a client that queues
//! many large segments delays another's by one of them, not by all.
//!
//! The lanes' threads run at a lowered priority (nice 5): the threads of
//! a data path come first, yet set-up still finishes while clients spin
//! on every core (at nice 19 it did not, and creates timed out).
//!
//! A lane's thread is started at its first job; if it cannot be started,
//! the work is done on the engine's thread as before (slow, never wrong).
//!
//! This module knows what it makes only through the functions that make
//! it ([`EndpointTable::make_segment`], [`JobMemory::make`]), which live
//! with their owners and import nothing of set-up.

use std::io;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use unet_abi::udm::UdmLayout;
use unet_abi::Layout;
use unet_sys::{EventFd, Segment};

use crate::control::turns::Turns;
use crate::udm::{JobMemory, PendingJob};
use crate::unet::endpoints::{ClientId, EndpointTable};

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

/// A creation whose memory is ready (or failed), from
/// [`SetupThread::poll`].
pub(crate) enum Done {
    Endpoint(PendingCreate, io::Result<Segment>),
    UdmJob(PendingJob, io::Result<JobMemory>),
}

/// What a set-up thread makes.
enum Work {
    Endpoint {
        id: u32,
        engine_id: u64,
        layout: Layout,
    },
    UdmJob {
        id: u32,
        engine_id: u64,
        layout: UdmLayout,
    },
}

/// What it made.
enum Product {
    Segment(Segment),
    UdmJob(JobMemory),
}

impl Product {
    /// Its segments and the bytes of them that are populated.
    fn into_segments(self) -> (u64, Vec<Segment>) {
        match self {
            Product::Segment(seg) => (seg.len() as u64, vec![seg]),
            Product::UdmJob(mem) => (mem.touched(), mem.into_segments()),
        }
    }
}

impl Work {
    /// Do it (on a set-up thread, or on the engine's if there is none):
    /// the memory-writing code lives with its owners.
    fn run(self) -> io::Result<Product> {
        match self {
            Work::Endpoint {
                id,
                engine_id,
                layout,
            } => EndpointTable::make_segment(&layout, id, engine_id).map(Product::Segment),
            Work::UdmJob {
                id,
                engine_id,
                layout,
            } => JobMemory::make(&layout, id, engine_id).map(Product::UdmJob),
        }
    }
}

enum Job {
    Make {
        ticket: u64,
        work: Work,
    },
    Discard(Vec<Segment>),
    /// Give the memory of the segments back (punch it out of the file,
    /// for every mapping still holding it), then unmap them.
    Release(Vec<Segment>),
}

struct Made {
    ticket: u64,
    product: io::Result<Product>,
}

/// Segments of at most this many bytes are made and unmapped on the small
/// lane (see the module docs): the default endpoint's is a few MiB.
pub(crate) const SMALL_SEGMENT: u64 = 8 << 20;

/// The work queued on a lane, served a client at a time
/// ([`Turns`]; the engine's own unmapping takes its turn as one client).
#[derive(Default)]
struct Queue {
    jobs: Turns<Option<ClientId>, Job>,
    /// No more jobs will come: the thread ends once the queue is empty.
    closed: bool,
    /// The thread has ended: jobs are no longer taken.
    ended: bool,
}

/// A lane's queue, shared with its thread.
#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Nothing panics while holding the lock (pushes and pops), and the
        // queue is whole whatever happened: a poisoned lock is used as is.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next job, waiting for one; None once the queue is closed and
    /// empty.
    fn next(&self) -> Option<Job> {
        let mut q = self.lock();
        loop {
            if let Some(job) = q.jobs.pop() {
                return Some(job);
            }
            if q.closed {
                return None;
            }
            q = self.ready.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Marks the queue ended when its thread ends, however it ends.
struct EndGuard(Arc<Shared>);

impl Drop for EndGuard {
    fn drop(&mut self) {
        self.0.lock().ended = true;
    }
}

/// One set-up thread and its queue.
#[derive(Default)]
struct Lane {
    shared: Option<Arc<Shared>>,
    thread: Option<JoinHandle<()>>,
}

impl Lane {
    /// The lane's queue, its thread started at the first call (None if it
    /// cannot be started).
    fn shared(&mut self, name: &str, made: &Sender<Made>, waker: &Arc<EventFd>) -> Option<&Shared> {
        if self.shared.is_none() {
            let shared = Arc::new(Shared::default());
            let guard = EndGuard(shared.clone());
            let mtx = made.clone();
            let waker = waker.clone();
            let t = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    // Zeroing pages is background work: the threads on a
                    // data path (the engine's, its clients') come first.
                    let _ = unet_sys::lower_thread_priority();
                    while let Some(job) = guard.0.next() {
                        match job {
                            Job::Make { ticket, work } => {
                                let product = work.run();
                                if mtx.send(Made { ticket, product }).is_err() {
                                    return;
                                }
                                waker.notify();
                            }
                            Job::Discard(segs) => drop(segs),
                            Job::Release(segs) => {
                                for s in segs {
                                    let _ = s.punch_hole(0, s.len());
                                }
                            }
                        }
                    }
                })
                .ok()?;
            self.shared = Some(shared);
            self.thread = Some(t);
        }
        self.shared.as_deref()
    }

    /// Queue `job` for `client` (None: the engine's own work) on the
    /// lane's thread; gives it back if there is none.
    fn send(
        &mut self,
        name: &str,
        made: &Sender<Made>,
        waker: &Arc<EventFd>,
        (client, job): (Option<ClientId>, Job),
    ) -> Result<(), Job> {
        let Some(shared) = self.shared(name, made, waker) else {
            return Err(job);
        };
        let mut q = shared.lock();
        if q.ended || q.closed {
            return Err(job);
        }
        q.jobs.push(client, job);
        drop(q);
        shared.ready.notify_one();
        Ok(())
    }

    /// Let the thread finish its jobs, then wait for it.
    fn finish(&mut self) {
        if let Some(shared) = self.shared.take() {
            shared.lock().closed = true;
            shared.ready.notify_one();
        }
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
    pending_jobs: Vec<PendingJob>,
    /// Everything asked for and not yet collected, as (ticket, on the
    /// large lane): the pending creations and those whose client went
    /// away meanwhile (their memory must still be collected, to be
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
            pending_jobs: Vec::new(),
            outstanding: Vec::new(),
            next_ticket: 1,
        }
    }

    /// Hand `job`, on `size` bytes of memory, for `client` (None: the
    /// engine's own), to its lane; gives it back if that lane has no
    /// thread.
    fn send(&mut self, size: u64, client: Option<ClientId>, job: Job) -> Result<(), Job> {
        let (lane, name) = if size <= SMALL_SEGMENT {
            (&mut self.small, "unet-setup")
        } else {
            (&mut self.large, "unet-setup-big")
        };
        lane.send(name, &self.made_tx, &self.waker, (client, job))
    }

    /// Start `work`, on `size` bytes, for `client`: on its lane's thread
    /// (in turn with other clients' work), or here if there is none.
    /// Returns its ticket.
    fn make(&mut self, size: u64, client: ClientId, work: Work) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let job = Job::Make { ticket, work };
        if let Err(Job::Make { work, .. }) = self.send(size, Some(client), job) {
            let product = work.run();
            self.made_here.push(Made { ticket, product });
            self.waker.notify();
        }
        self.outstanding.push((ticket, size > SMALL_SEGMENT));
        ticket
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
        let work = Work::Endpoint {
            id,
            engine_id,
            layout,
        };
        let ticket = self.make(layout.segment_size, client, work);
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
    }

    /// Start making the memory of UDM job `id` (reserved) for client
    /// `client`'s request `req_id` ([`JobMemory::make`]); the job comes
    /// back from [`SetupThread::poll`] when it is ready. Its lane is
    /// chosen by the bytes it touches ([`JobMemory::touched_by`]).
    pub(crate) fn start_udm_job(
        &mut self,
        engine_id: u64,
        (client, req_id): (ClientId, u32),
        id: u32,
        layout: UdmLayout,
        timeout: Duration,
    ) {
        self.start_job(engine_id, (client, req_id), id, (layout, timeout), None);
    }

    /// As [`SetupThread::start_udm_job`], for the replica of another
    /// engine's job, joined through link `link`: it comes back marked so.
    pub(crate) fn start_udm_replica(
        &mut self,
        engine_id: u64,
        (client, req_id): (ClientId, u32),
        id: u32,
        (layout, timeout): (UdmLayout, Duration),
        link: u32,
    ) {
        self.start_job(
            engine_id,
            (client, req_id),
            id,
            (layout, timeout),
            Some(link),
        );
    }

    fn start_job(
        &mut self,
        engine_id: u64,
        (client, req_id): (ClientId, u32),
        id: u32,
        (layout, timeout): (UdmLayout, Duration),
        replica_of: Option<u32>,
    ) {
        let work = Work::UdmJob {
            id,
            engine_id,
            layout,
        };
        let ticket = self.make(JobMemory::touched_by(&layout), client, work);
        self.pending_jobs.push(PendingJob {
            ticket,
            client,
            req_id,
            id,
            layout,
            timeout,
            replica_of,
        });
    }

    /// Whether memory is being made (for a client, or for one that went
    /// away: either way [`SetupThread::poll`] must collect it).
    #[inline]
    pub(crate) fn busy(&self) -> bool {
        !self.outstanding.is_empty()
    }

    /// The endpoint creations in flight.
    pub(crate) fn pending(&self) -> &[PendingCreate] {
        &self.pending
    }

    /// The UDM jobs in flight.
    pub(crate) fn pending_jobs(&self) -> &[PendingJob] {
        &self.pending_jobs
    }

    /// The creations whose memory is ready (or failed), in the order they
    /// finished.
    pub(crate) fn poll(&mut self) -> Vec<Done> {
        let mut made = std::mem::take(&mut self.made_here);
        while let Ok(m) = self.made.try_recv() {
            made.push(m);
        }
        // A lane's thread ends only once its queue is closed; should
        // it end otherwise (it cannot panic, but should it), what it had
        // not made fails and the lane starts a new thread at its next job.
        for large in [false, true] {
            let lane = if large {
                &mut self.large
            } else {
                &mut self.small
            };
            if lane.thread.as_ref().is_some_and(|t| t.is_finished()) {
                lane.shared = None;
                lane.thread = None;
                while let Ok(m) = self.made.try_recv() {
                    made.push(m);
                }
                for &(ticket, _) in self.outstanding.iter().filter(|o| o.1 == large) {
                    if !made.iter().any(|m| m.ticket == ticket) {
                        made.push(Made {
                            ticket,
                            product: Err(io::Error::other("the set-up thread stopped")),
                        });
                    }
                }
            }
        }
        self.outstanding
            .retain(|o| !made.iter().any(|m| m.ticket == o.0));
        let mut done = Vec::new();
        for m in made {
            if let Some(i) = self.pending.iter().position(|p| p.ticket == m.ticket) {
                let p = self.pending.remove(i);
                let seg = match m.product {
                    Ok(Product::Segment(seg)) => Ok(seg),
                    Ok(other) => {
                        let (size, segs) = other.into_segments();
                        self.discard_all(size, segs);
                        Err(io::Error::other("not an endpoint's segment"))
                    }
                    Err(e) => Err(e),
                };
                done.push(Done::Endpoint(p, seg));
            } else if let Some(i) = self.pending_jobs.iter().position(|p| p.ticket == m.ticket) {
                let p = self.pending_jobs.remove(i);
                let mem = match m.product {
                    Ok(Product::UdmJob(mem)) => Ok(mem),
                    Ok(other) => {
                        let (size, segs) = other.into_segments();
                        self.discard_all(size, segs);
                        Err(io::Error::other("not a job's memory"))
                    }
                    Err(e) => Err(e),
                };
                done.push(Done::UdmJob(p, mem));
            } else if let Ok(product) = m.product {
                // Its client went away meanwhile.
                let (size, segs) = product.into_segments();
                self.discard_all(size, segs);
            }
        }
        done
    }

    /// Forget the creations of a client that went away (their memory is
    /// unmapped when it is ready); returns them, so that their reserved
    /// slots and ids can be given back.
    pub(crate) fn forget_client(
        &mut self,
        client: ClientId,
    ) -> (Vec<PendingCreate>, Vec<PendingJob>) {
        let (gone, kept) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.client == client);
        self.pending = kept;
        let (gone_jobs, kept) = std::mem::take(&mut self.pending_jobs)
            .into_iter()
            .partition(|p| p.client == client);
        self.pending_jobs = kept;
        (gone, gone_jobs)
    }

    /// Unmap `seg` off the engine's thread (on it if there is no set-up
    /// thread).
    pub(crate) fn discard(&mut self, seg: Segment) {
        let size = seg.len() as u64;
        self.discard_all(size, vec![seg]);
    }

    /// Unmap `segs`, of which `size` bytes are populated, off the engine's
    /// thread (on it if there is no set-up thread), on the lane `size`
    /// chooses.
    pub(crate) fn discard_all(&mut self, size: u64, segs: Vec<Segment>) {
        if segs.is_empty() {
            return;
        }
        // A refused job is dropped here: the segments are unmapped on the
        // engine's thread.
        let _ = self.send(size, None, Job::Discard(segs));
    }

    /// Give the memory of `segs` back to the system and unmap them, off
    /// the engine's thread (on it if there is no set-up thread): for a
    /// departed UDM node's virtual buffer, which its process may still
    /// map, and whose populated pages (up to the buffer's limit, a GiB at
    /// most) take a while to give back.
    pub(crate) fn release_all(&mut self, segs: Vec<Segment>) {
        let size = segs.iter().map(|s| s.len() as u64).sum();
        if let Err(Job::Release(segs)) = self.send(size, None, Job::Release(segs)) {
            for s in segs {
                let _ = s.punch_hole(0, s.len());
            }
        }
    }
}

impl Drop for SetupThread {
    fn drop(&mut self) {
        // The threads finish their jobs (the segments of closed endpoints
        // and retired jobs are unmapped before the engine is gone), then
        // end.
        self.small.finish();
        self.large.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use unet_abi::udm::{UdmJobHeader, UdmNodeHeader, UDM_JOB_MAGIC, UDM_NODE_MAGIC};
    use unet_abi::Geometry;

    /// Collect until nothing is outstanding (at most 20 s).
    fn drain(st: &mut SetupThread) -> Vec<Done> {
        let t0 = Instant::now();
        let mut done = Vec::new();
        while st.busy() {
            assert!(t0.elapsed() < Duration::from_secs(20), "never made");
            done.extend(st.poll());
            std::thread::sleep(Duration::from_millis(1));
        }
        done
    }

    fn endpoints(done: Vec<Done>) -> Vec<(PendingCreate, io::Result<Segment>)> {
        done.into_iter()
            .map(|d| match d {
                Done::Endpoint(p, seg) => (p, seg),
                Done::UdmJob(..) => panic!("a job where an endpoint was made"),
            })
            .collect()
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
        let done = endpoints(drain(&mut st));
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

    /// Clients take turns on a lane: one that queued five large segments
    /// delays another's one by at most two of them (the one being made
    /// when it came, and the next in line).
    #[test]
    fn a_client_with_many_large_segments_queued_does_not_hold_up_another() {
        let mut st = SetupThread::new(Arc::new(EventFd::new().unwrap()));
        let large = Layout::new(Geometry {
            buffer_area_size: 4 * SMALL_SEGMENT,
            ..Geometry::default()
        })
        .unwrap();
        for i in 0..5 {
            st.start(7, 1, 10 + i, large, (true, 0), (i as usize, 100 + i));
        }
        st.start(7, 2, 20, large, (true, 0), (5, 200));
        let order: Vec<u32> = endpoints(drain(&mut st))
            .into_iter()
            .map(|(p, seg)| {
                seg.expect("a segment");
                p.req_id
            })
            .collect();
        assert_eq!(order.len(), 6);
        let at = order.iter().position(|&r| r == 20).unwrap();
        assert!(at <= 2, "the other client's segment came {at}th: {order:?}");
        let firsts: Vec<u32> = order.iter().copied().filter(|&r| r != 20).collect();
        assert_eq!(firsts, [10, 11, 12, 13, 14], "one client's in its order");
    }

    /// A creation whose client went away stays outstanding until its
    /// segment is collected (and unmapped): otherwise the engine stops
    /// polling and the segment waits in the channel for the next create.
    #[test]
    fn a_forgotten_creation_is_still_collected() {
        let mut st = SetupThread::new(Arc::new(EventFd::new().unwrap()));
        let layout = Layout::new(Geometry::default()).unwrap();
        st.start(7, 3, 30, layout, (true, 0), (0, 100));
        let (gone, jobs) = st.forget_client(3);
        assert_eq!((gone.len(), jobs.len()), (1, 0));
        assert!(st.pending().is_empty());
        assert!(st.busy(), "the segment being made must still be collected");
        assert!(drain(&mut st).is_empty(), "nothing handed to a client");
    }

    /// A UDM job's memory is made on a lane (the large one for a job of
    /// more than [`SMALL_SEGMENT`] bytes) and comes back written: the job
    /// header, every node's header.
    #[test]
    fn a_udm_jobs_memory_is_made_and_handed_back() {
        let mut st = SetupThread::new(Arc::new(EventFd::new().unwrap()));
        let big = UdmLayout::new(64, 64, 4096).unwrap();
        let small = UdmLayout::new(2, 8, 4096).unwrap();
        assert!(JobMemory::touched_by(&big) > SMALL_SEGMENT);
        assert!(JobMemory::touched_by(&small) <= SMALL_SEGMENT);
        let timeout = Duration::from_millis(2);
        st.start_udm_job(9, (1, 11), 5, big, timeout);
        st.start_udm_job(9, (2, 22), 6, small, timeout);
        assert_eq!(st.pending_jobs().len(), 2);
        assert!(st.large.thread.is_some() && st.small.thread.is_some());
        let mut got = Vec::new();
        for d in drain(&mut st) {
            let Done::UdmJob(p, mem) = d else {
                panic!("an endpoint where a job was made");
            };
            let mem = mem.expect("the job's memory");
            assert_eq!(mem.seg.len() as u64, p.layout.job_size);
            assert_eq!(mem.nodes.len(), p.layout.nodes as usize);
            assert_eq!(mem.touched(), JobMemory::touched_by(&p.layout));
            // SAFETY: the segments start with the headers JobMemory::make
            // wrote; read once, nothing else maps them.
            let (magic, id, nodes) = unsafe {
                let h = mem.seg.ptr().cast::<UdmJobHeader>().as_ref();
                (h.magic, h.job_id, h.nodes)
            };
            assert_eq!((magic, id, nodes), (UDM_JOB_MAGIC, p.id, p.layout.nodes));
            for (rank, (n, b)) in mem.nodes.iter().enumerate() {
                // SAFETY: as above.
                let (magic, r) = unsafe {
                    let h = n.ptr().cast::<UdmNodeHeader>().as_ref();
                    (h.magic, h.rank)
                };
                assert_eq!((magic, r as usize), (UDM_NODE_MAGIC, rank));
                assert_eq!(b.len() as u64, p.layout.buffer_size);
            }
            got.push((p.req_id, p.id));
        }
        got.sort();
        assert_eq!(got, [(11, 5), (22, 6)]);
        assert!(st.pending_jobs().is_empty());
    }

    /// A job whose client went away is given back by forget_client (so
    /// its id can be freed) and its memory, once made, is not handed to
    /// anyone.
    #[test]
    fn a_forgotten_job_is_still_collected() {
        let mut st = SetupThread::new(Arc::new(EventFd::new().unwrap()));
        let layout = UdmLayout::new(8, 8, 4096).unwrap();
        st.start_udm_job(9, (4, 40), 3, layout, Duration::from_millis(2));
        st.start_udm_job(9, (5, 50), 4, layout, Duration::from_millis(2));
        let (eps, jobs) = st.forget_client(4);
        assert!(eps.is_empty());
        assert_eq!(jobs.iter().map(|p| p.id).collect::<Vec<_>>(), [3]);
        assert_eq!(st.pending_jobs().len(), 1);
        let done = drain(&mut st);
        assert_eq!(done.len(), 1, "only the other client's job");
        assert!(matches!(&done[0], Done::UdmJob(p, Ok(_)) if p.client == 5));
    }
}
