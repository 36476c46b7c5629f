//! `agentctl`: the command-line client. Its commands arrive with the CLI issue; for now it
//! only knows its name and version, so the workspace builds and installs all three tools.

use std::process::ExitCode;

use clap::Parser;

/// Manage agents from the terminal, remotely over HTTP or locally against the database.
#[derive(Debug, Parser)]
#[command(name = "agentctl", version, about)]
struct Cli {}

fn main() -> ExitCode {
    let _cli = Cli::parse();
    eprintln!("agentctl has no commands yet; use the HTTP API described in README.md.");
    ExitCode::from(2)
}
