//! The command line of `agentd`: configuration, logging and signals around [`crate::serve`].
//! The `agentd` binary is [`main`]; the integration tests build the same function into their
//! own binary, so a test can kill a real process.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{FilterExt as _, filter_fn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::AppState;
use crate::config::{Config, Flags, process_environment};
use crate::telemetry::{self, Settings, Tracing};

/// How long a stopping server waits for its last spans to be exported.
const EXPORT_ON_EXIT: std::time::Duration = std::time::Duration::from_secs(5);
use agentcore::Core;

/// Serves the agent service over HTTP.
#[derive(Debug, Parser)]
#[command(name = "agentd", version, about)]
struct Cli {
    #[command(flatten)]
    flags: Flags,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Serve (what `agentd` does without a command)
    Serve,
    /// Print the effective configuration (defaults, file, environment, flags) as TOML, with
    /// secrets redacted, and exit
    Config,
    /// Print the OpenAPI 3.1 document of the HTTP API (what `GET /openapi.json` serves) and exit
    Openapi,
    /// Copy the SQLite database to FILE, consistently, while the server may run; the server
    /// key is copied to FILE.key (keep the two together). On PostgreSQL: says to use pg_dump
    Backup {
        /// The new backup file (it must not exist)
        file: std::path::PathBuf,
    },
    /// Replace the SQLite database with the backup FILE (and the server key with FILE.key),
    /// keeping what it replaces; refused while a server runs on the database
    Restore {
        /// A file made by `agentd backup`
        file: std::path::PathBuf,
    },
}

/// Parses the command line and runs the server until Ctrl-C or SIGTERM.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Openapi) = cli.command {
        return match crate::routes::document().to_pretty_json() {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("agentd: {error}");
                ExitCode::FAILURE
            }
        };
    }
    let env = process_environment();
    let config = match Config::load(&cli.flags, &env) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("agentd: {error}");
            return ExitCode::from(2);
        }
    };
    let unknown = config.unknown_variables(env.keys().cloned());
    if let Some(Command::Config) = cli.command {
        for name in &unknown {
            eprintln!("agentd: warning: unknown variable {name}: it configures nothing");
        }
        return match config.effective() {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("agentd: {error}");
                ExitCode::from(2)
            }
        };
    }
    let tracing = match Settings::from_env(|name| env.get(name).cloned()) {
        Ok(None) => None,
        Ok(Some(settings)) => match Tracing::new(&settings) {
            Ok(tracing) => Some(tracing),
            Err(error) => {
                eprintln!("agentd: {error}");
                return ExitCode::from(2);
            }
        },
        Err(error) => {
            eprintln!("agentd: {error}");
            return ExitCode::from(2);
        }
    };
    let mut config = config;
    config.runtime.trace_content |= telemetry::capture_content(&|name| env.get(name).cloned());
    install_subscriber(&config, tracing.as_ref());
    for name in unknown {
        tracing::warn!("unknown variable {name}: it configures nothing");
    }
    if let Some(Command::Backup { file } | Command::Restore { file }) = &cli.command {
        let backup = matches!(cli.command, Some(Command::Backup { .. }));
        return crate::backup::run(&config, file, backup);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(config, tracing)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to standard error (`log.filter`, `log.json`), and the trace spans to the OTLP exporter
/// when there is one (whatever the log's filter shows).
fn install_subscriber(config: &Config, tracing: Option<&Tracing>) {
    let filter = EnvFilter::try_new(&config.log.filter).unwrap_or_else(|error| {
        eprintln!(
            "agentd: log.filter '{}' is not a filter ({error}); using info",
            config.log.filter
        );
        EnvFilter::new("info")
    });
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(crate::logging::LossyStderr)
        .log_internal_errors(false);
    let logs = if config.log.json {
        logs.json().boxed()
    } else {
        logs.with_ansi(std::io::stderr().is_terminal()).boxed()
    };
    // The spans made for traces (`agentcore::otel::TARGET`) go to the exporter only; the log's
    // lines keep the fields of the log's own spans.
    let traced =
        |meta: &tracing::Metadata<'_>| meta.is_span() && meta.target() == agentcore::otel::TARGET;
    let logs = logs.with_filter(filter.and(filter_fn(move |meta| !traced(meta))));
    let spans = tracing.map(|tracing| {
        tracing_opentelemetry::layer().with_tracer(tracing.tracer()).with_filter(filter_fn(traced))
    });
    tracing_subscriber::registry().with(logs).with(spans).init();
}

async fn run(config: Config, tracing: Option<Tracing>) -> anyhow::Result<()> {
    if let Some(file) = &config.file {
        tracing::info!(file = %file.display(), "configuration file read");
    }
    let exporting = tracing.map(Tracing::start);
    if exporting.is_some() {
        tracing::info!("exporting traces over OTLP");
    }
    let core_config = config.core_config()?;
    tracing::info!(database = %core_config.database_url.redacted(), "opening the database");
    let core = Core::open(core_config).await?;
    match core.models().default_model() {
        agentcore::domain::agent::ECHO => tracing::info!(
            "default model: echo (offline, answers without calling any model); set AGENTD_MODELS__DEFAULT to use a real one"
        ),
        model => tracing::info!(model, "default model"),
    }
    let listener = TcpListener::bind(config.bind)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.bind))?;
    let address = listener.local_addr()?;
    tracing::info!(%address, "agentd listening");
    if config.http.ui {
        tracing::info!("dashboard: open http://{address}/ in a browser");
    }
    crate::serve(
        listener,
        AppState::configured(core.clone(), config.http.clone(), config.limits),
        crate::shutdown_signal(),
    )
    .await?;
    core.close().await;
    if let Some(exporting) = exporting {
        exporting.shutdown(EXPORT_ON_EXIT).await;
    }
    tracing::info!("agentd stopped");
    Ok(())
}
