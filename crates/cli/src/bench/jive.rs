//! `unet bench jive`.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_a: Args) -> ExitCode {
    eprintln!("unet bench jive: not built yet");
    ExitCode::from(1)
}
