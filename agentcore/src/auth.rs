//! Passwords and tokens.
//!
//! Passwords are hashed with argon2id (PHC strings) on the blocking pool, at most one hash per
//! core at a time, so logins never stall the async workers. Tokens are HS256 JWTs whose claims
//! carry the user's token version: logging out bumps the version and every earlier token stops
//! verifying.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use hmac::{Hmac, Mac};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::domain::user::UserId;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Result};

/// What a token says about its holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Claims {
    pub sub: String,
    /// The user's token version when the token was issued.
    pub ver: i64,
    pub iat: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
}

/// The claims of an OAuth `state`: who started the install, for what, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StateClaims {
    sub: String,
    purpose: String,
    exp: i64,
    /// Its id: a state is spent when an install completes with it, and cannot serve twice.
    jti: String,
}

/// A verified OAuth `state`: the user it was issued to, and its id and expiry for spending it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InstallState {
    pub(crate) user_id: String,
    pub(crate) id: String,
    pub(crate) expires_at: i64,
}

const STATE_PURPOSE: &str = "discord_install";

pub(crate) struct Auth {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    state_validation: Validation,
    token_ttl: Option<Duration>,
    hashing: Arc<Semaphore>,
    /// A hash to verify against when the email is unknown, so both paths take as long.
    decoy: OnceLock<String>,
    /// Keys the form tokens bound to a session: derived from the signing key, never it.
    form_key: [u8; 32],
    /// Keys the hashes of API keys and invite tokens: derived from the signing key, never it.
    access_key: [u8; 32],
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth").field("token_ttl", &self.token_ttl).finish_non_exhaustive()
    }
}

impl Auth {
    pub(crate) fn new(secret: &SecretString, token_ttl: Option<Duration>) -> Self {
        let key = secret.expose_secret().as_bytes();
        let mut validation = Validation::new(Algorithm::HS256);
        // With a lifetime configured, a token must say when it expires: one issued before the
        // lifetime was set carries no `exp` and would otherwise be valid forever.
        let required: &[&str] = if token_ttl.is_some() { &["sub", "exp"] } else { &["sub"] };
        validation.set_required_spec_claims(required);
        validation.leeway = 0;
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let mut state_validation = Validation::new(Algorithm::HS256);
        state_validation.set_required_spec_claims(&["sub", "exp", "jti"]);
        state_validation.leeway = 0;
        Self {
            encoding: EncodingKey::from_secret(key),
            decoding: DecodingKey::from_secret(key),
            validation,
            state_validation,
            token_ttl,
            hashing: Arc::new(Semaphore::new(cores)),
            decoy: OnceLock::new(),
            form_key: Sha256::new()
                .chain_update(b"agentd form token\0")
                .chain_update(key)
                .finalize()
                .into(),
            access_key: Sha256::new()
                .chain_update(b"agentd access secret\0")
                .chain_update(key)
                .finalize()
                .into(),
        }
    }

    /// The form token of the session whose bearer token is `session`: an HMAC of it, so only
    /// this server can make it, and a value planted in a browser (a cookie set by a sibling
    /// subdomain) matches no session.
    pub(crate) fn form_token(&self, session: &str) -> String {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.form_key)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        mac.update(session.as_bytes());
        mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The stored form of a random secret (an API key, an invite token): an HMAC under a key
    /// only this server holds. A secret of 256 random bits cannot be guessed, so a slow hash
    /// (argon2, for passwords people choose) would only cost every request its CPU; the key
    /// means a copy of the database alone cannot even check a guess.
    pub(crate) fn secret_hash(&self, secret: &str) -> String {
        hex::encode(self.secret_mac(secret).finalize().into_bytes())
    }

    /// Whether `secret` is the one `stored` ([`Self::secret_hash`]) was made from, compared in
    /// constant time.
    pub(crate) fn secret_matches(&self, secret: &str, stored: &str) -> bool {
        hex::decode(stored)
            .is_ok_and(|stored| self.secret_mac(secret).verify_slice(&stored).is_ok())
    }

