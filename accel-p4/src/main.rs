//! `accel-p4`: the dmkv soft switch and its tools.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// dmkv switch acceleration: the P4 pipeline model run as a soft switch, and its tools.
#[derive(Debug, Parser)]
#[command(name = "accel-p4", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print `p4/include/spec.p4` as generated from the spec module.
    GenSpec,
    /// Run an STF test vector file against the model.
    Stf {
        /// The `.stf` file.
        file: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::GenSpec => {
            print!("{}", accel_p4::spec::p4_include());
            ExitCode::SUCCESS
        }
        Command::Stf { file } => {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("accel-p4: cannot read {}: {e}", file.display());
                    return ExitCode::FAILURE;
                }
            };
            match accel_p4::stf::run(&text) {
                Ok(_) => {
                    println!("{}: ok", file.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{}: {e}", file.display());
                    ExitCode::FAILURE
                }
            }
        }
    }
}
