//! What the paper reads off the event graph by eye (section 6): the
//! period between packets (the throughput) and the time of one packet
//! through the adapter (the latency), each with its spread, computed
//! from the events' message ids.
//!
//! A message's events are those that carry its id. It *begins* with the
//! start of its first event and *ends* with the end of its last. The
//! period is the time between the beginnings of consecutive messages
//! (in the order they began); the latency is each message's end less its
//! beginning. Events of no message (id 0) are drawn but not counted.
//!
//! When the trace holds SPINE's own events (system handlers and
//! extension handlers), the messages are SPINE's: the loop's events
//! (types [`TRACE_LOOP_FIRST`]`..=63`, the parts' turns that contain
//! SPINE's events) are drawn but not counted either.

use std::collections::BTreeMap;
use std::fmt::Write;

use unet_engine::{TraceDump, TraceEvent, TRACE_LOOP_FIRST};

/// The spread of a set of durations (ns): nearest-rank percentiles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// How many durations.
    pub n: usize,
    /// The 10th percentile.
    pub p10: u64,
    /// The median.
    pub median: u64,
    /// The 90th percentile.
    pub p90: u64,
    /// The mean.
    pub mean: f64,
    /// The largest.
    pub max: u64,
}

impl Spread {
    /// The spread of `v` (None when empty).
    pub fn of(mut v: Vec<u64>) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let n = v.len();
        // Nearest rank: the value at (q/100)(n-1), rounded.
        let at = |q: usize| v[(q * (n - 1) + 50) / 100];
        Some(Spread {
            n,
            p10: at(10),
            median: at(50),
            p90: at(90),
            mean: v.iter().map(|&x| x as f64).sum::<f64>() / n as f64,
            max: v[n - 1],
        })
    }
}

/// One message's way through the adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// Its id.
    pub id: u32,
    /// The start of its first event, ns.
    pub begin: u64,
    /// The end of its last event, ns.
    pub end: u64,
    /// Its events.
    pub events: usize,
    /// The messages it stands for: more than one when a loop part's
    /// turn handled several at once (numbered from `id`).
    pub items: u32,
}

/// What the trace says.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// Its messages, in the order they began.
    pub messages: Vec<Message>,
    /// The time between the beginnings of consecutive messages.
    pub period: Option<Spread>,
    /// The time of each message through the adapter.
    pub latency: Option<Spread>,
}

/// Analyse `events` (any order).
pub fn analyse(events: &[TraceEvent]) -> Analysis {
    let spine = events.iter().any(|e| !is_loop(e.ty));
    let mut by_msg: BTreeMap<u32, Message> = BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| e.msg != 0 && !(spine && is_loop(e.ty)))
    {
        let end = e.start_ns.saturating_add(e.len_ns);
        let m = by_msg.entry(e.msg).or_insert(Message {
            id: e.msg,
            begin: e.start_ns,
            end,
            events: 0,
            items: 0,
        });
        m.begin = m.begin.min(e.start_ns);
        m.end = m.end.max(end);
        m.events += 1;
        m.items = m.items.max(u32::from(e.items));
    }
    let mut messages: Vec<Message> = by_msg.into_values().collect();
    messages.sort_by_key(|m| (m.begin, m.id));
    let period = Spread::of(
        messages
            .windows(2)
            .map(|w| w[1].begin - w[0].begin)
            .collect(),
    );
    let latency = Spread::of(messages.iter().map(|m| m.end - m.begin).collect());
    Analysis {
        messages,
        period,
        latency,
    }
}

/// Whether `ty` is one of the loop's own event types.
pub fn is_loop(ty: u16) -> bool {
    (TRACE_LOOP_FIRST..64).contains(&ty)
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn spread_json(s: &Option<Spread>) -> serde_json::Value {
    match s {
        None => serde_json::Value::Null,
        Some(s) => serde_json::json!({
            "n": s.n, "p10_ns": s.p10, "median_ns": s.median, "p90_ns": s.p90, "mean_ns": s.mean,
        }),
    }
}

impl Analysis {
    /// The message to follow through the graph: the middle one of those
    /// that began (the paper follows its packet 2 of 3).
    pub fn followed(&self) -> Option<&Message> {
        self.messages.get(self.messages.len() / 2)
    }

    /// The messages the traced events handled: [`Analysis::messages`]
    /// counts a loop part's turn that handled several at once as one.
    pub fn carried(&self) -> u64 {
        self.messages
            .iter()
            .map(|m| u64::from(m.items.max(1)))
            .sum()
    }

    /// The figures as one JSON object.
    pub fn to_json(&self, d: &TraceDump) -> serde_json::Value {
        serde_json::json!({
            "events": d.events.len(),
            "recorded": d.recorded,
            "overwritten": d.overwritten,
            "messages": self.messages.len(),
            "carried": self.carried(),
            "period": spread_json(&self.period),
            "latency": spread_json(&self.latency),
            "throughput_per_s": self.period.map(|p| if p.median > 0 { 1e9 / p.median as f64 } else { 0.0 }),
        })
    }

    /// The figures as text.
    pub fn text(&self, d: &TraceDump) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} events ({} recorded, {} overwritten), {} messages ({} carried)",
            d.events.len(),
            d.recorded,
            d.overwritten,
            self.messages.len(),
            self.carried()
        );
        let line = |s: &mut String, what: &str, sp: &Option<Spread>| {
            let _ = match sp {
                Some(p) => writeln!(
                    s,
                    "{what:<8} median {:>9.3} us  p10 {:>9.3} us  p90 {:>9.3} us  mean {:>9.3} us  (n {})",
                    us(p.median),
                    us(p.p10),
                    us(p.p90),
                    p.mean / 1000.0,
                    p.n
                ),
                None => writeln!(s, "{what:<8} (too few messages)"),
            };
        };
        line(&mut s, "period", &self.period);
        line(&mut s, "latency", &self.latency);
        if let Some(p) = self.period.filter(|p| p.median > 0) {
            let _ = writeln!(
                s,
                "throughput {:.0} messages/s (median period)",
                1e9 / p.median as f64
            );
        }
        s
    }
}
