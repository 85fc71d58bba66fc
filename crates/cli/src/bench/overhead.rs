//! `unet bench overhead`: the U-Net/SLE paper's Figure 7.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Print one JSON object per step.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_a: Args) -> ExitCode {
    eprintln!("unet bench overhead: being written");
    ExitCode::from(1)
}
