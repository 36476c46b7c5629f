//! `agentctl`: every operation of the agent service from a terminal, against a running
//! `agentd` (`--server`) or directly against the database (`--local`), with the same commands
//! and the same output. The binary is [`main`]; the integration tests build the same function
//! into their own binary.

pub mod api;
mod cli;
pub mod client;
mod commands;
pub mod failure;
mod profile;
mod render;
pub mod sse;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::cli::Cli;

/// Parses the command line, runs the command and returns its exit code (see `failure::Kind`).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    agentcore::install_tls_provider();
    // `run` is a long-running worker whose progress is worth seeing; other commands print
    // only their answer, and the library's warnings when something goes wrong. In local mode
    // the in-process server's request log would repeat the error the command already prints.
    let default_filter = if matches!(cli.command, cli::Command::Run) {
        "info,sqlx=warn"
    } else {
        "warn,agentd=off,tower_http=off"
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("AGENTCTL_LOG")
                .unwrap_or_else(|_| EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(6);
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("{failure}");
            failure.kind.exit_code()
        }
    }
}
