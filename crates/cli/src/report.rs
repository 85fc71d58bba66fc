//! `unet report`: run every command that regenerates a table or figure of
//! the papers and write one self-contained HTML page of the results
//! (`report/page.rs`): for each figure the command that made it, its SVG
//! plot where the command draws one (the paper's numbers beside ours, as
//! each command draws them), its rows (the `--json` output, the baselines
//! measured in the same run and the paper's figures among them), and the
//! machine it ran on. `--quick` runs each command's rough form; a figure
//! whose requirements the machine lacks (root for network namespaces, a
//! JDK 22 or later, Maven, the full Internet table beside the repository)
//! is listed as skipped with the reason, never left out.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

mod figures;
mod page;

use figures::{Need, Spec, SvgArg, FIGURES};

#[derive(clap::Args)]
pub struct Args {
    /// A rough version in a few minutes: each command's quick form.
    #[arg(long)]
    pub quick: bool,
    /// Only these figures (comma list of ids; `--list` shows them).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Where to write the page.
    #[arg(long, default_value = "unet-report.html")]
    pub out: PathBuf,
    /// List the figures (id, paper, what, requirements) and exit.
    #[arg(long)]
    pub list: bool,
}

/// What became of one figure.
pub(crate) enum Outcome {
    /// It ran: its rows (JSON objects), its other output, its SVG.
    Ran {
        rows: Vec<serde_json::Value>,
        text: String,
        svgs: Vec<String>,
    },
    /// The machine lacks a requirement.
    Skipped(String),
    /// The command failed: why, and the end of its error output.
    Failed(String),
}

/// One figure's result.
pub(crate) struct Done {
    pub spec: &'static Spec,
    pub command: String,
    pub secs: f64,
    pub outcome: Outcome,
}

