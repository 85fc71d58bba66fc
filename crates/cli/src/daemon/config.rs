//! `unet daemon --config FILE` and `--print-config`: the daemon's options
//! from a TOML file, the command line over them.
//!
//! The file's keys are the daemon's long options, with `_` or `-` between
//! words (`client_memory = "512M"`, `udp = "0.0.0.0:7700"`, `allow_peer =
//! ["10.1.0.0/16"]`, `idle_spin_us = 50`): a value is a string, an
//! integer, a boolean, or an array of them for an option that can be
//! given more than once, and goes through the same checks as the option's
//! value on the command line. An unknown key, a table, or a value the
//! option refuses stops the daemon before it starts, naming the file, the
//! line and the key. Precedence: the command line, then an option's
//! environment variable (`UNET_SOCKET`), then the file, then the default.
//! `--print-config` prints the options in force as a file of this kind,
//! each with where its value came from, and exits.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::Path;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args as _, Command, FromArgMatches};

use super::Args;

/// Options a file cannot give.
const NOT_IN_FILE: &[&str] = &["config", "print_config", "help"];

/// The daemon's options as a command of their own; a later value of an
/// option replaces an earlier one (the command line's replace the file's).
fn command() -> Command {
    Args::augment_args(Command::new("unet daemon")).args_override_self(true)
}

/// The options in force: the file's (if any) under `cli` (the daemon's
/// own arguments, after `unet daemon`). Also what each came from, for
/// `--print-config`.
pub(super) fn resolve(file: Option<&Path>, cli: Vec<OsString>) -> Result<Resolved, String> {
    let (tokens, from_file) = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("the configuration file {}: {e}", path.display()))?;
            file_tokens(path, &text)?
        }
        None => (Vec::new(), BTreeSet::new()),
    };
    let given = command()
        .try_get_matches_from(std::iter::once(OsString::from("unet daemon")).chain(cli.clone()))
        .map_err(|e| first_line(&e.to_string()))?;
    let argv = std::iter::once(OsString::from("unet daemon"))
        .chain(tokens)
        .chain(cli);
    let m = command()
        .try_get_matches_from(argv)
        .map_err(|e| first_line(&e.to_string()))?;
    let args = Args::from_arg_matches(&m).map_err(|e| first_line(&e.to_string()))?;
    Ok(Resolved {
        args,
        matches: m,
        given,
        from_file,
    })
}

/// What [`resolve`] found.
pub(super) struct Resolved {
    pub args: Args,
    matches: ArgMatches,
    /// The command line's own.
    given: ArgMatches,
    /// The options the file set.
    from_file: BTreeSet<String>,
}

/// A clap error's first line, without its `error: ` prefix.
fn first_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or(s);
    l.strip_prefix("error: ").unwrap_or(l).to_string()
}

/// The file's options as command-line tokens, checked one by one, and
/// the options it set.
fn file_tokens(path: &Path, text: &str) -> Result<(Vec<OsString>, BTreeSet<String>), String> {
    let file = path.display();
    let spans = toml::de::DeTable::parse(text).map_err(|e| {
        let line = e
            .span()
            .map_or(String::new(), |s| format!(":{}", line_of(text, s.start)));
        format!("{file}{line}: not TOML: {}", first_line(e.message()))
    })?;
    let values: toml::Table =
        toml::from_str(text).map_err(|e| format!("{file}: not TOML: {}", e.message()))?;
    let cmd = command();
    let mut tokens = Vec::new();
    let mut set = BTreeSet::new();
    for (key, _) in spans.get_ref().iter() {
        let name: &str = key.get_ref();
        let at = format!("{file}:{}", line_of(text, key.span().start));
        let id = name.replace('-', "_");
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id().as_str() == id && !NOT_IN_FILE.contains(&id.as_str()))
            .ok_or_else(|| {
                format!(
                    "{at}: unknown key `{name}` (the keys are the daemon's options: {})",
                    keys(&cmd).join(", ")
                )
            })?;
        // An environment variable set for the option wins over the file.
        if arg.get_env().is_some_and(|v| std::env::var_os(v).is_some()) {
            continue;
        }
        let value = values
            .get(name)
            .ok_or_else(|| format!("{at}: key `{name}` has no value"))?;
        let mine = arg_tokens(arg, value).map_err(|why| format!("{at}: key `{name}`: {why}"))?;
        command()
            .try_get_matches_from(
                std::iter::once(OsString::from("unet daemon")).chain(mine.clone()),
            )
            .map_err(|e| format!("{at}: key `{name}`: {}", first_line(&e.to_string())))?;
        tokens.extend(mine);
        set.insert(id);
    }
    Ok((tokens, set))
}

