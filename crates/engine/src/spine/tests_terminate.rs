//! Terminating a handler at every point where it can be terminated,
//! through the runtime (issue 41's item 3).
//!
//! `Steps.onWork` keeps its message's bulk buffer, reads the arguments,
//! sums them through a helper in a loop, writes the buffer, sends a small
//! message and a bulk one to a handler of another extension (`Sink`, which
//! keeps the latest buffer it is sent and gives back the one before),
//! replies to its host and releases the buffer. With JIVE's check limit
//! `n` = 1, 2, 3, ... on `Steps`'s VM, each invocation stops at its `n`-th
//! check, and after each stop the runtime's state is checked: no message
//! slot or buffer left over, what is kept charged to the one who keeps it
//! (with the right reference counts), the queue empty and its counters
//! exact, the termination counted by reason, the extension's scratch
//! region as its initialiser made it, and what the handler did before the
//! stop standing (a prefix of its effects, growing with `n`). Then the
//! same message without a limit completes. Interpreted and compiled code
//! stop at the same points.
//!
//! The classes are compiled with javac against the applet SDK (a JDK 22
//! or later, as the engine's other Java tests need).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use jive::Fault;
use unet_abi::FaultKind;

use super::*;
use crate::counters::Counters;
use crate::spine::ext;
use crate::spine::msgs::KeepSet;
use crate::spine::rt::KEEP_MAX;
use crate::unet::am::HostAm;

