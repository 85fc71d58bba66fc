//! `unet applet check|run`: load JIVE applets (Java class files) as the
//! network interface would, outside of it.
//!
//! Exit codes: 0 success; 1 usage or I/O error (unreadable file, unknown
//! method, wrong number of arguments); 2 a class was rejected at load;
//! 3 a fault while running (including an exhausted budget).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use jive::{Class, Limits, Natives, Vm};

/// The host state natives see when an applet runs from the command line:
/// none (the `test` domain needs none).
type Host = ();

#[derive(Subcommand)]
pub enum Command {
    /// Load and verify class files: is each inside the JIVE subset?
    ///
    /// Prints one line per file, `FILE: ok` or `FILE: rejected: REASON` (the
    /// reason names the method and bytecode offset when there is one), or
    /// `FILE: error: ...` when it cannot be read. Exit 0 when all are ok, 2
    /// otherwise. The `test` native domain is granted unless --domain says
    /// otherwise.
    Check(CheckArgs),
    /// Run one method of an applet and print its int result.
    ///
    /// Loads the class (its static initializer, then its no-argument
    /// constructor run), calls the named method (static or instance) with the
    /// int arguments and prints the int result (nothing for a void method).
    /// Exit codes: 0 done; 1 usage error (unreadable file, unknown method,
    /// wrong number of arguments); 2 the class is rejected (`rejected: REASON`
    /// on stderr); 3 a fault (`fault: REASON (in method M at offset N)` on
    /// stderr), including an exhausted fuel budget, call depth or heap quota.
    Run(RunArgs),
    /// Attach a U-Net/SLE applet to an endpoint of a running engine.
    ///
    /// The engine loads it with the `unet-sle` domain, runs its constructor,
    /// and from then on runs `doTx` on every send and `doRx` on every
    /// arrival of that endpoint (one of this user's). Replaces an applet
    /// already attached. Exit 0 attached; 2 the class is rejected
    /// (`rejected: REASON` on stderr); 1 any other error.
    Attach(AttachArgs),
    /// Detach the applet of an endpoint of a running engine.
    Detach(DetachArgs),
}

#[derive(Args)]
pub struct AttachArgs {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The endpoint's id (see `unet stat`).
    #[arg(long, value_name = "ID")]
    endpoint: u32,
    /// The applet's class file.
    #[arg(value_name = "FILE.class")]
    file: PathBuf,
    /// Work budget per invocation (default: the engine's, 20 000 units).
    #[arg(long, value_name = "N")]
    fuel: Option<u64>,
    /// Heap quota in bytes (default: the engine's, 1 MiB).
    #[arg(long, value_name = "BYTES")]
    heap: Option<u32>,
}

#[derive(Args)]
pub struct DetachArgs {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The endpoint's id.
    #[arg(long, value_name = "ID")]
    endpoint: u32,
}

/// Which native-method domains the applet may call.
#[derive(Args)]
pub struct DomainArgs {
    /// Grant the applet the natives of domain NAME (static methods of
    /// `unet.sle.Natives`); repeatable. The command line knows the `test`
    /// domain (nop()V, id(I)I, sum([BII)I, fill([BII)V) and, for `check`,
    /// `unet-sle` (the U-Net/SLE natives, which need an endpoint to run).
    #[arg(long = "domain", value_name = "NAME", default_value = "test")]
    domains: Vec<String>,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Class files to check.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    domains: DomainArgs,
}

#[derive(Args)]
#[command(allow_negative_numbers = true)]
pub struct RunArgs {
    /// The applet's class file.
    #[arg(value_name = "FILE.class")]
    file: PathBuf,
    /// Name of the method to call (static or instance; JIVE has no
    /// overloading, so the name is enough).
    method: String,
    /// Its int arguments (negative numbers are fine: `-5`).
    #[arg(value_name = "INT", allow_negative_numbers = true)]
    args: Vec<i32>,
    /// Fuel for the static initializer and constructor, and again for the
    /// call (about one unit per bytecode executed); exhausting it is a fault.
    /// Default: the VM's, which stops an endless loop well within a second.
    #[arg(long, value_name = "N")]
    fuel: Option<u64>,
    /// Bytes the applet may allocate (arrays); default: the VM's.
    #[arg(long, value_name = "BYTES")]
    heap: Option<usize>,
    /// Deepest call nesting allowed; default: the VM's.
    #[arg(long, value_name = "N")]
    depth: Option<u32>,
    /// Longest the call may run, in milliseconds, whatever fuel it has
    /// left (a watchdog; exceeding it is a fault). Default: no limit but
    /// the fuel.
    #[arg(long, value_name = "MS")]
    max_time: Option<u64>,
    /// Compile the class to machine code first and run compiled (the
    /// default): methods that neither allocate arrays nor call such
    /// methods run as machine code, the others interpreted
    /// (`--stats` says which). A class the compiler cannot take runs
    /// interpreted, with a warning.
    #[arg(long, conflicts_with = "interpret")]
    compile: bool,
    /// Run every method in JIVE's interpreter (no compiling).
    #[arg(long)]
    interpret: bool,
    /// Print to stderr how each method runs (compiled, with its compile
    /// time, or interpreted) and the class's compile time before the call,
    /// and the fuel used and the heap in use after it.
    #[arg(long)]
    stats: bool,
    #[command(flatten)]
    domains: DomainArgs,
}

