//! `unet bench udm`'s Table 6: the applications of Figures 7-8 run
//! standalone (their node processes alone, no null job, no gang
//! scheduler): the runtime, the messages, the mean time between
//! communication events and the mean time per handler, beside the paper's
//! columns for the applications it has (`barrier`, `enum`).
//!
//! As in the paper, the time between communication events is the runtime
//! times the nodes over the messages (its figures agree: barrier's 18.5 M
//! cycles × 8 / 240 177 messages = 615); the time per handler is measured
//! in the node processes (`--time-handlers`: from the start of each
//! extract to its handler's return), summed over the nodes and divided by
//! the messages they handled.

use super::figures::{app_extra, check_results};
use super::*;

/// One standalone run of an application, summed over its nodes.
#[derive(Clone, Debug)]
struct SoloRun {
    runtime_ns: f64,
    /// Messages taken (fast and buffered) and sent.
    taken: u64,
    sent: u64,
    buffered: u64,
    /// Messages handled and their time, extract to handler return.
    handled: u64,
    handler_ns: u64,
}

/// The paper's Table 6 row of an application: data set, cycles, messages,
/// cycles between communication events, cycles per handler (eight nodes).
fn paper_row(app: App) -> Option<(&'static str, f64, u64, f64, f64)> {
    match app {
        App::Barrier => Some(("10000 barriers", 18.5e6, 240_177, 615.0, 149.0)),
        App::Enum => Some(("6 pegs/side", 72.7e6, 610_148, 953.0, 320.0)),
        _ => None,
    }
}

/// The paper's nodes (Table 6: eight).
const PAPER_NODES: u32 = 8;

/// Our data set of `app`, as `app_extra` sets it.
fn data_set(p: &Plan, app: App) -> String {
    match app {
        App::Barrier => format!("{} barriers", p.q(p.a.barriers, 1_000_000, 200)),
        App::Enum => format!("{} pegs/side", p.q(p.a.pegs, 6, 5)),
        App::Kv => format!("{} requests/node", p.q(p.a.kv_requests, 1_000_000, 300)),
        _ => String::new(),
    }
}

/// Runs `app` on `p.nodes` node processes alone.
fn solo_run(p: &Plan, app: App, extra: &[String]) -> Res<SoloRun> {
    let h = Host::start()?;
    let t = plan_job(&h, p)?;
    let mut extra = extra.to_vec();
    extra.push("--time-handlers".into());
    let mut nodes = Vec::new();
    for r in 0..p.nodes {
        nodes.push(NodeProc::spawn(Some((&h, t)), r, &extra, app)?);
    }
    let (t0, end, rows) = go_and_collect(&mut nodes, p.a.quick)?;
    let results: Vec<Value> = rows.iter().map(|v| v["result"].clone()).collect();
    check_results(app, p, &results)?;
    let sum = |k: &str| rows.iter().map(|v| v[k].as_u64().unwrap_or(0)).sum::<u64>();
    let buffered = sum("buffered_taken");
    Ok(SoloRun {
        runtime_ns: (end - t0).as_nanos() as f64,
        taken: sum("fast_msgs") + buffered,
        sent: sum("sent"),
        buffered,
        handled: sum("handled"),
        handler_ns: sum("handler_ns"),
    })
}