pub fn run(a: Args) -> ExitCode {
    if a.list {
        for f in FIGURES {
            let needs: Vec<&str> = f.needs.iter().map(|n| n.name()).collect();
            println!(
                "{:<14} {:<10} {} (needs: {}; about {} s quick, {} s full)",
                f.id,
                f.paper,
                f.what,
                if needs.is_empty() {
                    "nothing".into()
                } else {
                    needs.join(", ")
                },
                f.secs.0,
                f.secs.1
            );
        }
        return ExitCode::SUCCESS;
    }
    for id in &a.only {
        if !FIGURES.iter().any(|f| f.id == id) {
            eprintln!("unet report: no figure {id:?} (`unet report --list` shows them)");
            return ExitCode::from(2);
        }
    }
    let chosen: Vec<&'static Spec> = FIGURES
        .iter()
        .filter(|f| a.only.is_empty() || a.only.iter().any(|o| o == f.id))
        .collect();
    let total: u32 = chosen
        .iter()
        .map(|f| if a.quick { f.secs.0 } else { f.secs.1 })
        .sum();
    eprintln!(
        "unet report: {} figure(s), {}, about {} min on a 2-core machine; writing {}",
        chosen.len(),
        if a.quick { "quick" } else { "full" },
        total.div_ceil(60),
        a.out.display()
    );
    let dir = std::env::temp_dir().join(format!("unet-report-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("unet report: {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    let start = Instant::now();
    let mut done = Vec::new();
    let mut spent = 0u32;
    for (k, f) in chosen.iter().enumerate() {
        let left = total.saturating_sub(spent);
        eprintln!(
            "[{}/{}] {} {}: {} (about {} s of {} s left)",
            k + 1,
            chosen.len(),
            f.paper,
            f.id,
            f.what,
            if a.quick { f.secs.0 } else { f.secs.1 },
            left
        );
        let d = run_one(f, a.quick, &dir);
        match &d.outcome {
            Outcome::Ran { rows, .. } => {
                eprintln!("      done in {:.0} s, {} rows", d.secs, rows.len())
            }
            Outcome::Skipped(why) => eprintln!("      skipped: {why}"),
            Outcome::Failed(why) => eprintln!("      failed after {:.0} s: {why}", d.secs),
        }
        spent += if a.quick { f.secs.0 } else { f.secs.1 };
        done.push(d);
    }
    let html = page::render(&done, a.quick, start.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = std::fs::write(&a.out, html) {
        eprintln!("unet report: {}: {e}", a.out.display());
        return ExitCode::from(1);
    }
    let failed = done
        .iter()
        .filter(|d| matches!(d.outcome, Outcome::Failed(_)))
        .count();
    eprintln!(
        "unet report: wrote {} in {:.0} s ({} ran, {} skipped, {failed} failed)",
        a.out.display(),
        start.elapsed().as_secs_f64(),
        done.iter()
            .filter(|d| matches!(d.outcome, Outcome::Ran { .. }))
            .count(),
        done.iter()
            .filter(|d| matches!(d.outcome, Outcome::Skipped(_)))
            .count(),
    );
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Run figure `f`'s command (its quick form if `quick`), files in `dir`.
fn run_one(f: &'static Spec, quick: bool, dir: &Path) -> Done {
    let mut args: Vec<String> = f.args.iter().map(|s| s.to_string()).collect();
    if quick {
        args.extend(f.quick.iter().map(|s| s.to_string()));
    }
    args.push("--json".into());
    let svg_path = dir.join(format!("{}.svg", f.id));
    let out_dir = dir.join(f.id);
    match f.svg {
        SvgArg::Flag => {
            args.push("--svg".into());
            args.push(svg_path.display().to_string());
        }
        SvgArg::OutDir | SvgArg::SvgDir => {
            args.push(
                if f.svg == SvgArg::OutDir {
                    "--out"
                } else {
                    "--svg"
                }
                .into(),
            );
            args.push(out_dir.display().to_string());
        }
    }
    // As a reader would type it: the report's own files as FILE and DIR.
    let command = format!("unet {}", args.join(" "))
        .replace(&svg_path.display().to_string(), "FILE.svg")
        .replace(&out_dir.display().to_string(), "DIR");
    let t0 = Instant::now();
    let done = |outcome| Done {
        spec: f,
        command: command.clone(),
        secs: t0.elapsed().as_secs_f64(),
        outcome,
    };
    if let Some(why) = f.needs.iter().find_map(|n| n.missing()) {
        return done(Outcome::Skipped(why));
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return done(Outcome::Failed(format!("this program's path: {e}"))),
    };
    let limit = Duration::from_secs(u64::from(if quick { f.secs.0 } else { f.secs.1 }) * 10 + 120);
    let outcome = match output_within(Command::new(exe).args(&args), limit) {
        Err(e) => Outcome::Failed(e),
        Ok((ok, out, err)) => {
            let mut rows = Vec::new();
            let mut text = String::new();
            for line in out.lines() {
                match serde_json::from_str::<serde_json::Value>(line) {
                    Ok(v) if v.is_object() => rows.push(v),
                    _ => {
                        text.push_str(line);
                        text.push('\n');
                    }
                }
            }
            if ok {
                let svgs = match f.svg {
                    SvgArg::Flag => std::fs::read_to_string(&svg_path).into_iter().collect(),
                    SvgArg::OutDir | SvgArg::SvgDir => svgs_in(&out_dir),
                };
                Outcome::Ran { rows, text, svgs }
            } else {
                let tail: Vec<&str> = err.lines().rev().take(12).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                Outcome::Failed(tail.join("\n"))
            }
        }
    };
    done(outcome)
}

/// Run `cmd` to its end or for at most `limit` (then kill it): whether it
/// succeeded, its standard output and its standard error.
fn output_within(cmd: &mut Command, limit: Duration) -> Result<(bool, String, String), String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    let mut out_pipe = child.stdout.take().expect("piped");
    let mut err_pipe = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out_pipe.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let end = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) if Instant::now() >= end => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!(
                    "stopped after {} s (its time limit)",
                    limit.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => break Err(format!("waiting for it: {e}")),
        }
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    status.map(|s| (s.success(), out, err))
}

impl Need {
    /// Why the machine lacks it, or None.
    fn missing(&self) -> Option<String> {
        match self {
            // SAFETY: geteuid has no preconditions and cannot fail.
            Need::Root if unsafe { libc::geteuid() } != 0 => {
                Some("needs root (network namespaces and raw sockets)".into())
            }
            Need::Root => which("ip")
                .is_none()
                .then(|| "needs `ip` (iproute2) for network namespaces".into()),
            Need::Jdk => crate::jdk::Jdk::find()
                .err()
                .map(|e| format!("needs a JDK 22 or later: {e}")),
            Need::Maven => which("mvn")
                .is_none()
                .then(|| "needs Maven (`mvn`) to build the Java side".into()),
            Need::SharedData => {
                let p = unet_router::table::full_table_path();
                (!p.exists()).then(|| {
                    format!(
                        "needs the full Internet table beside the repository ({})",
                        p.display()
                    )
                })
            }
        }
    }
}

/// The SVG files of `dir`, by name.
fn svgs_in(dir: &Path) -> Vec<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "svg"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect()
}

/// `tool` on the PATH.
fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(tool))
            .find(|f| f.is_file())
    })
}
