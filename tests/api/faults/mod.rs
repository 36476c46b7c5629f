//! The fault suite: the real `agentd` binary against real faults. A full disk is a small
//! tmpfs, a lost database is a PostgreSQL server restarted under the service, a crash is
//! SIGKILL, an outage is the fake Discord answering 503. Each test checks that the service
//! heals by itself and that nothing acknowledged is lost or done twice.
//!
//! Mounting a tmpfs needs root: elsewhere those tests pass with a notice, unless
//! `AGENTD_TEST_REQUIRE_TMPFS=1` (CI runs as root and sets it).

mod clock;
mod discord;
mod disk;
mod interrupted;
mod logs;
mod nodes;
mod poison;
mod restart;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::process::Server;

/// A tmpfs of a given size, unmounted when dropped.
pub(crate) struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts `size` (as `mount -o size=` takes it); `None` where mounting is impossible.
    pub(crate) fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match mounted {
            Ok(output) if output.status.success() => Some(Self { dir }),
            other => {
                let why = match other {
                    Ok(output) => String::from_utf8_lossy(&output.stderr).trim().to_owned(),
                    Err(error) => error.to_string(),
                };
                assert!(
                    !std::env::var("AGENTD_TEST_REQUIRE_TMPFS").is_ok_and(|v| v == "1"),
                    "AGENTD_TEST_REQUIRE_TMPFS=1 but a tmpfs cannot be mounted: {why}"
                );
                eprintln!(
                    "note: full-disk test skipped: cannot mount a tmpfs ({why}); run as root"
                );
                None
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the file system with a file of zeros until a write fails; returns the file.
    pub(crate) fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.path().join("filler");
        let mut file = std::fs::File::create(&path).expect("create the filler");
        let chunk = vec![0u8; 64 * 1024];
        while file.write_all(&chunk).and_then(|()| file.sync_data()).is_ok() {}
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// A port nobody listens on now (the server binds it right after: a small race, harmless on
/// a test machine).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `GET path` with `token`, returning the status and the body (text when it is not JSON).
pub(crate) async fn get(server: &Server, path: &str, token: Option<&str>) -> (u16, Value) {
    let (status, body) = get_text(&server.address, path, token).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::String(body)))
}

pub(crate) async fn get_text(address: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new().get(format!("{address}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.timeout(Duration::from_secs(30)).send().await.expect("an answer");
    (response.status().as_u16(), response.text().await.unwrap_or_default())
}

/// The value of one series in the server's `/metrics`.
pub(crate) async fn metric(server: &Server, series: &str) -> f64 {
    let (status, text) = get_text(&server.address, "/metrics", None).await;
    assert_eq!(status, 200, "{text}");
    crate::helpers::sample(&crate::helpers::metric_samples(&text), series)
}
