//! Speed, memory and scale of the real `agentd`, on SQLite and PostgreSQL.
//!
//! `cargo bench -p tests --bench agentd` runs every section and writes the figures into
//! `BENCHMARKS.md` (between its generated-section markers); with `AGENTD_TEST_POSTGRES_URL` set
//! (an admin URL, as for the tests) the PostgreSQL half runs too. Naming sections after `--`
//! (`http runtime tools dispatch scale login discord cores streams traces ratelimit`, and
//! `healthz` and `adds` only when named; `runtime` is the single-call runs, `tools` the tool runs) runs
//! only those and prints the figures without touching the file.
//! `AGENTD_BENCH_SECONDS` sets each HTTP run's measured window (default 5);
//! `AGENTD_BENCH_BINARY` names another agentd build to measure (an A/B run against an older
//! commit's `agentd-under-test`); `AGENTD_BENCH_BACKENDS=postgres` (or `sqlite`) measures one
//! backend only.
//!
//! Each scenario starts its own agentd process on a fresh database, with the fake Discord and
//! model servers of the integration tests in this process; the load generator runs here too,
//! so server and load share the machine's cores, as a load test on one machine does.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test harness: a failed set-up step stops the run with its cause"
)]

use support as helpers;
use support::{fake_discord, fake_models, otlp_receiver};

mod load;
mod report;
mod scenarios;
mod server;

use helpers::Backend;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--serve-bare") {
        server::serve_bare();
        return;
    }
    // cargo passes `--bench`; every other word names a section to run.
    let chosen: Vec<&str> =
        args.iter().map(String::as_str).filter(|a| !a.starts_with("--")).collect();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    runtime.block_on(run(&chosen));
}

async fn run(chosen: &[&str]) {
    agentcore::install_tls_provider();
    let mut backends = vec![Backend::Sqlite];
    if std::env::var("AGENTD_TEST_POSTGRES_URL").is_ok_and(|url| !url.is_empty()) {
        backends.push(Backend::Postgres);
    }
    // `AGENTD_BENCH_BACKENDS=postgres` (or `sqlite`): one backend only, for A/B runs.
    if let Ok(only) = std::env::var("AGENTD_BENCH_BACKENDS") {
        let named = |backend: &Backend| match backend {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        };
        backends.retain(|backend| only.split(',').any(|name| name.trim() == named(backend)));
    }
    let wanted = |section: &str| chosen.is_empty() || chosen.contains(&section);
    let mut report = report::Report::new(&backends);
    if wanted("http") || wanted("login") {
        for backend in &backends {
            scenarios::http(*backend, &mut report, wanted("http"), wanted("login")).await;
        }
    }
    // Not in a whole run: the rows of section 1 hold `/healthz` already.
    if chosen.contains(&"healthz") {
        for backend in &backends {
            scenarios::healthz(*backend, &mut report).await;
        }
    }
    // Not in a whole run either: section 1 holds the adds.
    if chosen.contains(&"adds") {
        for backend in &backends {
            scenarios::adds(*backend, &mut report).await;
        }
    }
    if wanted("runtime") || wanted("tools") {
        for backend in &backends {
            if wanted("runtime") {
                scenarios::runtime_echo(*backend, &mut report).await;
                scenarios::runtime_slow_model(*backend, &mut report).await;
            }
            if wanted("tools") {
                scenarios::runtime_tools(*backend, &mut report).await;
            }
        }
    }
    if wanted("dispatch") {
        for backend in &backends {
            scenarios::dispatch(*backend, &mut report).await;
        }
    }
    if wanted("scale") {
        for backend in &backends {
            scenarios::scale(*backend, &mut report).await;
        }
    }
    if wanted("discord") {
        for backend in &backends {
            scenarios::discord(*backend, &mut report).await;
        }
    }
    if wanted("cores") {
        for backend in &backends {
            scenarios::cores(*backend, &mut report).await;
        }
    }
    if wanted("streams") {
        for backend in &backends {
            scenarios::streams(*backend, &mut report).await;
        }
    }
    if wanted("traces") {
        for backend in &backends {
            scenarios::traces(*backend, &mut report).await;
        }
    }
    if wanted("ratelimit") {
        for backend in &backends {
            scenarios::ratelimit(*backend, &mut report).await;
        }
    }
    let text = report.render();
    println!("{text}");
    if chosen.is_empty() {
        report::write(&text);
    }
}
