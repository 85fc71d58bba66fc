//! A UDM job's memory: made and initialised off the engine's loop (on
//! the set-up thread) while its id is held reserved ([`Jobs::reserve`]),
//! entered with [`Jobs::insert`], and unmapped there again once the job
//! is retired.

use super::*;

/// A job's memory: its segment and every rank's node segment and virtual
/// buffer, made and initialised by [`JobMemory::make`]. It is made off
/// the engine's loop (on the set-up thread) and entered with
/// [`Jobs::insert`]; a retired job's memory goes back to that thread to be
/// unmapped ([`Job::into_segments`]).
pub(crate) struct JobMemory {
    /// The job segment (header, node lines, fast rings) and its view
    /// (boxed: a JobMemory travels between threads by value).
    pub seg: Box<JobSeg>,
    /// By rank, one for each of the job's nodes: the node segment
    /// (header, divert ring) with its view, and the virtual buffer
    /// (sparse).
    pub nodes: Vec<(NodeSeg, Segment)>,
}

impl JobMemory {
    /// Make the memory of job `id` (geometry `layout`) of engine
    /// `engine_id`: the job segment created, pre-faulted, its header
    /// written and every fast ring initialised; each rank's node segment
    /// likewise with its divert ring; each rank's virtual buffer reserved
    /// (sparse, not touched). It takes time in proportion to
    /// [`JobMemory::touched_by`], so the engine does it on its set-up thread,
    /// never on its loop.
    pub(crate) fn make(layout: &UdmLayout, id: u32, engine_id: u64) -> std::io::Result<JobMemory> {
        let seg = Box::new(JobSeg::create(layout, id, engine_id)?);
        let mut nodes = Vec::with_capacity(layout.nodes as usize);
        for rank in 0..layout.nodes {
            let nseg = NodeSeg::create(layout, id, rank, engine_id)?;
            let buf = Segment::create_sparse(
                &format!("unet-udm-buf-{engine_id:016x}-{id}-{rank}"),
                layout.buffer_size as usize,
            )?;
            nodes.push((nseg, buf));
        }
        Ok(JobMemory { seg, nodes })
    }

    /// Bytes that making (or unmapping) a job of geometry `layout`
    /// touches: its job segment and node segments (the virtual buffers
    /// are sparse). What chooses the set-up thread's lane.
    pub(crate) fn touched_by(layout: &UdmLayout) -> u64 {
        layout.job_size + layout.nodes as u64 * layout.node_size
    }

    /// Bytes of its segments that are populated (all but the sparse
    /// virtual buffers).
    pub(crate) fn touched(&self) -> u64 {
        self.seg.len() as u64 + self.nodes.iter().map(|(n, _)| n.len() as u64).sum::<u64>()
    }

    /// Bytes a job of geometry `layout` is charged to its creator: its
    /// segment, every node's and every node's virtual buffer at its full
    /// size.
    pub(crate) fn charge(layout: &UdmLayout) -> u64 {
        layout.job_size + layout.nodes as u64 * (layout.node_size + layout.buffer_size)
    }

    /// Every segment, to be unmapped.
    pub(crate) fn into_segments(self) -> Vec<Segment> {
        let mut v = Vec::with_capacity(1 + 2 * self.nodes.len());
        v.push((*self.seg).into_segment());
        for (n, b) in self.nodes {
            v.push(n.into_segment());
            v.push(b);
        }
        v
    }
}

/// A UDM job whose memory is being made (on the set-up thread).
pub(crate) struct PendingJob {
    /// The set-up thread's ticket for it.
    pub(crate) ticket: u64,
    /// The client that asked, and its request.
    pub client: ClientId,
    pub req_id: u32,
    /// The id reserved for it, its geometry and atomicity timeout.
    pub id: u32,
    pub layout: UdmLayout,
    pub timeout: Duration,
    /// The link it is the replica for, when it is the replica of another
    /// engine's job that `client` joins through that link.
    pub replica_of: Option<u32>,
}

impl PendingJob {
    /// Bytes charged to its creator (as for a made job).
    pub(crate) fn charge(&self) -> u64 {
        JobMemory::charge(&self.layout)
    }
}

