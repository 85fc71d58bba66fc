//! `unet bench udm`'s Figures 7-10: the applications (`barrier`, `enum`,
//! `kv`, synth-N) multiprogrammed under the gang scheduler, each run's
//! share of messages buffered, runtime and buffer pages, medians over the
//! runs, against the paper's.

use super::*;

/// What one gang-scheduled run of an application gave.
#[derive(Clone, Debug)]
struct GangRun {
    runtime: f64,
    fast: u64,
    buffered: u64,
    pages_max: u64,
    /// The most bytes any node's buffer held at once.
    held_max: u64,
    /// Switches to buffered mode: a full fast ring (none since a full
    /// ring holds its sender instead), the atomicity timeout (messages
    /// waiting, none taken), a stopped node.
    switch_full: u64,
    switch_timeout: u64,
    switch_stopped: u64,
    /// Overflow advice the scheduler heard (answers naming nodes), and
    /// the switches it made early on it.
    advised: u64,
    first: u64,
    results: Vec<Value>,
}

impl GangRun {
    fn buffered_pct(&self) -> f64 {
        100.0 * self.buffered as f64 / (self.fast + self.buffered).max(1) as f64
    }
}

/// Runs `app` on `p.nodes` node processes against as many null
/// processes, under the gang scheduler with `skew` (fraction of a slice).
fn gang_run(p: &Plan, app: App, extra: &[String], skew: f64) -> Res<GangRun> {
    let h = Host::start()?;
    let t = plan_job(&h, p)?;
    let mut apps = Vec::new();
    for r in 0..p.nodes {
        apps.push(NodeProc::spawn(Some((&h, t)), r, extra, app)?);
    }
    let mut nulls = Vec::new();
    for r in 0..p.nodes {
        nulls.push(NodeProc::spawn(None, r, &[], App::Null)?);
    }
    let udm = (!p.a.silent_scheduler).then(|| (h.session.clone(), t));
    let gang = Gang::start(
        vec![
            GangJob {
                pids: apps.iter().map(NodeProc::pid).collect(),
                udm,
                groups: false,
            },
            GangJob {
                pids: nulls.iter().map(NodeProc::pid).collect(),
                udm: None,
                groups: false,
            },
        ],
        GangConfig {
            slice: Duration::from_millis(p.a.slice_ms),
            skew,
        },
    );
    let (t0, end, rows) = go_and_collect(&mut apps, p.a.quick)?;
    let log = gang.finish();
    if let Some(e) = log.errors.first() {
        return Err(format!("the engine refused the scheduler's notice: {e}"));
    }
    drop(nulls);
    let u = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    Ok(GangRun {
        runtime: (end - t0).as_secs_f64(),
        fast: rows.iter().map(|v| u(v, "fast_msgs")).sum(),
        buffered: rows.iter().map(|v| u(v, "buffered_taken")).sum(),
        pages_max: rows
            .iter()
            .map(|v| u(v, "buffer_pages_max"))
            .max()
            .unwrap_or(0),
        held_max: rows
            .iter()
            .map(|v| u(v, "buffer_held_bytes_max"))
            .max()
            .unwrap_or(0),
        switch_full: rows.iter().map(|v| u(v, "switch_queue_full")).sum(),
        switch_timeout: rows.iter().map(|v| u(v, "switch_atomicity_timeout")).sum(),
        switch_stopped: rows.iter().map(|v| u(v, "switch_descheduled")).sum(),
        advised: log.advice.len() as u64,
        first: log.switches.iter().filter(|s| s.first).count() as u64,
        results: rows.iter().map(|v| v["result"].clone()).collect(),
    })
}

/// A point of a figure: medians over the runs.
struct Point {
    x: f64,
    buffered_pct: f64,
    runtime: f64,
    msgs: f64,
    pages_max: u64,
    /// Pages the most messages any node's buffer held at once needed.
    pages_needed: u64,
    switch_full: f64,
    switch_timeout: f64,
    switch_stopped: f64,
    advised: f64,
    first: f64,
}

