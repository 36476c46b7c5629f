//! Registering, logging in and out, and recognising tokens.

use serde::{Deserialize, Serialize};

use super::{Core, Principal, unauthorized_unless};
use crate::domain::now;
use crate::domain::user::{Credentials, Email, NewUser, User, UserId};
use crate::error::{Conflict, Error, Result};
use crate::store::UserRecord;

/// What registering or logging in returns: a token and who it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Session {
    pub access_token: String,
    pub token_type: String,
    pub user: User,
}

impl Core {
    /// Creates an account. A second account for the same email (in any letter case) is
    /// `email_taken`, even when both registrations race.
    pub async fn register(&self, input: NewUser) -> Result<Session> {
        // An account made before addresses were normalised may hold this address under
        // another key (as it was typed then).
        for key in Email::login_keys(input.email.as_str()).iter().skip(1) {
            if self.store().user_by_email_key(key).await?.is_some() {
                return Err(Error::conflict(
                    Conflict::EmailTaken,
                    "An account with this email already exists.",
                ));
            }
        }
        let password_hash = self.auth().hash_password(input.password.expose()).await?;
        let record = UserRecord {
            id: UserId::generate(),
            email: input.email.as_str().to_owned(),
            email_key: input.email.key(),
            name: input.name.as_str().to_owned(),
            password_hash,
            token_version: 0,
            created_at: now(),
        };
        self.store().insert_user(&record).await?;
        tracing::info!(user_id = %record.id, "user registered");
        self.session(&record)
    }

    /// Exchanges an email and password for a token. Every failure is the same 401, and takes
    /// as long whether or not the email exists.
    pub async fn login(&self, credentials: Credentials) -> Result<Session> {
        // No registered email holds a NUL (registration refuses it), and PostgreSQL cannot
        // even compare such a text: it is simply no one's.
        let mut record = None;
        if !credentials.email.contains('\0') {
            for key in Email::login_keys(&credentials.email) {
                record = self.store().user_by_email_key(&key).await?;
                if record.is_some() {
                    break;
                }
            }
        }
        let hash = record.as_ref().map(|r| r.password_hash.clone());
        if !self.auth().verify_password(&credentials.password, hash).await? {
            return Err(Error::Unauthorized);
        }
        self.session(&unauthorized_unless(record)?)
    }

    /// The token a dashboard form of the session `session_token` must carry (CSRF): bound to
    /// that session and made with a key only this server holds.
    pub fn form_token(&self, session_token: &str) -> String {
        self.auth().form_token(session_token)
    }

    /// The signed-in person; an API key is `forbidden` (it is no person).
    pub async fn me(&self, who: &Principal) -> Result<User> {
        let record = unauthorized_unless(self.store().user_by_id(who.user()?).await?)?;
        Ok(user_of(&record))
    }

    /// Revokes every session token of the caller, on every device. API keys stay: they belong
    /// to a workspace, not to a session.
    pub async fn logout(&self, who: &Principal) -> Result<()> {
        let user = who.user()?;
        let version = self.store().bump_token_version(user).await?;
        self.access().tokens.forget(user);
        tracing::info!(user_id = %user, token_version = version, "tokens revoked");
        Ok(())
    }

    fn session(&self, record: &UserRecord) -> Result<Session> {
        Ok(Session {
            access_token: self.auth().issue(&record.id, record.token_version)?,
            token_type: "Bearer".into(),
            user: user_of(record),
        })
    }
}

fn user_of(record: &UserRecord) -> User {
    User { id: record.id.clone(), email: record.email.clone(), name: record.name.clone() }
}