/// The classes these tests (and `tests_timing.rs`) load, as (class,
/// source).
const SOURCES: &[(&str, &str)] = &[
    (
        "Fan",
        "import unet.spine.Spine;\n\
         public class Fan {\n\
           static byte[] args;\n\
           static void init(int base) {\n\
             args = new byte[Spine.ARGS_MAX];\n\
             Spine.addHandler(\"onNull\", base, 0);\n\
             Spine.addHandler(\"onFan\", base + 1, base);\n\
             Spine.addHandler(\"onFan\", base + 2, 1000);\n\
           }\n\
           static void onNull(int ctx, int msg) { }\n\
           static void onFan(int to, int msg) {\n\
             int k = Spine.argByte(msg, 0);\n\
             for (int i = 0; i < k; i++) { Spine.send(Spine.DEST_LOCAL, to, args, 0, 0); }\n\
           }\n\
         }\n",
    ),
    (
        "Steps",
        "import unet.spine.Spine;\n\
         public class Steps {\n\
           static byte[] args;\n\
           static byte[] one;\n\
           static int done;\n\
           static void init(int base) {\n\
             args = new byte[Spine.ARGS_MAX];\n\
             one = new byte[1];\n\
             Spine.addHandler(\"onWork\", base, base + 1);\n\
           }\n\
           static int twice(int x) { return x + x; }\n\
           static int sum(int n) {\n\
             int s = 0;\n\
             for (int i = 0; i < n; i++) { s += twice(args[i]); }\n\
             return s;\n\
           }\n\
           static void onWork(int sink, int msg) {\n\
             int b = Spine.bulk(msg);\n\
             if (Spine.keep(b) != 0) { return; }\n\
             int n = Spine.readArgs(msg, 0, args, 0, 4);\n\
             one[0] = (byte) sum(n);\n\
             Spine.writeBuffer(b, 0, one, 0, 1);\n\
             Spine.send(Spine.DEST_LOCAL, sink, args, 0, n);\n\
             Spine.sendBulk(Spine.DEST_LOCAL, sink, args, 0, n, b);\n\
             Spine.reply(msg, sink, args, 0, n);\n\
             Spine.release(b);\n\
             done++;\n\
           }\n\
         }\n",
    ),
    (
        "Sink",
        "import unet.spine.Spine;\n\
         public class Sink {\n\
           static int held;\n\
           static int got;\n\
           static int bulks;\n\
           static void init(int n) { held = -1; Spine.addHandler(\"onSink\", n, 0); }\n\
           static void onSink(int ctx, int msg) {\n\
             int b = Spine.bulk(msg);\n\
             if (b >= 0) {\n\
               if (held >= 0) { Spine.release(held); }\n\
               held = -1;\n\
               if (Spine.keep(b) == 0) { held = b; }\n\
               bulks++;\n\
             }\n\
             got++;\n\
           }\n\
         }\n",
    ),
    (
        "Runaway",
        "import unet.spine.Spine;\n\
         public class Runaway {\n\
           static int spins;\n\
           static void init(int n) { Spine.addHandler(\"onSpin\", n, 0); }\n\
           static void onSpin(int ctx, int msg) { while (true) { spins++; } }\n\
         }\n",
    ),
    (
        "Xport",
        "import unet.spine.Spine;\n\
         public class Xport {\n\
           static void init(int n) { }\n\
           public static int twice(int x) { return x + x; }\n\
         }\n",
    ),
    (
        "Xcall",
        "import unet.spine.Spine;\n\
         public class Xcall {\n\
           static int got;\n\
           static void init(int n) { Spine.addHandler(\"onCall\", n, 0); }\n\
           static void onCall(int ctx, int msg) { got = Xport.twice(21); }\n\
         }\n",
    ),
    (
        "Neighbour",
        "import unet.spine.Spine;\n\
         public class Neighbour {\n\
           static int seen;\n\
           static int acc;\n\
           static void init(int n) { Spine.addHandler(\"onMsg\", n, 0); }\n\
           static void onMsg(int ctx, int msg) {\n\
             int k = Spine.argInt(msg, 0);\n\
             for (int i = 0; i < k; i++) { acc += i ^ acc; }\n\
             seen++;\n\
           }\n\
         }\n",
    ),
];

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// [`SOURCES`] compiled once (one javac run, for Java 8, every lint an
/// error, against the applet SDK): class name → class file.
pub(super) fn classes() -> &'static HashMap<String, Vec<u8>> {
    static CLASSES: OnceLock<HashMap<String, Vec<u8>>> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let jdk = Command::new("bash")
            .arg(repo().join("scripts/find-jdk"))
            .output()
            .expect("cannot run `bash scripts/find-jdk`");
        assert!(
            jdk.status.success(),
            "SPINE's terminate tests compile Java extensions and need a JDK 22 or later; \
             scripts/find-jdk found none (set JAVA_HOME to one):\n{}",
            String::from_utf8_lossy(&jdk.stderr)
        );
        let javac = PathBuf::from(String::from_utf8_lossy(&jdk.stdout).trim()).join("bin/javac");
        let dir = std::env::temp_dir().join(format!("unet-spine-terminate-{}", std::process::id()));
        let (src, out) = (dir.join("src"), dir.join("out"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        let mut files = Vec::new();
        for (class, text) in SOURCES {
            let p = src.join(format!("{class}.java"));
            std::fs::write(&p, text).unwrap();
            files.push(p);
        }
        let run = Command::new(javac)
            .args(["--release", "8", "-Xlint:all,-options", "-Werror"])
            .arg("-sourcepath")
            .arg(repo().join("java/applet-sdk/src/main/java"))
            .arg("-d")
            .arg(&out)
            .args(&files)
            .output()
            .expect("cannot run javac");
        let classes = run.status.success().then(|| {
            SOURCES
                .iter()
                .map(|(c, _)| {
                    let bytes = std::fs::read(out.join(format!("{c}.class")))
                        .unwrap_or_else(|e| panic!("{c}.class: {e}"));
                    (c.to_string(), bytes)
                })
                .collect()
        });
        let _ = std::fs::remove_dir_all(&dir);
        classes.unwrap_or_else(|| {
            panic!(
                "javac failed:\n{}{}",
                String::from_utf8_lossy(&run.stdout),
                String::from_utf8_lossy(&run.stderr)
            )
        })
    })
}

/// A SPINE part with an endpoint table (no endpoints: a reply to a host
/// is refused at delivery and counted as `dest_full`).
pub(super) struct Rig {
    pub sp: SpinePart,
    pub eps: EndpointTable,
}

/// The endpoint id the test's host messages come from (none such exists).
pub(super) const HOST: u32 = 9;

impl Rig {
    pub(super) fn new() -> Rig {
        let cfg = EngineConfig::default();
        let counters = Arc::new(Counters::create(4, 1).unwrap());
        Rig {
            sp: SpinePart::new(&cfg, Arc::new(EventFd::new().unwrap())),
            eps: EndpointTable::new(4, counters),
        }
    }

    /// Install class `name` with `init(arg)` and time budget `budget`, as
    /// the set-up half does; its slot.
    pub(super) fn install(&mut self, name: &str, arg: i32, budget: Duration) -> usize {
        self.install_linked(name, arg, budget, &[])
    }