pub fn run(c: Command) -> ExitCode {
    match c {
        Command::Check(a) => check(a),
        Command::Run(a) => run_method(a),
        Command::Attach(a) => attach(a),
        Command::Detach(a) => detach(a),
    }
}

/// A class file's bytes, or why there are none: unreadable, or a Java
/// source given where its compiled class belongs.
fn read_class(path: &Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {}", one_line(e)))?;
    let is_java = path.extension().is_some_and(|e| e == "java");
    if is_java && !bytes.starts_with(&[0xca, 0xfe, 0xba, 0xbe]) {
        return Err("this is Java source: compile it to a class file first \
                    (javac --release 8 against the SDK in java/applet-sdk; \
                    see applets/README.md)"
            .into());
    }
    Ok(bytes)
}

fn attach(a: AttachArgs) -> ExitCode {
    let bytes = match read_class(&a.file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {}: {e}", a.file.display());
            return ExitCode::from(1);
        }
    };
    let r = unet::Session::connect(&a.socket)
        // 0: the engine's default.
        .and_then(|s| {
            s.attach_applet(a.endpoint, &bytes, a.fuel.unwrap_or(0), a.heap.unwrap_or(0))
        });
    match r {
        Ok(()) => {
            println!("{}: attached to endpoint {}", a.file.display(), a.endpoint);
            ExitCode::SUCCESS
        }
        Err(unet::Error::Rejected(why)) => {
            eprintln!("{}", one_line(why));
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {}", one_line(e));
            ExitCode::from(1)
        }
    }
}

fn detach(a: DetachArgs) -> ExitCode {
    match unet::Session::connect(&a.socket).and_then(|s| s.detach_applet(a.endpoint)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(e));
            ExitCode::from(1)
        }
    }
}

/// The natives a command-line host offers: the `test` domain.
fn natives() -> Natives<Host> {
    jive::test_natives::<Host>()
}

/// What to do about a rejection the command line can explain: a native
/// domain not granted (`--domain`), or U-Net/SLE natives where the command
/// line has none to run (`applet run` has no endpoint). Empty otherwise.
fn hint(reason: &str) -> String {
    const NOT_GRANTED: &str = "\", which is not granted";
    if let Some(end) = reason.find(NOT_GRANTED) {
        if let Some(start) = reason[..end].rfind("domain \"") {
            let domain = &reason[start + "domain \"".len()..end];
            return format!(" (grant it with --domain {domain})");
        }
    }
    if reason.contains("unet/sle/Natives") && reason.contains("no such native") {
        return " (the U-Net/SLE natives need an endpoint: attach the applet with \
                `unet applet attach`, or check it with `unet applet check --domain unet-sle`)"
            .into();
    }
    String::new()
}

fn one_line(s: impl std::fmt::Display) -> String {
    s.to_string().replace(['\n', '\r'], " ")
}

fn check(a: CheckArgs) -> ExitCode {
    // The check only loads: a registry of the U-Net/SLE natives plus the
    // test domain serves every domain the command line knows.
    let mut natives = unet_sle::natives();
    natives.extend(&jive::test_natives());
    let granted: Vec<&str> = a.domains.domains.iter().map(String::as_str).collect();
    let mut all_ok = true;
    for f in &a.files {
        let shown = f.display();
        match read_class(f) {
            Err(e) => {
                all_ok = false;
                println!("{shown}: error: {e}");
            }
            Ok(bytes) => match Class::load(&bytes, &natives, &granted) {
                Ok(_) => println!("{shown}: ok"),
                Err(r) => {
                    all_ok = false;
                    println!("{shown}: rejected: {}{}", one_line(&r), hint(&r.reason));
                }
            },
        }
    }
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}

fn load(path: &Path, natives: &Natives<Host>, granted: &[&str]) -> Result<Class<Host>, ExitCode> {
    let bytes = read_class(path).map_err(|e| {
        eprintln!("error: {}: {e}", path.display());
        ExitCode::from(1)
    })?;
    Class::load(&bytes, natives, granted).map_err(|r| {
        eprintln!("rejected: {}{}", one_line(&r), hint(&r.reason));
        ExitCode::from(2)
    })
}

/// The parameter types of a method descriptor such as `(IBZ)V` when all
/// are int-like (`I`, `S`, `B`, `Z`); `None` when some are arrays (which the
/// command line cannot pass).
fn int_params(descriptor: &str) -> Option<Vec<char>> {
    let params = descriptor.strip_prefix('(')?.split(')').next()?;
    params
        .chars()
        .all(|c| matches!(c, 'I' | 'S' | 'B' | 'Z'))
        .then(|| params.chars().collect())
}

