//! Where the server's log lines go: standard error, without ever failing a request.
//!
//! tracing's formatter reports a failed write by printing to standard error with `eprintln!`,
//! which panics when standard error itself cannot be written: a full disk under the log file,
//! or a closed pipe. The panic would unwind through whatever was logging, a request included,
//! and the client would get no answer. This writer drops a line it cannot write and counts it
//! instead (`agentd_log_lines_dropped_total`).

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

/// Log lines that could not be written since the process started.
static DROPPED: AtomicU64 = AtomicU64::new(0);

pub(crate) fn lines_dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Counts a line dropped before it reached the writer (the access log's full queue).
pub(crate) fn count_dropped() {
    DROPPED.fetch_add(1, Ordering::Relaxed);
}

/// Standard error, with write failures counted instead of returned.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LossyStderr;

impl Write for LossyStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if io::stderr().lock().write_all(buf).is_err() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().lock().flush();
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LossyStderr {
    type Writer = LossyStderr;

    fn make_writer(&'a self) -> Self::Writer {
        LossyStderr
    }
}
