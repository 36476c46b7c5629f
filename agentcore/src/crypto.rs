//! Encryption of secrets at rest (bot tokens) under the server key.
//!
//! XChaCha20-Poly1305: a random 24-byte nonce per value, so no nonce bookkeeping, and an
//! authentication tag, so a changed ciphertext fails to open instead of decrypting to garbage.
//! The associated data binds each value to where it is stored (owner and guild): a ciphertext
//! copied to another row does not open there.

use std::io::Write;
use std::path::Path;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use secrecy::{ExposeSecret, SecretString};

use crate::error::{Error, Result};

const VERSION: &str = "v1";
pub(crate) const KEY_FILE: &str = "secret.key";

/// The server key. Never printed: `Debug` shows nothing of it.
pub struct SecretBox {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(..)")
    }
}

impl SecretBox {
    /// A key of 64 hex characters (32 bytes).
    pub fn from_hex(key: &SecretString) -> Result<Self> {
        let bytes =
            decode_hex(key.expose_secret().trim()).filter(|b| b.len() == 32).ok_or_else(|| {
                Error::NotConfigured(
                    "secret_key must be 64 hexadecimal characters (32 bytes)".into(),
                )
            })?;
        let cipher = XChaCha20Poly1305::new_from_slice(&bytes)
            .map_err(|_| Error::NotConfigured("secret_key must be 32 bytes".into()))?;
        Ok(Self { cipher })
    }

    /// The configured key, else the one in `<data_dir>/secret.key`, generated (mode 0600) on
    /// first use.
    pub fn load(configured: Option<&SecretString>, data_dir: &Path) -> Result<Self> {
        if let Some(key) = configured {
            return Self::from_hex(key);
        }
        let path = data_dir.join(KEY_FILE);
        match std::fs::read_to_string(&path) {
            Ok(key) => Self::from_hex(&SecretString::from(key)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(data_dir).map_err(Error::internal)?;
                let key = crate::auth::random_secret()?;
                match write_private(&path, &key) {
                    Ok(()) => tracing::info!(path = %path.display(), "generated the server key"),
                    // Another process created it first: use theirs.
                    Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                        return Self::load(None, data_dir);
                    }
                    Err(error) => return Err(Error::internal(error)),
                }
                Self::from_hex(&SecretString::from(key))
            }
            Err(error) => Err(Error::internal(format!("cannot read {}: {error}", path.display()))),
        }
    }

    /// Encrypts `plain`, bound to `context`.
    pub fn seal(&self, plain: &str, context: &str) -> Result<String> {
        let mut nonce = [0u8; 24];
        getrandom::fill(&mut nonce).map_err(|e| Error::internal(format!("no randomness: {e}")))?;
        let sealed = self
            .cipher
            .encrypt(
                &XNonce::from(nonce),
                Payload { msg: plain.as_bytes(), aad: context.as_bytes() },
            )
            .map_err(|_| Error::internal("encryption failed"))?;
        Ok(format!("{VERSION}:{}:{}", encode_hex(&nonce), encode_hex(&sealed)))
    }

    /// Decrypts what [`SecretBox::seal`] produced for the same `context`.
    pub fn open(&self, sealed: &str, context: &str) -> Result<SecretString> {
        let unreadable =
            || Error::internal("a stored secret cannot be decrypted (was secret_key changed?)");
        let mut parts = sealed.split(':');
        let (Some(VERSION), Some(nonce), Some(body), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(unreadable());
        };
        let nonce: [u8; 24] =
            decode_hex(nonce).and_then(|n| n.try_into().ok()).ok_or_else(unreadable)?;
        let body = decode_hex(body).ok_or_else(unreadable)?;
        let plain = self
            .cipher
            .decrypt(&XNonce::from(nonce), Payload { msg: &body, aad: context.as_bytes() })
            .map_err(|_| unreadable())?;
        String::from_utf8(plain).map(SecretString::from).map_err(|_| unreadable())
    }
}

/// Creates `path` readable by its owner only, whole or not at all; fails if it exists.
///
/// The key is written to a private temporary file first and then linked into place, so a crash
/// or a second process never sees a half-written key.
pub(crate) fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    let temporary = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&temporary).and_then(|mut file| {
        file.write_all(contents.as_bytes())?;
        file.sync_all()
    });
    let linked = written.and_then(|()| std::fs::hard_link(&temporary, path));
    let _ = std::fs::remove_file(&temporary);
    linked
}

fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SecretBox {
        SecretBox::from_hex(&SecretString::from("11".repeat(32))).unwrap()
    }

    #[test]
    fn a_sealed_value_opens_only_in_its_own_context() {
        let sealed = key().seal("bot-token-123", "user-1/guild-9").unwrap();
        assert!(!sealed.contains("bot-token-123"));
        assert_eq!(key().open(&sealed, "user-1/guild-9").unwrap().expose_secret(), "bot-token-123");
        assert!(key().open(&sealed, "user-2/guild-9").is_err());
        let other = SecretBox::from_hex(&SecretString::from("22".repeat(32))).unwrap();
        assert!(other.open(&sealed, "user-1/guild-9").is_err());
    }

    #[test]
    fn sealing_twice_gives_different_ciphertexts() {
        assert_ne!(key().seal("x", "c").unwrap(), key().seal("x", "c").unwrap());
    }

    #[test]
    fn a_tampered_value_does_not_open() {
        let sealed = key().seal("token", "c").unwrap();
        let mut tampered = sealed.clone().into_bytes();
        let last = tampered.len() - 1;
        tampered[last] = if tampered[last] == b'0' { b'1' } else { b'0' };
        assert!(key().open(&String::from_utf8(tampered).unwrap(), "c").is_err());
    }

    #[test]
    fn keys_must_be_32_bytes_of_hex() {
        assert!(SecretBox::from_hex(&SecretString::from("abc")).is_err());
        assert!(SecretBox::from_hex(&SecretString::from("zz".repeat(32))).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn the_generated_key_file_is_private_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let first = SecretBox::load(None, dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let sealed = first.seal("t", "c").unwrap();
        let again = SecretBox::load(None, dir.path()).unwrap();
        assert_eq!(again.open(&sealed, "c").unwrap().expose_secret(), "t");
    }
}