/// The 1-based line of byte `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The keys a file may hold.
fn keys(cmd: &Command) -> Vec<String> {
    cmd.get_arguments()
        .map(|a| a.get_id().as_str().to_string())
        .filter(|id| !NOT_IN_FILE.contains(&id.as_str()))
        .collect()
}

/// `value` as the tokens of option `arg` on a command line.
fn arg_tokens(arg: &Arg, value: &toml::Value) -> Result<Vec<OsString>, String> {
    let long = format!("--{}", arg.get_long().unwrap_or(arg.get_id().as_str()));
    let flag = matches!(arg.get_action(), ArgAction::SetTrue);
    let many = matches!(arg.get_action(), ArgAction::Append);
    let scalar = |v: &toml::Value| -> Result<String, String> {
        match v {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(i) => Ok(i.to_string()),
            toml::Value::Float(f) => Ok(f.to_string()),
            toml::Value::Boolean(b) => Ok(b.to_string()),
            toml::Value::Datetime(_) => Err("a date is not a value of this option".into()),
            toml::Value::Array(_) | toml::Value::Table(_) => {
                Err("a value of this option is a string, an integer or a boolean".into())
            }
        }
    };
    match value {
        toml::Value::Boolean(b) if flag => Ok(if *b { vec![long.into()] } else { vec![] }),
        _ if flag => Err("the value is true or false".into()),
        toml::Value::Array(vs) if many => {
            let mut out = Vec::new();
            for v in vs {
                out.push(OsString::from(&long));
                out.push(scalar(v)?.into());
            }
            Ok(out)
        }
        toml::Value::Array(_) => Err("this option takes one value, not an array".into()),
        v => Ok(vec![long.into(), scalar(v)?.into()]),
    }
}

