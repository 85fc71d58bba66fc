//! The engine `unet bench spine` measures: one dispatcher stepped on the
//! bench's own thread, endpoints A and B, A's engine-path channel to B,
//! the extensions installed, and the message kinds A sends.

use super::*;

/// Receive buffers of 2 KiB from 8 KiB on; rings of 64.
const BUF_SIZE: u32 = 2048;
const RING_CAP: u32 = 64;
const FIRST_BUF: u32 = 8192;
const GEOMETRY: Geometry = Geometry {
    buffer_size: BUF_SIZE,
    buffer_area_size: 256 << 10,
    send_cap: RING_CAP,
    recv_cap: RING_CAP,
    free_cap: RING_CAP,
    event_cap: RING_CAP,
};
/// Where A's messages are: `[args_len u16][args]` frames and a plain
/// two-byte message (as long as an empty frame).
pub(super) const OFF_EMPTY: u32 = 0;
pub(super) const OFF_FAN: u32 = 64;
pub(super) const OFF_FAN0: u32 = 128;
const OFF_PLAIN: u32 = 192;

/// A message kind pushed on A: its descriptor, and what one of them
/// delivers to A and to B.
#[derive(Clone, Copy)]
pub(super) struct Variant {
    pub(super) key: &'static str,
    pub(super) desc: SendDesc,
    pub(super) to_a: usize,
    pub(super) to_b: usize,
}

pub(super) fn am(key: &'static str, off: u32, len: u32, handler: u16, to_a: usize) -> Variant {
    Variant {
        key,
        desc: SendDesc {
            offset: off,
            len,
            channel: handler,
            flags: SEND_AM,
            ..Default::default()
        },
        to_a,
        to_b: 0,
    }
}

/// One engine: A and B, A's engine-path channel to B, the extensions.
pub(super) struct Rig {
    pub(super) mode: &'static str,
    pub(super) engine: Dispatcher,
    pub(super) client: LocalClient,
    pub(super) a: RawEndpoint,
    pub(super) b: RawEndpoint,
    pub(super) plain: Variant,
    pub(super) next_buf: u32,
}

impl Rig {
    pub(super) fn new(
        mode: &'static str,
        compile: bool,
        classes: &[Vec<u8>],
    ) -> Result<Rig, String> {
        let err = |what: &str| {
            let w = format!("{mode}: {what}");
            move |e: unet_engine::invoker::InvokerError| format!("{w}: {e}")
        };
        let cfg = EngineConfig {
            max_endpoints: 4,
            applet_compile: compile,
            ..Default::default()
        };
        let mut engine = Dispatcher::new(cfg).map_err(|e| format!("{mode}: an engine: {e}"))?;
        let mut client =
            LocalClient::new(&mut engine).map_err(|e| format!("{mode}: a client: {e}"))?;
        let mut a = client
            .create_endpoint(&mut engine, GEOMETRY)
            .map_err(err("create A"))?;
        let b = client
            .create_endpoint(&mut engine, GEOMETRY)
            .map_err(err("create B"))?;
        let to_b = client
            .open_channel(&mut engine, a.id(), b.id(), PathChoice::Engine)
            .map_err(err("open A to B"))?;
        a.write_area(u64::from(OFF_EMPTY), &[0, 0]);
        a.write_area(u64::from(OFF_FAN), &[1, 0, FAN]);
        a.write_area(u64::from(OFF_FAN0), &[1, 0, 0]);
        a.write_area(u64::from(OFF_PLAIN), &[0xab, 0xcd]);
        let plain = Variant {
            key: "plain",
            desc: SendDesc {
                offset: OFF_PLAIN,
                len: 2,
                channel: to_b,
                ..Default::default()
            },
            to_a: 0,
            to_b: 1,
        };
        let mut rig = Rig {
            mode,
            engine,
            client,
            a,
            b,
            plain,
            next_buf: 0,
        };
        rig.load(&classes[0], "spbench", i32::from(H_NULL))?;
        rig.load(&classes[1], "runaway", i32::from(H_SPIN))?;
        rig.refill();
        Ok(rig)
    }

    fn load(&mut self, class: &[u8], name: &str, arg: i32) -> Result<(), String> {
        let fd = unet_sys::Segment::create_file("unet-bench-spine", class.len())
            .map_err(|e| format!("a memory file: {e}"))?;
        let mut f = std::fs::File::from(fd);
        std::io::Write::write_all(&mut f, class).map_err(|e| format!("{e}"))?;
        let req = Request::SpineLoad {
            len: class.len() as u32,
            budget_us: BUDGET.as_micros() as u32,
            arg,
            name: name.into(),
            domains: Vec::new(),
        };
        match self
            .client
            .call(&mut self.engine, &req, &[f.as_raw_fd()])
            .map_err(|e| format!("{}: load {name}: {e}", self.mode))?
        {
            (Reply::SpineLoaded { .. }, _) => Ok(()),
            (r, _) => Err(format!("{}: load {name}: {r:?}", self.mode)),
        }
    }