    fn secret_mac(&self, secret: &str) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.access_key)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        mac.update(secret.as_bytes());
        mac
    }

    pub(crate) async fn hash_password(&self, password: &str) -> Result<String> {
        let password = SecretString::from(password);
        self.blocking(move || {
            let salt = SaltString::generate(&mut OsRng);
            Argon2::default()
                .hash_password(password.expose_secret().as_bytes(), &salt)
                .map(|hash| hash.to_string())
                .map_err(|e| Error::internal(format!("hashing a password failed: {e}")))
        })
        .await
    }

    /// Checks `password` against `hash`; with no hash (unknown user) checks a decoy and fails.
    pub(crate) async fn verify_password(
        &self,
        password: &SecretString,
        hash: Option<String>,
    ) -> Result<bool> {
        let known = hash.is_some();
        let hash = match hash {
            Some(hash) => hash,
            None => self.decoy_hash().await?,
        };
        let password = password.clone();
        let matches = self
            .blocking(move || {
                let parsed = PasswordHash::new(&hash).map_err(|e| {
                    Error::internal(format!("stored password hash is unreadable: {e}"))
                })?;
                Ok(Argon2::default()
                    .verify_password(password.expose_secret().as_bytes(), &parsed)
                    .is_ok())
            })
            .await?;
        Ok(known && matches)
    }

    pub(crate) fn issue(&self, user: &UserId, version: i64) -> Result<String> {
        let now = chrono::Utc::now().timestamp();
        let exp = self
            .token_ttl
            .map(|ttl| now.saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)));
        let claims = Claims { sub: user.to_string(), ver: version, iat: now, exp };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| Error::internal(format!("signing a token failed: {e}")))
    }

    /// The claims of a token this server signed and that has not expired; anything else is 401.
    pub(crate) fn verify(&self, token: &str) -> Result<Claims> {
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map(|data| data.claims)
            .map_err(|_| Error::Unauthorized)
    }

    /// A signed OAuth `state` for a workspace, valid for `ttl`.
    pub(crate) fn issue_state(&self, workspace: &WorkspaceId, ttl: Duration) -> Result<String> {
        let exp = chrono::Utc::now()
            .timestamp()
            .saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX));
        let jti = uuid::Uuid::new_v4().to_string();
        let claims =
            StateClaims { sub: workspace.to_string(), purpose: STATE_PURPOSE.into(), exp, jti };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| Error::internal(format!("signing a state failed: {e}")))
    }

    /// A `state`, if it is ours, unexpired and for an install (whether it was spent is the
    /// store's to say).
    pub(crate) fn verify_state(&self, state: &str) -> Option<InstallState> {
        let claims =
            jsonwebtoken::decode::<StateClaims>(state, &self.decoding, &self.state_validation)
                .ok()?
                .claims;
        (claims.purpose == STATE_PURPOSE).then_some(InstallState {
            user_id: claims.sub,
            id: claims.jti,
            expires_at: claims.exp,
        })
    }

    async fn decoy_hash(&self) -> Result<String> {
        if let Some(hash) = self.decoy.get() {
            return Ok(hash.clone());
        }
        let hash = self.hash_password("decoy password that matches nothing").await?;
        Ok(self.decoy.get_or_init(|| hash).clone())
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let _permit = self.hashing.acquire().await.map_err(Error::internal)?;
        tokio::task::spawn_blocking(work).await.map_err(Error::internal)?
    }
}

/// A fresh random secret: 32 bytes from the OS, hex-encoded.
pub(crate) fn random_secret() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::internal(format!("no randomness: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(ttl: Option<Duration>) -> Auth {
        Auth::new(&SecretString::from("test secret"), ttl)
    }

    #[tokio::test]
    async fn a_password_verifies_against_its_own_hash_only() {
        let auth = auth(None);
        let hash = auth.hash_password("correct horse").await.unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(auth.verify_password(&"correct horse".into(), Some(hash.clone())).await.unwrap());
        assert!(!auth.verify_password(&"wrong horse".into(), Some(hash)).await.unwrap());
        assert!(!auth.verify_password(&"correct horse".into(), None).await.unwrap());
    }

    #[test]
    fn tokens_carry_the_user_and_version_and_reject_tampering() {
        let auth = auth(None);
        let user = UserId::generate();
        let token = auth.issue(&user, 7).unwrap();
        let claims = auth.verify(&token).unwrap();
        assert_eq!((claims.sub.as_str(), claims.ver, claims.exp), (user.as_str(), 7, None));

        let other = Auth::new(&SecretString::from("another secret"), None);
        assert!(matches!(other.verify(&token), Err(Error::Unauthorized)));
        assert!(matches!(auth.verify("garbage"), Err(Error::Unauthorized)));
    }

    #[test]
    fn tokens_expire_when_a_lifetime_is_set() {
        let auth = auth(Some(Duration::from_secs(3600)));
        let claims = auth.verify(&auth.issue(&UserId::generate(), 0).unwrap()).unwrap();
        assert_eq!(claims.exp, Some(claims.iat + 3600));

        let expired = Claims { sub: "u".into(), ver: 0, iat: 0, exp: Some(1) };
        let token =
            jsonwebtoken::encode(&Header::new(Algorithm::HS256), &expired, &auth.encoding).unwrap();
        assert!(matches!(auth.verify(&token), Err(Error::Unauthorized)));
    }

    #[test]
    fn install_states_are_bound_to_a_user_and_are_not_access_tokens() {
        let auth = auth(None);
        let user = UserId::generate();
        let workspace = WorkspaceId::personal(&user);
        let state = auth.issue_state(&workspace, Duration::from_secs(600)).unwrap();
        let verified = auth.verify_state(&state).unwrap();
        assert_eq!(verified.user_id, user.as_str());
        let again =
            auth.verify_state(&auth.issue_state(&workspace, Duration::from_secs(9)).unwrap());
        assert_ne!(again.unwrap().id, verified.id, "each state has its own id");
        assert!(auth.verify(&state).is_err(), "a state is not a login");
        let token = auth.issue(&user, 0).unwrap();
        assert!(auth.verify_state(&token).is_none(), "a login is not a state");
        let expired = StateClaims {
            sub: user.to_string(),
            purpose: STATE_PURPOSE.into(),
            exp: 1,
            jti: "j".into(),
        };
        let expired =
            jsonwebtoken::encode(&Header::new(Algorithm::HS256), &expired, &auth.encoding).unwrap();
        assert!(auth.verify_state(&expired).is_none());
    }

    #[test]
    fn random_secrets_differ() {
        let a = random_secret().unwrap();
        assert_eq!(a.len(), 64);
        assert_ne!(a, random_secret().unwrap());
    }
}
