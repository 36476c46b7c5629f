//! The key that signs access tokens, when the operator configured none: generated once and
//! kept in the database, sealed with the server key (`secret_key`) like bot and MCP tokens, so
//! a copy of the database alone (a stolen backup, the SQLite file) cannot mint a token. A key
//! stored in clear by an earlier release is sealed in place on start; the tokens it signed keep
//! working.

use secrecy::SecretString;

use crate::auth;
use crate::crypto::SecretBox;
use crate::error::{Error, Result};
use crate::store::Store;

const NAME: &str = "jwt_secret";
/// What the sealed key is bound to, so a sealed value copied under another name does not open.
const CONTEXT: &str = "secret:jwt_secret";
/// How sealed values begin ([`SecretBox::seal`]); a generated key in clear is hex only.
const SEALED_PREFIX: &str = "v1:";

/// The stored signing key (storing a new one first if there is none), opened.
pub(super) async fn stored_key(store: &dyn Store, secrets: &SecretBox) -> Result<SecretString> {
    let candidate = secrets.seal(&auth::random_secret()?, CONTEXT)?;
    let stored = store.secret_or_insert(NAME, &candidate).await?;
    if stored.starts_with(SEALED_PREFIX) {
        // Starting on a wrong key would sign tokens no other node accepts: refuse instead.
        return secrets.open(&stored, CONTEXT).map_err(|_| {
            Error::NotConfigured(
                "the token-signing key stored in the database cannot be opened with this \
                 secret_key: start with the secret_key this database was used with (every node \
                 sharing a database needs the same one)"
                    .into(),
            )
        });
    }
    let sealed = secrets.seal(&stored, CONTEXT)?;
    // Only if no other node sealed it meanwhile: each then keeps using the same key.
    store.replace_secret(NAME, &stored, &sealed).await?;
    tracing::info!("the stored token signing key is now sealed with the server key");
    Ok(SecretString::from(stored))
}