pub(super) fn table6(p: &Plan) -> Res<()> {
    let prog = Progress::new();
    let mut rows = Vec::new();
    for &arg in &p.a.apps {
        let app = arg.app();
        let extra = app_extra(p, app);
        let mut runs = Vec::new();
        for r in 0..p.runs {
            prog.show(&format!(
                "table 6: {} standalone, run {}/{}",
                app.name(),
                r + 1,
                p.runs
            ));
            let s = solo_run(p, app, &extra)?;
            if s.taken != s.sent || s.handled != s.taken {
                return Err(format!(
                    "{}: {} messages sent, {} taken, {} handled",
                    app.name(),
                    s.sent,
                    s.taken,
                    s.handled
                ));
            }
            runs.push(s);
        }
        rows.push((app, runs));
    }
    prog.clear();
    if !p.a.json {
        println!(
            "Table 6: the applications standalone ({} nodes, fast rings of {}, median of {} runs; \
             the paper: eight nodes, cycles of 50 ns)",
            p.nodes, p.a.fast_queue, p.runs
        );
        println!(
            "{:<8} {:<22} {:>10} {:>10} {:>9} {:>9}   {:>8} {:>10} {:>6} {:>6}",
            "app",
            "data set",
            "time ms",
            "messages",
            "Tbetw ns",
            "Thand ns",
            "paper ms",
            "messages",
            "Tbetw",
            "Thand"
        );
    }
    let mut svg = Vec::new();
    for (app, runs) in &rows {
        let med = |f: &dyn Fn(&SoloRun) -> f64| median_f64(&runs.iter().map(f).collect::<Vec<_>>());
        let runtime = med(&|r| r.runtime_ns);
        let messages = med(&|r| r.taken as f64);
        let buffered = med(&|r| r.buffered as f64);
        // Per run, then the median: each run's own ratio.
        let t_betw = med(&|r| r.runtime_ns * p.nodes as f64 / r.taken.max(1) as f64);
        let t_hand = med(&|r| r.handler_ns as f64 / r.handled.max(1) as f64);
        let paper = paper_row(*app);
        svg.push(tables_svg::AppRow {
            name: app.name(),
            between_ns: t_betw,
            handler_ns: t_hand,
            paper: paper.map(|r| (r.3, r.4)),
        });
        if !p.a.json {
            let (pms, pmsg, pb, ph) = match paper {
                Some((_, cyc, m, b, h)) => (
                    format!("{:.0}", cyc * PAPER_NS_PER_CYCLE / 1e6),
                    m.to_string(),
                    format!("{b:.0}"),
                    format!("{h:.0}"),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            println!(
                "{:<8} {:<22} {:>10.1} {:>10.0} {:>9.0} {:>9.0}   {:>8} {:>10} {:>6} {:>6}",
                app.name(),
                data_set(p, *app),
                runtime / 1e6,
                messages,
                t_betw,
                t_hand,
                pms,
                pmsg,
                pb,
                ph
            );
        }
        emit_row(
            p,
            json!({"bench": "udm", "table": 6, "row": app.name(), "app": app.name(),
                   "nodes": p.nodes, "data_set": data_set(p, *app), "runs": runs.len(),
                   "runtime_ns": runtime, "messages": messages, "buffered": buffered,
                   "t_between_ns": t_betw, "t_handler_ns": t_hand,
                   "runs_messages": runs.iter().map(|r| r.taken).collect::<Vec<_>>(),
                   "runs_sent": runs.iter().map(|r| r.sent).collect::<Vec<_>>(),
                   "runs_handled": runs.iter().map(|r| r.handled).collect::<Vec<_>>(),
                   "paper_nodes": paper.map(|_| PAPER_NODES),
                   "paper_data_set": paper.map(|r| r.0),
                   "paper_cycles": paper.map(|r| r.1),
                   "paper_ns": paper.map(|r| r.1 * PAPER_NS_PER_CYCLE),
                   "paper_messages": paper.map(|r| r.2),
                   "paper_t_between_cycles": paper.map(|r| r.3),
                   "paper_t_between_ns": paper.map(|r| r.3 * PAPER_NS_PER_CYCLE),
                   "paper_t_handler_cycles": paper.map(|r| r.4),
                   "paper_t_handler_ns": paper.map(|r| r.4 * PAPER_NS_PER_CYCLE)}),
        );
    }
    if !p.a.json {
        println!(
            "Tbetw: runtime x nodes / messages, as the paper's; Thand: extract to handler \
             return, per message handled. The paper's barrier is 10000 barriers, its enum 6 \
             pegs a side; kv stands in for its CRL programs, whose figures are not comparable"
        );
        println!();
    }
    if let Some(dir) = &p.a.svg {
        tables_svg::table6_svg(dir, p.nodes, &svg)?;
    }
    Ok(())
}