    /// The adapter's listing, through the control path.
    fn listing(&mut self) -> Result<SpineListing, String> {
        let mode = self.mode;
        match self
            .client
            .call(&mut self.engine, &Request::SpineList, &[])
            .map_err(|e| format!("{mode}: list: {e}"))?
        {
            (Reply::SpineListing { len }, mut fds) if !fds.is_empty() => {
                let b = unet_sys::Segment::read_untrusted(&fds.remove(0), len as usize)
                    .map_err(|e| format!("{mode}: the listing: {e}"))?;
                SpineListing::decode(&b).map_err(|e| format!("{mode}: the listing: {e}"))
            }
            (r, _) => Err(format!("{mode}: list: {r:?}")),
        }
    }

    /// Take everything A and B received, and post free buffers on both
    /// until their rings are full. Returns (A's, B's) messages.
    fn refill(&mut self) -> (usize, usize) {
        let got_a = std::iter::from_fn(|| self.a.pop_recv()).count();
        let got_b = std::iter::from_fn(|| self.b.pop_recv()).count();
        for ep in [&mut self.a, &mut self.b] {
            let mut n = self.next_buf;
            while ep.post_free(FIRST_BUF + (n % RING_CAP) * BUF_SIZE) {
                n = n.wrapping_add(1);
            }
        }
        self.next_buf = self.next_buf.wrapping_add(RING_CAP);
        (got_a, got_b)
    }

    /// Push `n` descriptors of `v` (and first, with `spin`, one for the
    /// runaway); step the engine until it is idle. Returns the time of
    /// the steps, ns, then checks (untimed) what the engine did.
    pub(super) fn batch(&mut self, v: &Variant, n: usize, spin: bool) -> Result<f64, String> {
        let start = self.a.sends_taken();
        if spin {
            let s = am("spin", OFF_EMPTY, 2, H_SPIN, 0);
            self.a.push_send(s.desc).ok_or("A's send ring is full")?;
        }
        let mut end = start;
        for _ in 0..n {
            end = self.a.push_send(v.desc).ok_or("A's send ring is full")? + 1;
        }
        let t = Instant::now();
        loop {
            let work = self.engine.step();
            if work == 0 && self.a.sends_taken() >= end {
                break;
            }
            if t.elapsed() > SETUP_LIMIT {
                return Err(format!("{}: {}: the engine stopped", self.mode, v.key));
            }
        }
        let ns = t.elapsed().as_nanos() as f64;
        for pos in start..end {
            let st = self.a.send_status(pos);
            if st != SendStatus::Sent as i32 {
                return Err(format!(
                    "{}: {}: a send was answered {:?}",
                    self.mode,
                    v.key,
                    SendStatus::from_i32(st)
                ));
            }
        }
        let got = self.refill();
        if got != (n * v.to_a, n * v.to_b) {
            return Err(format!(
                "{}: {}: A and B received {got:?} of a batch of {n}",
                self.mode, v.key
            ));
        }
        Ok(ns)
    }

    /// Untimed batches of every variant until the engine runs both
    /// extensions compiled (their code is made on a thread of its own).
    pub(super) fn wait_compiled(&mut self, vs: &[Variant]) -> Result<(), String> {
        let t = Instant::now();
        loop {
            let l = self.listing()?;
            if l.extensions.len() == 2 && l.extensions.iter().all(|x| x.compiled) {
                return Ok(());
            }
            if t.elapsed() > SETUP_LIMIT {
                let names: Vec<_> = l
                    .extensions
                    .iter()
                    .filter(|x| !x.compiled)
                    .map(|x| &x.name)
                    .collect();
                return Err(format!(
                    "{}: {names:?} not compiled within {} s",
                    self.mode,
                    SETUP_LIMIT.as_secs()
                ));
            }
            // An extension takes its machine code when one of its
            // handlers runs next: the runaway's too.
            for (i, v) in vs.iter().enumerate() {
                self.batch(v, BATCH, i == 0)?;
            }
        }
    }

    /// The runaway's handler, and fail if any other handler was stopped
    /// or anything but the refused sends was dropped.
    pub(super) fn check(&mut self) -> Result<HandlerInfo, String> {
        let l = self.listing()?;
        let mode = self.mode;
        let mut spin = None;
        for x in &l.extensions {
            for h in &x.handlers {
                if h.number == H_SPIN {
                    spin = Some(h.clone());
                } else if h.terminated() > 0 {
                    return Err(format!("{mode}: handler {} was stopped: {h:?}", h.number));
                }
            }
        }
        let dropped: Vec<_> = l
            .drops
            .iter()
            .filter(|(why, n)| *n > 0 && why != "no_handler")
            .collect();
        if !dropped.is_empty() || l.msgs_live != 0 || l.bufs_live != 0 {
            return Err(format!(
                "{mode}: drops {dropped:?}, {} messages and {} buffers live",
                l.msgs_live, l.bufs_live
            ));
        }
        spin.ok_or_else(|| format!("{mode}: no runaway handler"))
    }
}

// -------------------------------------------------------------------------
// The measurements
// -------------------------------------------------------------------------
