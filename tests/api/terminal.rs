//! A pseudo-terminal to run a program on as a person would: everything it draws is read from
//! the master side into a screen buffer, and keystrokes are written to the master.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{LocalModes, Winsize, tcgetattr, tcsetwinsize};
use tokio::process::{Child, Command};
use tokio::sync::watch;

use crate::helpers::eventually;

/// How long a prompt may take to appear.
const PATIENCE: Duration = Duration::from_secs(20);

pub(crate) struct Terminal {
    master: File,
    child: Child,
    /// Everything the program wrote, escape sequences included.
    output: Arc<Mutex<Vec<u8>>>,
    /// Bumped by the reader after each read; closed when the program's side is gone.
    grown: watch::Receiver<()>,
    /// How much of the visible text earlier `expect`s have consumed.
    seen: usize,
}

/// Arrow keys as a terminal sends them.
pub(crate) const DOWN: &str = "\x1b[B";
pub(crate) const ENTER: &str = "\r";
/// Esc, alone: leaves a choice.
pub(crate) const ESC: &str = "\x1b";
/// Ctrl-C as a terminal in raw mode passes it on.
pub(crate) const CTRL_C: &str = "\x03";

impl Terminal {
    /// Runs `command` with its stdin, stdout and stderr on a new 40x120 terminal.
    pub(crate) fn spawn(command: Command) -> Self {
        Self::spawn_with_width(command, 120)
    }

    /// Runs `command` on a new terminal of 40 rows and `columns` columns; the terminal's size
    /// is all it has to go by (`COLUMNS` and `LINES` are not passed on).
    pub(crate) fn spawn_with_width(mut command: Command, columns: u16) -> Self {
        let master =
            openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("a pty");
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let size = Winsize { ws_row: 40, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0 };
        tcsetwinsize(&master, size).unwrap();
        command.env_remove("COLUMNS").env_remove("LINES");
        let name = ptsname(&master, Vec::new()).unwrap();
        let side = OpenOptions::new()
            .read(true)
            .write(true)
            .open(OsStr::from_bytes(name.as_bytes()))
            .expect("the terminal's side");
        command
            .stdin(side.try_clone().unwrap())
            .stdout(side.try_clone().unwrap())
            .stderr(side)
            .kill_on_drop(true);
        let child = command.spawn().expect("the program starts");
        // Our copies of the program's side go with the command, so reading the master ends
        // (EIO) once the program has exited.
        drop(command);

        let master = File::from(master);
        let output = Arc::new(Mutex::new(Vec::new()));
        let (grow, grown) = watch::channel(());
        let mut reader = master.try_clone().unwrap();
        let sink = output.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(read @ 1..) = reader.read(&mut buffer) {
                sink.lock().unwrap().extend_from_slice(&buffer[..read]);
                grow.send_replace(());
            }
        });
        Self { master, child, output, grown, seen: 0 }
    }

    /// The screen's text so far, without escape sequences.
    pub(crate) fn text(&self) -> String {
        visible(&self.output.lock().unwrap())
    }

    /// The lines of the screen so far (without the terminal's carriage returns).
    pub(crate) fn lines(&self) -> Vec<String> {
        self.text().lines().map(|line| line.trim_end_matches('\r').to_owned()).collect()
    }

    /// Waits until `wanted` appears after what earlier calls consumed, and consumes it.
    pub(crate) async fn expect(&mut self, wanted: &str) {
        let until = tokio::time::Instant::now() + PATIENCE;
        loop {
            let text = self.text();
            if let Some(at) = text[self.seen..].find(wanted) {
                self.seen += at + wanted.len();
                return;
            }
            match tokio::time::timeout_at(until, self.grown.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    let text = self.text();
                    assert!(
                        text[self.seen..].contains(wanted),
                        "the program ended without showing {wanted:?}; the screen:\n{text}"
                    );
                }
                Err(_) => {
                    panic!("{wanted:?} did not appear within {PATIENCE:?}; the screen:\n{text}")
                }
            }
        }
    }

    /// Types `keys` after `prompt` has appeared.
    pub(crate) async fn answer(&mut self, prompt: &str, keys: &str) {
        self.expect(prompt).await;
        self.master.write_all(keys.as_bytes()).unwrap();
    }

    /// Types `keys` once `prompt` is shown and the program reads keys one by one (the terminal
    /// out of canonical mode). Needed for Ctrl-C: typed while the terminal is still canonical,
    /// the line discipline turns it into a SIGINT for the terminal's foreground group, which a
    /// program without this terminal as its controlling one never gets, and the key is lost.
    pub(crate) async fn answer_keys(&mut self, prompt: &str, keys: &str) {
        self.expect(prompt).await;
        eventually(PATIENCE, "the program reads single keys", || async {
            !tcgetattr(&self.master).unwrap().local_modes.contains(LocalModes::ICANON)
        })
        .await;
        self.master.write_all(keys.as_bytes()).unwrap();
    }

    /// Types a secret once `prompt` is shown and the terminal has stopped echoing (a password
    /// prompt discards what was typed before it turned echo off).
    pub(crate) async fn answer_secret(&mut self, prompt: &str, secret: &str) {
        self.expect(prompt).await;
        eventually(PATIENCE, "the terminal stops echoing", || async {
            !tcgetattr(&self.master).unwrap().local_modes.contains(LocalModes::ECHO)
        })
        .await;
        self.master.write_all(format!("{secret}{ENTER}").as_bytes()).unwrap();
    }

    /// Waits for the program to exit and for everything it wrote to be read.
    pub(crate) async fn finish(&mut self) -> ExitStatus {
        let status = self.wait().await;
        let read = async { while self.grown.changed().await.is_ok() {} };
        if tokio::time::timeout(PATIENCE, read).await.is_err() {
            panic!("the terminal stayed open after the program exited:\n{}", self.text());
        }
        status
    }

    /// Waits for the program to exit.
    pub(crate) async fn wait(&mut self) -> ExitStatus {
        match tokio::time::timeout(PATIENCE, self.child.wait()).await {
            Ok(status) => status.unwrap(),
            Err(_) => panic!("the program did not exit; the screen:\n{}", self.text()),
        }
    }
}

/// `bytes` as text with ANSI escape sequences (CSI and two-byte escapes) removed.
fn visible(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
        } else if chars.next() == Some('[') {
            for c in chars.by_ref() {
                if ('\x40'..='\x7e').contains(&c) {
                    break;
                }
            }
        }
    }
    out
}

#[test]
fn escape_sequences_are_not_text() {
    assert_eq!(visible(b"\x1b[2K\rWhich role?\x1b[1A \x1b[?25lok\x1b7"), "\rWhich role? ok");
}
