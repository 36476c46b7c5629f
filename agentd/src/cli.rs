//! The command line of `agentd`: configuration, logging and signals around [`crate::serve`].
//! The `agentd` binary is [`main`]; the integration tests build the same function into their
//! own binary, so a test can kill a real process.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

use crate::AppState;
use crate::config::{Config, Flags};
use agentcore::Core;

/// Serves the agent service over HTTP.
#[derive(Debug, Parser)]
#[command(name = "agentd", version, about)]
struct Cli {
    #[command(flatten)]
    flags: Flags,
}

/// Parses the command line and runs the server until Ctrl-C or SIGTERM.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("AGENTD_LOG")
                .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = Config::load(&cli.flags, &|name| std::env::var(name).ok())?;
    let core_config = config.core_config()?;
    tracing::info!(database = %core_config.database_url.redacted(), "opening the database");
    let core = Core::open(core_config).await?;
    match core.models().default_model() {
        "echo" => tracing::info!(
            "default model: echo (offline, answers without calling any model); set AGENTD_MODELS__DEFAULT to use a real one"
        ),
        model => tracing::info!(model, "default model"),
    }
    let listener = TcpListener::bind(config.bind)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.bind))?;
    tracing::info!(address = %listener.local_addr()?, "agentd listening");
    crate::serve(listener, AppState { core: core.clone() }, crate::shutdown_signal()).await?;
    core.close().await;
    tracing::info!("agentd stopped");
    Ok(())
}
