//! Accounts: who a user is and what they typed to become one.

use std::fmt;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

use super::text;

/// A user's id: a UUID (v7, so ids sort by creation) in its hyphenated text form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct UserId(String);

impl UserId {
    pub(crate) fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }

    /// Accepts only the canonical form ids are issued in.
    pub fn parse(value: &str) -> Result<Self, String> {
        match uuid::Uuid::try_parse(value) {
            Ok(id) if id.hyphenated().to_string() == value => Ok(Self(value.to_owned())),
            _ => Err("must be a user id".into()),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn from_trusted(value: String) -> Self {
        Self(value)
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An e-mail address, trimmed and checked. Compared case-insensitively through [`Email::key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email(String);

impl Email {
    /// Trims `value` and brings it to Unicode NFC (`é` typed as one character or as `e` and
    /// an accent is one address), then checks it. Invisible characters (format characters
    /// such as zero-width spaces, text-direction overrides, controls and spaces) are refused:
    /// they make two addresses that look the same.
    pub fn parse(value: &str) -> Result<Self, String> {
        let value: String = value.trim().nfc().collect();
        let value = value.as_str();
        if value.is_empty() {
            return Err("must not be empty".into());
        }
        if value.chars().any(is_invisible) {
            return Err(
                "must not contain invisible characters (spaces, zero-width or text-direction marks)"
                    .into(),
            );
        }
        if text::char_len(value) > 254 {
            return Err("must be at most 254 characters".into());
        }
        let invalid = || Err("must be a valid e-mail address".to_string());
        let Some((local, domain)) = value.rsplit_once('@') else {
            return invalid();
        };
        let local_ok = !local.is_empty()
            && local.len() <= 64
            && !local.starts_with('.')
            && !local.ends_with('.')
            && !local.contains("..")
            && local.chars().all(|c| {
                c.is_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c) || !c.is_ascii()
            });
        let labels: Vec<&str> = domain.split('.').collect();
        let domain_ok = labels.len() >= 2
            && labels.iter().all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| c.is_alphanumeric() || c == '-')
            });
        if local_ok && domain_ok { Ok(Self(value.to_owned())) } else { invalid() }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The form used for uniqueness and look-ups: case-folded (upper then lower case, so
    /// `ß` and `ss`, `ς` and `σ` are one letter) and in NFC.
    pub fn key(&self) -> String {
        fold(&self.0)
    }

    /// The keys to look for when signing in with `typed`: its [`Email::key`] first, then the
    /// forms accounts registered before addresses were normalised may be stored under (the
    /// lower case of what was typed then, in either normal form). Only non-ASCII addresses
    /// have more than one.
    pub fn login_keys(typed: &str) -> Vec<String> {
        let typed = typed.trim();
        let mut keys = vec![fold(&typed.nfc().collect::<String>())];
        let legacy = [
            typed.to_lowercase(),
            typed.nfc().collect::<String>().to_lowercase(),
            typed.nfd().collect::<String>().to_lowercase(),
        ];
        for key in legacy {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }
}

fn fold(value: &str) -> String {
    value.to_uppercase().to_lowercase().nfc().collect()
}

/// Format characters (Unicode category Cf: zero-width spaces and joiners, bidirectional
/// marks, embeddings, overrides and isolates, the byte-order mark, soft hyphen, tags...),
/// controls and white space.
fn is_invisible(c: char) -> bool {
    c.is_control()
        || c.is_whitespace()
        || matches!(
            u32::from(c),
            0xAD | 0x600..=0x605
                | 0x61C
                | 0x6DD
                | 0x70F
                | 0x890..=0x891
                | 0x8E2
                | 0x180E
                | 0x200B..=0x200F
                | 0x202A..=0x202E
                | 0x2060..=0x206F
                | 0xFEFF
                | 0xFFF9..=0xFFFB
                | 0x110BD
                | 0x110CD
                | 0x13430..=0x1343F
                | 0x1BCA0..=0x1BCA3
                | 0x1D173..=0x1D17A
                | 0xE0000..=0xE007F
        )
}

/// A password as typed: 8 to 1,024 characters. Never logged, never printed.
#[derive(Debug, Clone)]
pub struct Password(SecretString);

impl Password {
    pub const MIN_CHARS: usize = 8;
    pub const MAX_CHARS: usize = 1024;

    pub fn parse(value: &str) -> Result<Self, String> {
        let len = text::char_len(value);
        if len < Self::MIN_CHARS {
            return Err(format!("must be at least {} characters", Self::MIN_CHARS));
        }
        if len > Self::MAX_CHARS {
            return Err(format!("must be at most {} characters", Self::MAX_CHARS));
        }
        Ok(Self(SecretString::from(value)))
    }

    pub(crate) fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

text::text_newtype!(
    /// A display name: 1 to 100 characters on one line, trimmed.
    UserName,
    |v| text::non_blank_line(v.trim(), 100)
);

/// What registration needs.
#[derive(Debug, Clone)]
pub struct NewUser {
    pub email: Email,
    pub password: Password,
    pub name: UserName,
}

/// Credentials for logging in. The email is only trimmed: a malformed one simply matches nobody.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub email: String,
    pub password: SecretString,
}

/// A user as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct User {
    pub id: UserId,
    pub email: String,
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_trimmed_and_keyed_case_insensitively() {
        let email = Email::parse("  Ada@Example.COM ").unwrap();
        assert_eq!(email.as_str(), "Ada@Example.COM");
        assert_eq!(email.key(), "ada@example.com");
    }

    #[test]
    fn composed_and_decomposed_forms_are_one_address_and_case_is_folded() {
        let composed = Email::parse("jos\u{e9}@example.com").unwrap();
        let decomposed = Email::parse("jose\u{301}@example.com").unwrap();
        assert_eq!(composed, decomposed, "stored in NFC");
        assert_eq!(composed.key(), decomposed.key());
        assert_eq!(Email::parse("JOS\u{c9}@Example.com").unwrap().key(), composed.key());
        assert_eq!(
            Email::parse("stra\u{df}e@example.com").unwrap().key(),
            Email::parse("STRASSE@example.com").unwrap().key()
        );
        let keys = Email::login_keys("JOSE\u{301}@example.com");
        assert_eq!(keys[0], composed.key());
        assert!(keys.contains(&"jose\u{301}@example.com".to_owned()), "{keys:?}");
        assert_eq!(Email::login_keys("Ada@Example.com"), vec!["ada@example.com".to_owned()]);
    }

    #[test]
    fn invisible_characters_are_refused() {
        for bad in [
            "ada\u{200b}@example.com",
            "ada@exam\u{200d}ple.com",
            "\u{202e}moc.elpmaxe@ada",
            "ad\u{2066}a@example.com",
            "ada\u{feff}@example.com",
            "ada\u{a0}x@example.com",
            "ada\u{ad}@example.com",
        ] {
            let refused = Email::parse(bad).unwrap_err();
            assert!(refused.contains("invisible"), "{bad:?}: {refused}");
        }
    }

    #[test]
    fn malformed_emails_are_refused() {
        for bad in [
            "",
            "ada",
            "ada@",
            "@example.com",
            "ada@example",
            "a b@example.com",
            "ada@exa mple.com",
            "ada@-example.com",
            "ada..b@example.com",
            "ada@example..com",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?} was accepted");
        }
        for good in ["ada@example.com", "a.b+tag@mail.example.co.uk", "x@b-c.io"] {
            assert!(Email::parse(good).is_ok(), "{good:?} was refused");
        }
    }

    #[test]
    fn passwords_have_bounds_in_characters() {
        assert!(Password::parse("1234567").is_err());
        assert!(Password::parse("12345678").is_ok());
        assert!(Password::parse(&"x".repeat(1024)).is_ok());
        assert!(Password::parse(&"x".repeat(1025)).is_err());
    }

    #[test]
    fn user_ids_must_be_canonical() {
        let id = UserId::generate();
        assert_eq!(UserId::parse(id.as_str()).unwrap(), id);
        assert!(UserId::parse(&id.as_str().to_uppercase()).is_err());
        assert!(UserId::parse("nope").is_err());
    }
}
