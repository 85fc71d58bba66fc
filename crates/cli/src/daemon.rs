//! `unet daemon`.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_a: Args) -> ExitCode {
    eprintln!("unet daemon: not built yet");
    ExitCode::from(1)
}