/// Ids reserved while a job's memory is made, and the entering of a
/// made job.
impl Jobs {
    /// Reserve an id for a job whose memory is being made (on the set-up
    /// thread): no other job takes it meanwhile. Entered with
    /// [`Jobs::insert`], or given back with [`Jobs::unreserve`].
    pub(crate) fn reserve(&mut self) -> u32 {
        let id = loop {
            self.next_id = self.next_id.wrapping_add(1);
            let id = self.next_id;
            if id != 0 && !self.jobs.contains_key(&id) && !self.reserved.contains(&id) {
                break id;
            }
        };
        self.reserved.insert(id);
        id
    }

    /// Ids reserved and not yet entered nor given back.
    #[cfg(test)]
    pub(crate) fn reserved(&self) -> usize {
        self.reserved.len()
    }

    /// Give back an id reserved for a job that was not entered.
    pub(crate) fn unreserve(&mut self, id: u32) {
        self.reserved.remove(&id);
    }

    /// Enter job `id` (reserved), of geometry `layout`, its memory `mem`
    /// made by [`JobMemory::make`], created by client `owner`: its key and
    /// doorbell are made here. On failure the id is given back and the
    /// memory returned, to be unmapped off the engine's thread.
    pub(crate) fn insert(
        &mut self,
        id: u32,
        owner: ClientId,
        layout: UdmLayout,
        timeout: Duration,
        mem: JobMemory,
    ) -> Result<(), JobMemory> {
        self.reserved.remove(&id);
        let fits = mem.seg.len() as u64 >= layout.job_size
            && mem.nodes.len() == layout.nodes as usize
            && mem.nodes.iter().all(|(n, b)| {
                n.len() as u64 >= layout.node_size && b.len() as u64 >= layout.buffer_size
            });
        if !fits || self.jobs.contains_key(&id) {
            return Err(mem);
        }
        let doorbell = match EventFd::new() {
            Ok(d) => d,
            Err(_) => return Err(mem),
        };
        let JobMemory { seg, nodes } = mem;
        let nodes = nodes
            .into_iter()
            .map(|(nseg, buf)| UdmNode {
                client: None,
                pid: 0,
                state: UDM_NODE_FREE,
                seg: Some(nseg),
                drain_end: None,
                buf: Some(buf),
                divert_tail: 0,
                buf_head: 0,
                buf_tail: 0,
                buf_base: 0,
                base_checked: false,
                kept: KeptPages::default(),
                idle_at: None,
                pages_every: PAGES_IDLE,
                bad_head: None,
                held: false,
                last_taken: 0,
                stuck_since: None,
                look_at: Instant::now(),
                idle_every: Duration::ZERO,
                idle_seen: (0, 0),
                counters: [0; UDM_COUNTERS],
            })
            .collect();
        self.jobs.insert(
            id,
            Job {
                key: sys::random_u64(),
                owner,
                owner_alive: true,
                // The connection itself until set-up names the process.
                payer: Payer {
                    key: (0, owner),
                    uid: u32::MAX,
                },
                layout,
                seg: *seg,
                doorbell,
                timeout,
                nodes,
                busy: 0,
                parked: vec![0; layout.nodes as usize],
                watch: 0,
                due: None,
                sweep: 0,
                joined_bits: 0,
                kept: 0,
                pages_due: None,
                nap_until: None,
                outbox: VecDeque::new(),
                outbox_counted: vec![0; layout.nodes as usize],
                released: Vec::new(),
                sched: None,
                descheduled: 0,
            },
        );
        Ok(())
    }

    /// Make a job on the calling thread: its id, its memory
    /// ([`JobMemory::make`]), its doorbell. Returns its id. For tests: the
    /// engine makes every job's memory, replicas included, on its set-up
    /// thread.
    #[cfg(test)]
    pub(crate) fn create(
        &mut self,
        owner: ClientId,
        layout: UdmLayout,
        timeout: Duration,
        engine_id: u64,
    ) -> std::io::Result<u32> {
        let id = self.reserve();
        let mem = match JobMemory::make(&layout, id, engine_id) {
            Ok(m) => m,
            Err(e) => {
                self.unreserve(id);
                return Err(e);
            }
        };
        match self.insert(id, owner, layout, timeout, mem) {
            Ok(()) => Ok(id),
            Err(_) => Err(std::io::Error::other("the job could not be entered")),
        }
    }
}