    /// [`Rig::install`], granted the domains of exporters loaded before
    /// (their names) and linked to them.
    pub(super) fn install_linked(
        &mut self,
        name: &str,
        arg: i32,
        budget: Duration,
        domains: &[&str],
    ) -> usize {
        let sp = &mut self.sp;
        let to = crate::spine::link::linkable(&sp.rt);
        let granted: Vec<String> = domains.iter().map(|d| d.to_string()).collect();
        let links = to.links(&granted);
        let v =
            ext::verify(&classes()[name], &granted, &to).unwrap_or_else(|e| panic!("{name}: {e}"));
        let slot = sp.exts.len();
        sp.rt.keeps.resize_with(slot + 1, || KeepSet::new(KEEP_MAX));
        let id = sp.next_id();
        let (mut x, entries) = Ext::instantiate(
            v,
            &mut sp.rt,
            slot as u32,
            id,
            0,
            name.into(),
            budget,
            arg,
            false,
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        x.imports = crate::spine::link::add_importer(&mut sp.rt, id, &links);
        let numbers: Vec<u16> = entries.iter().map(|(n, _)| *n).collect();
        for (n, e) in entries {
            sp.rt.handlers[n as usize] = Some(e);
        }
        sp.exts.push(Some(x));
        sp.mark_handlers(&mut self.eps, &numbers, true);
        slot
    }

    pub(super) fn ext(&mut self, slot: usize) -> &mut Ext {
        self.sp.exts[slot].as_mut().expect("installed")
    }

    /// A host's active message for `handler` in U-Net's inbox.
    pub(super) fn host_am(&mut self, handler: u16, args: &[u8], bulk: &[u8]) {
        let mut data = (args.len() as u16).to_le_bytes().to_vec();
        data.extend_from_slice(args);
        data.extend_from_slice(bulk);
        self.eps.am.queue.push_back(HostAm {
            endpoint: HOST,
            handler,
            data,
        });
    }

    /// One turn of the part; the work it did.
    pub(super) fn turn(&mut self) -> usize {
        SpineTurn {
            spine: &mut self.sp,
            eps: &mut self.eps,
        }
        .turn(&mut cx())
    }

    /// Turns until the part is idle; how many did work.
    pub(super) fn settle(&mut self) -> usize {
        let mut turns = 0;
        while self.turn() > 0 {
            turns += 1;
            assert!(turns < 1000, "the part never went idle");
        }
        turns
    }
}

pub(super) fn cx() -> Context<'static> {
    static CFG: OnceLock<EngineConfig> = OnceLock::new();
    static COUNTERS: OnceLock<Counters> = OnceLock::new();
    Context {
        port: None,
        counters: COUNTERS.get_or_init(|| Counters::create(1, 1).unwrap()),
        cfg: CFG.get_or_init(EngineConfig::default),
    }
}

/// `onWork`'s handler number, and `onSink`'s (the one after it).
const WORK: u16 = 300;
const SINK: u16 = WORK + 1;
/// The message every invocation is given.
const ARGS: [u8; 4] = [1, 2, 3, 4];
const BULK: [u8; 16] = [7; 16];

/// What an invocation of `onWork` left behind, read off the runtime's
/// counters and the sink's statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Effects {
    /// Its keep was undone because it was terminated.
    undone: u64,
    /// Messages the sink got, and of them with a buffer.
    got: u64,
    bulks: u64,
    /// Replies to the host (refused at delivery: no such endpoint).
    replies: u64,
}

/// The effects after each of the handler's steps, in order: nothing; its
/// keep; its send; its bulk send; its reply; its release (and return).
const STAGES: [Effects; 6] = [
    Effects {
        undone: 0,
        got: 0,
        bulks: 0,
        replies: 0,
    },
    Effects {
        undone: 1,
        got: 0,
        bulks: 0,
        replies: 0,
    },
    Effects {
        undone: 1,
        got: 1,
        bulks: 0,
        replies: 0,
    },
    Effects {
        undone: 1,
        got: 2,
        bulks: 1,
        replies: 0,
    },
    Effects {
        undone: 1,
        got: 2,
        bulks: 1,
        replies: 1,
    },
    Effects {
        undone: 0,
        got: 2,
        bulks: 1,
        replies: 1,
    },
];

/// The runtime's and the extensions' counters the test follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Snapshot {
    undone: u64,
    work_calls: u64,
    work_fuel_stops: u64,
    work_other_stops: u64,
    sink_calls: u64,
    sink_stops: u64,
    sink_got: i32,
    sink_bulks: i32,
    done: i32,
    dest_full: u64,
    other_drops: u64,
    handler_runs: u64,
    host_runs: u64,
    deliver_runs: u64,
    bad_handles: u64,
}

struct Terminate {
    rig: Rig,
    work: usize,
    sink: usize,
    /// Steps's scratch: its two arrays (handle, length), the heap's bytes
    /// and arrays, as its initialiser left them.
    scratch: ([(i32, usize); 2], usize, usize),
}