fn median_point(x: f64, runs: &[GangRun]) -> Point {
    let med = |f: &dyn Fn(&GangRun) -> f64| median_f64(&runs.iter().map(f).collect::<Vec<_>>());
    Point {
        x,
        buffered_pct: med(&GangRun::buffered_pct),
        runtime: med(&|r| r.runtime),
        msgs: med(&|r| (r.fast + r.buffered) as f64),
        pages_max: runs.iter().map(|r| r.pages_max).max().unwrap_or(0),
        pages_needed: runs
            .iter()
            .map(|r| r.held_max.div_ceil(4096))
            .max()
            .unwrap_or(0),
        switch_full: med(&|r| r.switch_full as f64),
        switch_timeout: med(&|r| r.switch_timeout as f64),
        switch_stopped: med(&|r| r.switch_stopped as f64),
        advised: med(&|r| r.advised as f64),
        first: med(&|r| r.first as f64),
    }
}

/// The paper's enum: communication events a node per slice, from its
/// slice (500 000 cycles, section 5) over Table 6's 953 cycles between
/// events. Derived from the two, not printed in the paper.
const PAPER_ENUM_PER_SLICE: f64 = 500_000.0 / 953.0;

/// Messages a node took per slice of its own job (the job runs one slice
/// in two against the null job).
fn per_slice(p: &Plan, q: &Point) -> f64 {
    let slices = q.runtime * 1e3 / (2.0 * p.a.slice_ms as f64);
    q.msgs / p.nodes as f64 / slices.max(1.0)
}

pub(super) fn app_extra(p: &Plan, app: App) -> Vec<String> {
    let (k, v) = match app {
        App::Barrier => ("--count", p.q(p.a.barriers, 1_000_000, 200)),
        App::Enum => {
            return vec![
                "--pegs".into(),
                p.q(p.a.pegs, 6, 5).to_string(),
                "--expand-ns".into(),
                p.a.enum_expand_ns.to_string(),
            ]
        }
        App::Kv => ("--count", p.q(p.a.kv_requests, 1_000_000, 300)),
        _ => return vec![],
    };
    vec![k.to_string(), v.to_string()]
}

/// What an application's run must have computed (`results`: its nodes'
/// reports).
pub(super) fn check_results(app: App, p: &Plan, results: &[Value]) -> Res<()> {
    if app == App::Enum {
        let got: u64 = results
            .iter()
            .map(|v| v["positions"].as_u64().unwrap_or(0))
            .sum();
        let want = match p.q(p.a.pegs, 6, 5) {
            5 => Some(3016),
            6 => Some(291_987),
            _ => None,
        };
        if want.is_some_and(|w| w != got) {
            return Err(format!("enum found {got} positions, not {want:?}"));
        }
    }
    Ok(())
}

