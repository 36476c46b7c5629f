//! `agentd backup` and `agentd restore`: the library's backup and restore, with what the
//! operator must know printed plainly.

use std::path::Path;
use std::process::ExitCode;

use agentcore::backup::{self, ServerKey};

use crate::config::Config;

/// Runs a backup (`backup` true) or a restore of `file`; prints the outcome.
pub(crate) fn run(config: &Config, file: &Path, backup: bool) -> ExitCode {
    let core_config = match config.core_config() {
        Ok(core_config) => core_config,
        Err(error) => {
            eprintln!("agentd: {error:#}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("agentd: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = if backup {
        runtime.block_on(backup::backup(&core_config, file)).map(|report| {
            println!(
                "Backed up {} to {} ({} bytes, integrity checked).",
                report.database.display(),
                report.file.display(),
                report.bytes
            );
            describe_key(&report.key, true);
        })
    } else {
        runtime.block_on(backup::restore(&core_config, file)).map(|report| {
            println!("Restored {} from {}.", report.database.display(), file.display());
            if let Some(previous) = &report.previous {
                println!("The database it replaced is kept as {}.", previous.display());
            }
            describe_key(&report.key, false);
            if let Some(previous) = &report.previous_key {
                println!("The server key it replaced is kept as {}.", previous.display());
            }
        })
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("agentd: {error}");
            ExitCode::from(2)
        }
    }
}

fn describe_key(key: &ServerKey, backup: bool) {
    match (key, backup) {
        (ServerKey::File { key, copy }, true) => println!(
            "KEEP {} WITH THE BACKUP: it is a copy of the server key {}, and without it the \
             Discord bot tokens in the backup cannot be decrypted.",
            copy.display(),
            key.display()
        ),
        (ServerKey::File { key, copy }, false) => {
            println!(
                "The server key {} is now the backup's key ({}).",
                key.display(),
                copy.display()
            )
        }
        (ServerKey::Configured, true) => println!(
            "The server key is configured (secret_key / AGENTD_SECRET_KEY): keep that value \
             with the backup; without it the Discord bot tokens in it cannot be decrypted."
        ),
        (ServerKey::Configured, false) => println!(
            "The server key is configured (secret_key / AGENTD_SECRET_KEY): it must be the key \
             the backup was made with, or its Discord bot tokens cannot be decrypted."
        ),
        (ServerKey::None, true) => {
            println!("There is no server key yet, so the backup holds no bot token.")
        }
        (ServerKey::None, false) => println!(
            "No key file lies beside the backup: the current server key is kept, and the \
             backup's Discord bot tokens open only if it is the key they were sealed with."
        ),
    }
}