impl Terminate {
    fn new(compiled: bool) -> Terminate {
        let mut rig = Rig::new();
        let sink = rig.install("Sink", i32::from(SINK), ext::DEFAULT_BUDGET);
        let work = rig.install("Steps", i32::from(WORK), ext::DEFAULT_BUDGET);
        let vm = rig.ext(work).vm_mut();
        if compiled {
            vm.compile().expect("Steps compiles");
            let m = vm.class().method("onWork").unwrap();
            assert!(vm.is_compiled(m), "onWork runs compiled");
        }
        let scratch = Terminate::scratch_of(&mut rig, work);
        Terminate {
            rig,
            work,
            sink,
            scratch,
        }
    }

    fn scratch_of(rig: &mut Rig, work: usize) -> ([(i32, usize); 2], usize, usize) {
        let vm = rig.ext(work).vm_mut();
        let arr = |name: &str| {
            let f = vm.static_field(name).unwrap();
            let a = vm.array_of_field(f).expect("an array");
            (a.handle(), vm.bytes(a).map_or(0, |b| b.len()))
        };
        ([arr("args"), arr("one")], vm.heap_used(), vm.live_arrays())
    }

    fn int_field(&mut self, slot: usize, name: &str) -> i32 {
        let vm = self.rig.ext(slot).vm_mut();
        let f = vm.static_field(name).unwrap();
        vm.get_int_field(f)
    }

    fn snapshot(&mut self) -> Snapshot {
        let (work, sink) = (self.work, self.sink);
        let (sink_got, sink_bulks) = (self.int_field(sink, "got"), self.int_field(sink, "bulks"));
        let done = self.int_field(work, "done");
        let w = self.rig.ext(work);
        let undone = w.keeps_undone;
        let h = &w.handlers[0];
        let (work_calls, work_fuel_stops) = (h.invocations, h.terms[FaultKind::Fuel as usize]);
        let work_other_stops = h.terms.iter().sum::<u64>() - work_fuel_stops;
        let s = &self.rig.ext(sink).handlers[0];
        let (sink_calls, sink_stops) = (s.invocations, s.terms.iter().sum());
        let q = &self.rig.sp.rt.queue;
        let dest_full = q.drops[DropReason::DestFull as usize];
        Snapshot {
            undone,
            work_calls,
            work_fuel_stops,
            work_other_stops,
            sink_calls,
            sink_stops,
            sink_got,
            sink_bulks,
            done,
            dest_full,
            other_drops: q.drops.iter().sum::<u64>() - dest_full,
            handler_runs: q.run[EventKind::Handler as usize],
            host_runs: q.run[EventKind::HostTx as usize],
            deliver_runs: q.run[EventKind::DeliverHost as usize],
            bad_handles: self.rig.sp.rt.bad_handles,
        }
    }

    /// The runtime's state between messages: nothing queued or in flight,
    /// no message slot used, every live buffer the one the sink keeps
    /// (once, with one reference, named by its scratch), `Steps` keeping
    /// nothing, and `Steps`'s scratch region as its initialiser made it.
    fn check_idle(&mut self, what: &str) {
        let (work, sink) = (self.work, self.sink);
        let held = self.int_field(sink, "held");
        let rt = &self.rig.sp.rt;
        assert!(rt.queue.is_empty(), "{what}: events left queued");
        assert!(
            self.rig.eps.am.queue.is_empty(),
            "{what}: host messages left"
        );
        assert_eq!(rt.msgs.live(), 0, "{what}: message slots left live");
        assert_eq!(rt.cur.msg, rt::NO_MSG, "{what}: an invocation left current");
        assert_eq!(rt.keeps[work].len(), 0, "{what}: Steps keeps a buffer");
        let kept = rt.keeps[sink].len();
        assert!(kept <= 1, "{what}: the sink keeps {kept} buffers");
        assert_eq!(
            rt.bufs.live(),
            kept,
            "{what}: buffers live beside the keeps"
        );
        if kept == 1 {
            assert!(
                held >= 0,
                "{what}: the sink keeps a buffer its scratch does not name"
            );
            assert!(
                rt.keeps[sink].contains(held as u32),
                "{what}: the sink's held"
            );
            assert_eq!(rt.bufs.refs(held as u32), 1, "{what}: references on held");
        }
        let now = Terminate::scratch_of(&mut self.rig, work);
        assert_eq!(now, self.scratch, "{what}: Steps's scratch region changed");
    }