/// Why `v` cannot be passed as a parameter of descriptor type `t`, if so.
fn out_of_range(t: char, v: i32) -> Option<&'static str> {
    match t {
        'B' if i8::try_from(v).is_err() => Some("a byte (-128..127)"),
        'S' if i16::try_from(v).is_err() => Some("a short (-32768..32767)"),
        'Z' if !matches!(v, 0 | 1) => Some("a boolean (0 or 1)"),
        _ => None,
    }
}

/// Compile `class` and install its code in `vm`; with `stats`, say on
/// stderr how each method runs and what compiling took. A class the
/// compiler cannot take (this machine is not supported, or a method was
/// refused) stays interpreted, with a warning: the call's result is the
/// same either way.
fn compile(vm: &mut Vm<Host>, class: &Class<Host>, stats: bool) {
    let code = match class.compile() {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "warning: JIVE could not compile {}, running it interpreted: {e}",
                class.name()
            );
            return;
        }
    };
    let times: Vec<_> = class.methods().map(|x| code.method_time(x)).collect();
    let total = code.total_time();
    if let Err(e) = vm.install(code) {
        eprintln!("warning: {e}; running interpreted");
        return;
    }
    if !stats {
        return;
    }
    for (x, t) in class.methods().zip(times) {
        let name = format!("{}{}", class.method_name(x), class.method_descriptor(x));
        match t.filter(|_| vm.is_compiled(x)) {
            Some(t) => eprintln!("compiled: {name} ({} us)", t.as_micros()),
            None => eprintln!("interpreted: {name}"),
        }
    }
    eprintln!("compile time: {} us", total.as_micros());
}

fn run_method(a: RunArgs) -> ExitCode {
    let natives = natives();
    let granted: Vec<&str> = a.domains.domains.iter().map(String::as_str).collect();
    let class = match load(&a.file, &natives, &granted) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let Some(m) = class.method(&a.method) else {
        eprintln!("error: {} has no method `{}`", class.name(), a.method);
        return ExitCode::from(1);
    };
    let descriptor = class.method_descriptor(m).to_string();
    let Some(params) = int_params(&descriptor) else {
        eprintln!(
            "error: {}{} takes array arguments, which the command line cannot pass",
            a.method, descriptor
        );
        return ExitCode::from(1);
    };
    if params.len() != a.args.len() {
        let n = params.len();
        eprintln!(
            "error: {}{} takes {n} int argument{}, {} given",
            a.method,
            descriptor,
            if n == 1 { "" } else { "s" },
            a.args.len()
        );
        return ExitCode::from(1);
    }
    for (i, (&t, &v)) in params.iter().zip(&a.args).enumerate() {
        if let Some(what) = out_of_range(t, v) {
            eprintln!(
                "error: argument {} of {}{} must be {what}, not {v}",
                i + 1,
                a.method,
                descriptor
            );
            return ExitCode::from(1);
        }
    }
    let defaults = Limits::default();
    let limits = Limits {
        fuel: a.fuel.unwrap_or(defaults.fuel),
        max_depth: a.depth.unwrap_or(defaults.max_depth),
        heap_quota: a.heap.unwrap_or(defaults.heap_quota),
        max_time: a.max_time.map(Duration::from_millis),
    };
    let mut host: Host = ();
    let mut vm = match Vm::new(class.clone(), limits, &mut host) {
        Ok(vm) => vm,
        Err(f) => {
            eprintln!("fault: {} (while initializing)", one_line(f));
            return ExitCode::from(3);
        }
    };
    if !a.interpret {
        compile(&mut vm, &class, a.stats);
    }
    let result = vm.invoke(&mut host, m, &a.args);
    if a.stats {
        eprintln!(
            "fuel used: {}, heap used: {} bytes",
            vm.last_fuel_used(),
            vm.heap_used()
        );
    }
    match result {
        Ok(Some(v)) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(f) => {
            match vm.last_fault_site() {
                Some(site) => eprintln!("fault: {} (in {site})", one_line(f)),
                None => eprintln!("fault: {}", one_line(f)),
            }
            ExitCode::from(3)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{int_params, out_of_range};

    #[test]
    fn int_parameter_types() {
        assert_eq!(int_params("()V"), Some(vec![]));
        assert_eq!(int_params("(II)I"), Some(vec!['I', 'I']));
        assert_eq!(int_params("(BSZI)V"), Some(vec!['B', 'S', 'Z', 'I']));
        assert_eq!(int_params("([BII)I"), None);
    }

    #[test]
    fn argument_ranges() {
        assert_eq!(out_of_range('B', -128), None);
        assert!(out_of_range('B', 128).is_some());
        assert_eq!(out_of_range('S', 32767), None);
        assert!(out_of_range('S', -32769).is_some());
        assert_eq!(out_of_range('Z', 1), None);
        assert!(out_of_range('Z', 2).is_some());
        assert_eq!(out_of_range('I', i32::MIN), None);
    }
}
