//! Section 7: whether agentd uses the cores it is given. The HTTP runs of section 1 twice in one
//! run, agentd (and the bare yardstick) pinned to two cores and then on all of them, with the
//! CPU agentd burned meanwhile, so a row shows both the gain and its cost per core.

use super::*;
use crate::server::cpu_seconds;

/// The two cores the pinned half runs on.
const TWO: &str = "0,1";

/// One endpoint's run: requests/s and the cores its server used on average meanwhile.
struct Used {
    label: &'static str,
    per_second: f64,
    cores: f64,
}

pub(crate) async fn cores(backend: Backend, report: &mut Report) {
    let label = name(backend);
    let all = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let two = runs(backend, Some(TWO)).await;
    let every = runs(backend, None).await;
    for (two, every) in two.iter().zip(&every) {
        let ratio = every.per_second / two.per_second;
        report.row(
            Section::Cores,
            vec![
                two.label.into(),
                label.into(),
                whole(two.per_second),
                format!("{} ({all} cores)", whole(every.per_second)),
                format!("{ratio:.2}x"),
                format!("{:.2} / {:.2}", two.cores, every.cores),
                format!(
                    "{} / {}",
                    whole(two.per_second / two.cores),
                    whole(every.per_second / every.cores)
                ),
            ],
        );
        // On two cores both halves run on the same two: nothing to compare.
        if two.label.starts_with("GET") && all > 2 {
            report.target(
                format!("{} on all {all} cores never below 2 cores ({label})", two.label),
                format!("{ratio:.2}x"),
                ratio >= 0.95,
            );
            if all >= 16 {
                report.target(
                    format!("{} on all {all} cores ≥ 3x 2 cores ({label})", two.label),
                    format!("{ratio:.2}x"),
                    ratio >= 3.0,
                );
            }
        }
    }
}

/// The yardstick, the two reads and the backlog add on a fresh agentd on `cpus`.
async fn runs(backend: Backend, cpus: Option<&str>) -> Vec<Used> {
    let server = Agentd::start_on(fresh(backend).await, &[], cpus).await;
    let token = server.register(EMAIL).await;
    agents(&server, &token, "agent", 10, 10, json!({})).await;
    let bare = Bare::start_on(cpus).await;
    let add: MakeRequest = Arc::new(|n| {
        let body = json!({"title": format!("Load task {n}")}).to_string();
        (Method::POST, format!("/api/agents/agent-{}/backlog", n % 10), Some(body))
    });
    let mut used = vec![
        measure(
            "bare axum handler (GET /)",
            bare.pid(),
            bare.address,
            None,
            request(Method::GET, "/", None),
        )
        .await,
    ];
    let endpoints = [
        ("GET /api/agents", request(Method::GET, "/api/agents", None)),
        ("GET /api/agents/{id}", request(Method::GET, "/api/agents/agent-3", None)),
        ("POST /api/agents/{id}/backlog", add),
    ];
    for (label, make) in endpoints {
        used.push(measure(label, server.pid(), server.address, Some(&token), make).await);
    }
    server.stop().await;
    used
}

async fn measure(
    label: &'static str,
    pid: u32,
    address: std::net::SocketAddr,
    token: Option<&str>,
    make: MakeRequest,
) -> Used {
    let (cpu, started) = (cpu_seconds(pid), Instant::now());
    let run = closed_loop(address, token, shape(), make).await;
    let cores = (cpu_seconds(pid) - cpu) / started.elapsed().as_secs_f64();
    Used { label, per_second: run.per_second(), cores }
}