    /// One message for `onWork`; the counters before and after it ran.
    fn one(&mut self, limit: Option<u64>) -> (Snapshot, Snapshot) {
        let before = self.snapshot();
        self.rig.host_am(WORK, &ARGS, &BULK);
        // The first turn takes the message in (a host_tx event, which
        // queues the handler's event); the second invokes onWork, under
        // the limit; what it sent runs in the turns after, unlimited.
        assert!(self.rig.turn() > 0);
        self.rig.ext(self.work).vm_mut().set_check_limit(limit);
        assert!(self.rig.turn() > 0);
        self.rig.ext(self.work).vm_mut().set_check_limit(None);
        self.rig.settle();
        (before, self.snapshot())
    }
}

/// What one invocation changed, as [`Effects`].
fn effects(b: &Snapshot, a: &Snapshot) -> Effects {
    Effects {
        undone: a.undone - b.undone,
        got: (a.sink_got - b.sink_got) as u64,
        bulks: (a.sink_bulks - b.sink_bulks) as u64,
        replies: a.dest_full - b.dest_full,
    }
}

/// Stop `onWork` at each of its checks in turn; the stage each stop
/// reached, in order.
fn stops(compiled: bool) -> Vec<usize> {
    let mode = if compiled { "compiled" } else { "interpreted" };
    let mut t = Terminate::new(compiled);
    // Unlimited first: the message does all of its work.
    let (b, a) = t.one(None);
    assert_eq!(effects(&b, &a), STAGES[5], "{mode}: unlimited");
    assert_eq!(a.done - b.done, 1);
    t.check_idle(&format!("{mode}: unlimited"));
    let mut seen = Vec::new();
    for n in 1..10_000u64 {
        let what = format!("{mode}, stopped at check {n}");
        let (b, a) = t.one(Some(n));
        let e = effects(&b, &a);
        assert_eq!(a.work_calls - b.work_calls, 1, "{what}: one invocation");
        assert_eq!(
            a.work_other_stops, b.work_other_stops,
            "{what}: other faults"
        );
        assert_eq!((a.sink_stops, a.bad_handles), (0, 0), "{what}");
        assert_eq!(a.other_drops, b.other_drops, "{what}: drops {a:?}");
        // Every event the message caused ran, and nothing else did.
        let sent = e.got + e.replies;
        assert_eq!(a.host_runs - b.host_runs, 1, "{what}");
        assert_eq!(a.handler_runs - b.handler_runs, 1 + e.got, "{what}");
        assert_eq!(a.deliver_runs - b.deliver_runs, e.replies, "{what}");
        assert_eq!(a.sink_calls - b.sink_calls, e.got, "{what}");
        assert!(sent <= 3);
        t.check_idle(&what);
        if a.work_fuel_stops == b.work_fuel_stops {
            // n is past the handler's last check: it completed.
            assert_eq!(e, STAGES[5], "{what}: completed");
            assert_eq!(a.done - b.done, 1, "{what}: completed");
            break;
        }
        assert_eq!(a.work_fuel_stops - b.work_fuel_stops, 1, "{what}: counted");
        assert_eq!(a.done, b.done, "{what}: stopped but done");
        let last = t.rig.ext(t.work).last_fault.clone();
        assert_eq!(
            last,
            Some((WORK, format!("faulted: {}", Fault::OutOfFuel))),
            "{what}: reported to the owner"
        );
        let stage = STAGES
            .iter()
            .position(|s| *s == e)
            .unwrap_or_else(|| panic!("{what}: effects {e:?} are no prefix of the handler's"));
        assert!(
            seen.last().is_none_or(|&l| l <= stage),
            "{what}: stage {stage} after {seen:?}"
        );
        seen.push(stage);
        // The same message without a limit completes.
        let (b, a) = t.one(None);
        assert_eq!(effects(&b, &a), STAGES[5], "{what}: then unlimited");
        assert_eq!(a.done - b.done, 1, "{what}: then unlimited");
        t.check_idle(&format!("{what}, then unlimited"));
    }
    seen
}

#[test]
fn a_handler_stopped_at_each_of_its_checks_leaves_the_runtime_consistent() {
    let interpreted = stops(false);
    // Every step of the handler was a place it stopped at least once
    // (the handler has checks between each of its effects).
    for s in 0..STAGES.len() - 1 {
        assert!(
            interpreted.contains(&s),
            "never stopped at stage {s}: {interpreted:?}"
        );
    }
    // Between its keep and its first send it reads, loops and calls a
    // helper: a check at each back-edge and call.
    let in_loop = interpreted.iter().filter(|&&s| s == 1).count();
    assert!(in_loop > 8, "{in_loop} checks in the loop: {interpreted:?}");
    let compiled = stops(true);
    assert_eq!(
        compiled, interpreted,
        "compiled code stops at the same points"
    );
}
