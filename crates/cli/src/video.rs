//! `unet video ...`: SPINE's video client (the paper's section 5.1):
//! `unet video view` (`video/view.rs`) serves a web page that shows an
//! extension's framebuffer live.

use std::process::ExitCode;

use clap::Subcommand;

mod view;

#[derive(Subcommand)]
pub enum Command {
    /// Serve a web page that shows a framebuffer of an extension (one of
    /// this user's) live, read through a read-only view of it.
    View(view::Args),
}

pub fn run(c: Command) -> ExitCode {
    match c {
        Command::View(a) => view::run(a),
    }
}