impl Resolved {
    /// The options in force as a TOML file, each line saying where its
    /// value came from.
    pub(super) fn print(&self) -> String {
        let mut out = String::from(
            "# unet daemon: the options in force (unet daemon --config FILE reads a file like this)\n",
        );
        for arg in command().get_arguments() {
            let id = arg.get_id().as_str();
            if NOT_IN_FILE.contains(&id) {
                continue;
            }
            let vals: Vec<String> = self
                .matches
                .get_raw(id)
                .map(|v| v.map(|s| s.to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            let from = if self.given.value_source(id) == Some(ValueSource::CommandLine) {
                "command line"
            } else if self.from_file.contains(id) {
                "file"
            } else {
                match self.matches.value_source(id) {
                    Some(ValueSource::EnvVariable) => "environment",
                    Some(ValueSource::DefaultValue) => "default",
                    _ => "not set",
                }
            };
            let line = match arg.get_action() {
                ArgAction::Append => format!(
                    "{id} = [{}]",
                    vals.iter()
                        .map(|v| toml_scalar(v))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                ArgAction::SetTrue => format!("{id} = {}", vals.first().map_or("false", |v| v)),
                _ => match vals.first() {
                    Some(v) => format!("{id} = {}", toml_scalar(v)),
                    None => format!("# {id} ="),
                },
            };
            out.push_str(&format!("{line:<48} # {from}\n"));
        }
        out
    }
}

/// `v` as a TOML value: an integer if it is one, else a string.
fn toml_scalar(v: &str) -> String {
    match v.parse::<i64>() {
        Ok(i) => i.to_string(),
        Err(_) => toml::Value::String(v.to_string()).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Result<Vec<String>, String> {
        file_tokens(Path::new("d.toml"), text).map(|(t, _)| {
            t.into_iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect()
        })
    }

    #[test]
    fn keys_become_options() {
        let t = tokens(
            "client-memory = \"512M\"\nidle_spin_us = 50\nallow_peer = [\"10.1.0.0/16\", \"192.0.2.7\"]\n",
        )
        .unwrap();
        assert_eq!(
            t,
            [
                "--allow-peer",
                "10.1.0.0/16",
                "--allow-peer",
                "192.0.2.7",
                "--client-memory",
                "512M",
                "--idle-spin-us",
                "50"
            ]
        );
    }

    /// `--adapter` is repeatable: a list, one option a socket.
    #[test]
    fn more_adapters_are_a_list_of_sockets() {
        let t = tokens("adapter = [\"/run/b.sock\", \"/run/c.sock\"]\n").unwrap();
        assert_eq!(t, ["--adapter", "/run/b.sock", "--adapter", "/run/c.sock"]);
    }

    #[test]
    fn refusals_name_file_line_and_key() {
        let e = tokens("udp = \"127.0.0.1:7700\"\n\nclinet_memory = \"1G\"\n").unwrap_err();
        assert!(
            e.starts_with("d.toml:3: unknown key `clinet_memory`"),
            "{e}"
        );
        let e = tokens("# quotas\nclient_memory = \"lots\"\n").unwrap_err();
        assert!(e.starts_with("d.toml:2: key `client_memory`: "), "{e}");
        assert!(e.contains("lots"), "{e}");
        let e = tokens("max_endpoints = [1, 2]\n").unwrap_err();
        assert!(e.starts_with("d.toml:1: key `max_endpoints`: "), "{e}");
        let e = tokens("[quotas]\nclient_vis = 4\n").unwrap_err();
        assert!(e.starts_with("d.toml:1: unknown key `quotas`"), "{e}");
        let e = tokens("config = \"other.toml\"\n").unwrap_err();
        assert!(e.starts_with("d.toml:1: unknown key `config`"), "{e}");
        let e = tokens("max_endpoints = \n").unwrap_err();
        assert!(e.starts_with("d.toml:1: not TOML"), "{e}");
    }

    #[test]
    fn command_line_over_file_and_printed() {
        let dir = std::env::temp_dir().join(format!("unet-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("d.toml");
        std::fs::write(
            &f,
            "client_memory = \"512M\"\nclient_vis = 9\nallow_peer = [\"10.1.0.0/16\"]\n",
        )
        .unwrap();
        let r = resolve(Some(&f), vec!["--client-vis".into(), "3".into()]).unwrap();
        assert_eq!(r.args.client_memory, 512 << 20);
        assert_eq!(r.args.client_vis, 3);
        assert_eq!(r.args.allow_peer.len(), 1);
        let p = r.print();
        let line = |k: &str| {
            p.lines()
                .find(|l| l.starts_with(&format!("{k} ")))
                .unwrap_or_else(|| panic!("{k} in\n{p}"))
                .to_string()
        };
        assert!(
            line("client_vis").contains("= 3") && line("client_vis").ends_with("# command line")
        );
        assert!(
            line("client_memory").contains("\"512M\"") && line("client_memory").ends_with("# file")
        );
        assert!(
            line("max_datagram").contains("= 1472") && line("max_datagram").ends_with("# default")
        );
        assert!(line("allow_peer").contains("[\"10.1.0.0/16\"]"));
        // What it printed reads back to the same options.
        std::fs::write(&f, &p).unwrap();
        let again = resolve(Some(&f), vec![]).unwrap();
        assert_eq!(again.args.client_vis, 3);
        assert_eq!(again.args.client_memory, 512 << 20);
        std::fs::remove_dir_all(&dir).ok();
    }
}