pub(super) fn fig78(p: &Plan) -> Res<()> {
    let prog = Progress::new();
    let skews = p.a.skews.clone().unwrap_or(if p.a.quick {
        vec![0.0, 20.0]
    } else {
        vec![0.0, 2.0, 5.0, 10.0, 20.0, 40.0]
    });
    if skews.iter().any(|s| !(0.0..100.0).contains(s)) {
        return Err("--skews: percentages from 0 to below 100".into());
    }
    let mut series = Vec::new();
    for &arg in &p.a.apps {
        let app = arg.app();
        let extra = app_extra(p, app);
        let mut by_skew: Vec<Vec<GangRun>> = vec![Vec::new(); skews.len()];
        for r in 0..p.runs {
            for (i, &s) in skews.iter().enumerate() {
                prog.show(&format!(
                    "figures 7-8: {} skew {s}% run {}/{}",
                    app.name(),
                    r + 1,
                    p.runs
                ));
                let g = gang_run(p, app, &extra, s / 100.0)?;
                check_results(app, p, &g.results)?;
                by_skew[i].push(g);
            }
        }
        let pts: Vec<Point> = skews
            .iter()
            .zip(&by_skew)
            .map(|(&s, runs)| median_point(s, runs))
            .collect();
        series.push((app, pts));
    }
    prog.clear();
    if !p.a.json {
        println!(
            "Figures 7-8: applications against a null job, gang-scheduled ({} nodes, {} ms slices, \
             fast rings of {}, median of {} runs; switches to buffered mode by cause)",
            p.nodes, p.a.slice_ms, p.a.fast_queue, p.runs
        );
        println!(
            "{:<8} {:>6}  {:>10} {:>10}  {:>9} {:>9}  {:>6} {:>6}  {:>8} {:>8} {:>8}",
            "app",
            "skew%",
            "buffered%",
            "messages",
            "runtime s",
            "relative",
            "pages",
            "needed",
            "sw full",
            "sw time",
            "sw stop"
        );
    }
    for (app, pts) in &series {
        let base = pts.first().map_or(f64::NAN, |q| q.runtime);
        for q in pts {
            let rel = q.runtime / base;
            if !p.a.json {
                println!(
                    "{:<8} {:>6.1}  {:>10.2} {:>10.0}  {:>9.3} {:>9.3}  {:>6} {:>6}  {:>8.0} {:>8.0} {:>8.0}",
                    app.name(),
                    q.x,
                    q.buffered_pct,
                    q.msgs,
                    q.runtime,
                    rel,
                    q.pages_max,
                    q.pages_needed,
                    q.switch_full,
                    q.switch_timeout,
                    q.switch_stopped
                );
            }
            emit_row(
                p,
                json!({"bench": "udm", "figure": "7-8", "app": app.name(), "nodes": p.nodes,
                       "slice_ms": p.a.slice_ms, "skew_pct": q.x, "buffered_pct": q.buffered_pct,
                       "messages": q.msgs, "runtime_s": q.runtime, "relative_runtime": rel,
                       "pages_max": q.pages_max, "pages_needed": q.pages_needed, "runs": p.runs,
                       "paper_pages_max_below": 7,
                       "fast_queue": p.a.fast_queue, "switch_queue_full": q.switch_full,
                       "switch_atomicity_timeout": q.switch_timeout,
                       "switch_descheduled": q.switch_stopped, "overflow_advice": q.advised,
                       "switches_first": q.first, "scheduler_notices": !p.a.silent_scheduler,
                       "paper_relative_runtime": (*app == App::Barrier).then(|| paper_barrier(q.x)),
                       "msgs_per_slice_node": per_slice(p, q),
                       "enum_expand_ns": (*app == App::Enum).then_some(p.a.enum_expand_ns),
                       "paper_msgs_per_slice_node": (*app == App::Enum).then_some(PAPER_ENUM_PER_SLICE)}),
            );
        }
    }
    let pages = series
        .iter()
        .flat_map(|(_, v)| v.iter().map(|q| q.pages_max))
        .max()
        .unwrap_or(0);
    let needed = series
        .iter()
        .flat_map(|(_, v)| v.iter().map(|q| q.pages_needed))
        .max()
        .unwrap_or(0);
    if !p.a.json {
        println!(
            "most virtual buffer pages any node kept: {pages}; needed by the most messages one \
             held at once: {needed} (the paper: under seven)"
        );
        for (app, pts) in series.iter().filter(|(a, _)| *a == App::Enum) {
            println!(
                "{}: {} messages a node per slice of its own ({} ns of work added per position; \
                 the paper's enum: about {PAPER_ENUM_PER_SLICE:.0}, its 500 000-cycle slice over \
                 Table 6's 953 cycles between events)",
                app.name(),
                pts.iter()
                    .map(|q| format!("{:.0} at {}%", per_slice(p, q), q.x))
                    .collect::<Vec<_>>()
                    .join(", "),
                p.a.enum_expand_ns
            );
        }
        println!(
            "the paper (no figures given in its text): enum's share rises linearly with the \
             skew from near zero, the synchronising applications buffer a small constant share; \
             barrier slows down by about the inverse of the time its nodes share, \
             1 / (1 - skew): {}",
            skews
                .iter()
                .map(|s| format!("{:.2} at {s}%", paper_barrier(*s)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!();
    }
    let lines = |f: fn(&Point, f64) -> f64| -> Vec<Series> {
        series
            .iter()
            .map(|(app, pts)| {
                let base = pts.first().map_or(f64::NAN, |q| q.runtime);
                Series {
                    name: app.name().to_string(),
                    points: pts.iter().map(|q| (q.x, f(q, base))).collect(),
                }
            })
            .collect()
    };
    std::fs::create_dir_all(&p.a.out).map_err(|e| format!("{}: {e}", p.a.out.display()))?;
    plot::write_svg(
        &Figure {
            title: &format!(
                "Figure 7: messages buffered against skew ({} nodes)",
                p.nodes
            ),
            x_desc: "skew (% of a time slice)",
            y_desc: "messages buffered (%)",
            lines: lines(|q, _| q.buffered_pct),
            paper: paper_fig7(&series),
            scale: Scale::Linear,
        },
        &p.a.out.join("figure7.svg"),
    )?;
    plot::write_svg(
        &Figure {
            title: &format!(
                "Figure 8: runtime relative to zero skew ({} nodes)",
                p.nodes
            ),
            x_desc: "skew (% of a time slice)",
            y_desc: "relative runtime",
            lines: lines(|q, base| q.runtime / base),
            paper: vec![Series {
                name: "paper, barrier: 1 / (1 - skew)".into(),
                points: skews.iter().map(|&s| (s, paper_barrier(s))).collect(),
            }],
            scale: Scale::Linear,
        },
        &p.a.out.join("figure8.svg"),
    )?;
    plot::write_svg(
        &Figure {
            title: &format!(
                "Figure 7: virtual buffer pages a node needed, most of any node ({} nodes)",
                p.nodes
            ),
            x_desc: "skew (% of a time slice)",
            y_desc: "pages (4 KiB) of the most bytes one buffer held at once",
            lines: series
                .iter()
                .map(|(app, pts)| Series {
                    name: app.name().to_string(),
                    points: pts.iter().map(|q| (q.x, q.pages_needed as f64)).collect(),
                })
                .collect(),
            paper: vec![Series {
                name: "the paper: under seven pages a node (its bound, every run)".into(),
                points: skews.iter().map(|&s| (s, 7.0)).collect(),
            }],
            scale: Scale::Linear,
        },
        &p.a.out.join("figure7-pages.svg"),
    )?;
    Ok(())
}

/// Barrier's runtime relative to zero skew as the paper has it ("its
/// slowdown is almost exactly the inverse of the skew"): the inverse of
/// the share of a slice its nodes run together, at `skew` percent.
fn paper_barrier(skew: f64) -> f64 {
    1.0 / (1.0 - skew / 100.0)
}

/// Figure 7's shape as the paper states it (its text gives no value):
/// enum's share linear in the skew from zero, drawn through our own
/// enum's share at the largest skew; the synchronising applications'
/// share constant, drawn at our own mean. A shape to compare ours with,
/// not the paper's numbers.
fn paper_fig7(series: &[(App, Vec<Point>)]) -> Vec<Series> {
    let mut out = Vec::new();
    for (app, pts) in series {
        let (Some(last), false) = (pts.last(), pts.is_empty()) else {
            continue;
        };
        let points = match app {
            App::Enum if last.x > 0.0 => pts
                .iter()
                .map(|q| (q.x, last.buffered_pct * q.x / last.x))
                .collect(),
            App::Barrier | App::Kv => {
                let mean = pts.iter().map(|q| q.buffered_pct).sum::<f64>() / pts.len() as f64;
                pts.iter().map(|q| (q.x, mean)).collect()
            }
            _ => continue,
        };
        let shape = if *app == App::Enum {
            "linear in skew"
        } else {
            "constant"
        };
        out.push(Series {
            name: format!("paper's shape, {}: {shape}", app.name()),
            points,
        });
    }
    out
}

pub(super) fn fig910(p: &Plan) -> Res<()> {
    let prog = Progress::new();
    let intervals = p.a.intervals_ns.clone().unwrap_or(if p.a.quick {
        vec![1000, 8000]
    } else {
        vec![500, 1000, 2000, 4000, 8000, 16000]
    });
    let costs = p.a.costs_ns.clone().unwrap_or(if p.a.quick {
        vec![0, 4000]
    } else {
        vec![0, 1000, 2000, 4000, 8000]
    });
    let reqs = p.q(p.a.synth_requests, 20_000, 1000);
    let skew = p.a.synth_skew / 100.0;
    if !(0.0..1.0).contains(&skew) {
        return Err("--synth-skew: a percentage from 0 to below 100".into());
    }
    let extra = |n: u64, interval: u64, cost: u64| -> Vec<String> {
        [
            ("--count", reqs),
            ("--group", n),
            ("--interval-ns", interval),
            ("--handler-ns", p.a.handler_ns),
            ("--buffer-cost-ns", cost),
        ]
        .iter()
        .flat_map(|(k, v)| [k.to_string(), v.to_string()])
        .collect()
    };
    // Per figure: per N, the points.
    type Curves = Vec<(u64, Vec<Point>)>;
    let mut figs: Vec<(u8, Curves)> = vec![(9, vec![]), (10, vec![])];
    for (fig, out) in figs.iter_mut() {
        let xs = if *fig == 9 { &intervals } else { &costs };
        for &n in &p.a.synth_n {
            let mut by_x: Vec<Vec<GangRun>> = vec![Vec::new(); xs.len()];
            for r in 0..p.runs {
                for (i, &x) in xs.iter().enumerate() {
                    prog.show(&format!(
                        "figure {fig}: synth-{n} x {x} run {}/{}",
                        r + 1,
                        p.runs
                    ));
                    let e = if *fig == 9 {
                        extra(n, x, 0)
                    } else {
                        extra(n, p.a.cost_interval_ns, x)
                    };
                    by_x[i].push(gang_run(p, App::Synth, &e, skew)?);
                }
            }
            let pts = xs
                .iter()
                .zip(&by_x)
                .map(|(&x, runs)| median_point(x as f64, runs))
                .collect();
            out.push((n, pts));
        }
    }
    prog.clear();
    std::fs::create_dir_all(&p.a.out).map_err(|e| format!("{}: {e}", p.a.out.display()))?;
    for (fig, out) in &figs {
        let (xname, xkey) = if *fig == 9 {
            ("mean interval between sends (ns)", "interval_ns")
        } else {
            ("added cost per buffered message (ns)", "added_cost_ns")
        };
        if !p.a.json {
            println!(
                "Figure {fig}: synth-N, messages buffered against the {} ({} nodes, skew {}%, \
                 handler {} ns{}, {} requests a node, median of {} runs)",
                if *fig == 9 {
                    "send interval"
                } else {
                    "buffered path's added cost"
                },
                p.nodes,
                p.a.synth_skew,
                p.a.handler_ns,
                if *fig == 10 {
                    format!(", interval {} ns", p.a.cost_interval_ns)
                } else {
                    String::new()
                },
                reqs,
                p.runs
            );
            println!(
                "{:<11} {:>13}  {:>10} {:>10}  {:>9}  {:>6}",
                "", xkey, "buffered%", "messages", "runtime s", "pages"
            );
        }
        for (n, pts) in out {
            for q in pts {
                if !p.a.json {
                    println!(
                        "synth-{n:<5} {:>13.0}  {:>10.2} {:>10.0}  {:>9.3}  {:>6}",
                        q.x, q.buffered_pct, q.msgs, q.runtime, q.pages_max
                    );
                }
                emit_row(
                    p,
                    json!({"bench": "udm", "figure": fig, "app": format!("synth-{n}"),
                           "nodes": p.nodes, "skew_pct": p.a.synth_skew, xkey: q.x,
                           "handler_ns": p.a.handler_ns, "buffered_pct": q.buffered_pct,
                           "messages": q.msgs, "runtime_s": q.runtime, "pages_max": q.pages_max,
                           "runs": p.runs, "fast_queue": p.a.fast_queue,
                           "switch_queue_full": q.switch_full,
                           "switch_atomicity_timeout": q.switch_timeout,
                           "switch_descheduled": q.switch_stopped}),
                );
            }
        }
        if !p.a.json {
            println!();
        }
        let lines: Vec<Series> = out
            .iter()
            .map(|(n, pts)| Series {
                name: format!("synth-{n}"),
                points: pts.iter().map(|q| (q.x, q.buffered_pct)).collect(),
            })
            .collect();
        plot::write_svg(
            &Figure {
                title: &format!(
                    "Figure {fig}: synth-N, messages buffered ({} nodes)",
                    p.nodes
                ),
                x_desc: xname,
                y_desc: "messages buffered (%)",
                lines,
                paper: vec![],
                scale: Scale::Linear,
            },
            &p.a.out.join(format!("figure{fig}.svg")),
        )?;
    }
    Ok(())
}
