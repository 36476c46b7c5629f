//! Named profiles: where a user logged in and the token they got, one file each in the config
//! directory (`~/.config/agentctl/profiles/<name>.json` on Linux, or `$AGENTCTL_CONFIG_DIR`),
//! readable by the user alone.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::failure::Failure;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Profile {
    /// The server logged in to; `None` for a local login.
    pub server: Option<String>,
    /// The database of a local login (`None`: the default one).
    pub database_url: Option<String>,
    pub local: bool,
    pub email: String,
    pub token: String,
    /// The workspace commands act in (`agentctl workspace use`), its id; `None`: the personal
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

impl Profile {
    /// Whether `other` is the same person logged in at the same place.
    pub(crate) fn is_same_login(&self, other: &Profile) -> bool {
        self.server == other.server
            && self.database_url == other.database_url
            && self.local == other.local
            && self.email == other.email
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Profiles {
    dir: PathBuf,
}

impl Profiles {
    pub(crate) fn open() -> Result<Self, Failure> {
        let base = match std::env::var_os("AGENTCTL_CONFIG_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => directories::ProjectDirs::from("", "", "agentctl")
                .map(|dirs| dirs.config_dir().to_path_buf())
                .ok_or_else(|| {
                    Failure::usage(
                        "no home directory to keep the login in; set AGENTCTL_CONFIG_DIR",
                    )
                })?,
        };
        Ok(Self { dir: base.join("profiles") })
    }

    fn path(&self, name: &str) -> Result<PathBuf, Failure> {
        let valid = !name.is_empty()
            && name.len() <= 64
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(Failure::usage(format!(
                "profile '{name}': use 1 to 64 letters, digits, '-' or '_'"
            )));
        }
        Ok(self.dir.join(format!("{name}.json")))
    }

    pub(crate) fn load(&self, name: &str) -> Result<Option<Profile>, Failure> {
        let path = self.path(name)?;
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                Failure::usage(format!(
                    "{} is damaged ({e}); run `agentctl logout` and log in again",
                    path.display()
                ))
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => {
                Err(Failure::internal(format!("cannot read {}: {error}", path.display())))
            }
        }
    }

    /// Writes the profile readable by its owner alone (0600), replacing any earlier one at
    /// once: a reader never sees half a file.
    pub(crate) fn save(&self, name: &str, profile: &Profile) -> Result<PathBuf, Failure> {
        let path = self.path(name)?;
        let fail = |what: &str, path: &Path, e: std::io::Error| {
            Failure::internal(format!("cannot {what} {}: {e}", path.display()))
        };
        create_private_dir(&self.dir).map_err(|e| fail("create", &self.dir, e))?;
        let temporary = self.dir.join(format!(".{name}.json.tmp"));
        let bytes = serde_json::to_vec_pretty(profile).map_err(Failure::internal)?;
        let mut file = private_file(&temporary).map_err(|e| fail("write", &temporary, e))?;
        file.write_all(&bytes)
            .and_then(|()| file.sync_all())
            .map_err(|e| fail("write", &temporary, e))?;
        std::fs::rename(&temporary, &path).map_err(|e| fail("write", &path, e))?;
        Ok(path)
    }

    /// Removes the profile; `false` when there was none.
    pub(crate) fn remove(&self, name: &str) -> Result<bool, Failure> {
        let path = self.path(name)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => {
                Err(Failure::internal(format!("cannot remove {}: {error}", path.display())))
            }
        }
    }
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new().write(true).create_new(true).open(path)
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}
