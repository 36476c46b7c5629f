//! Standard Webhooks (standardwebhooks.com): how the service signs the webhooks it sends and
//! checks the ones it receives, so that any receiver library verifies ours and any sender
//! library's calls reach our triggers.
//!
//! A message carries three headers: `webhook-id` (the message's id, the same on every retry),
//! `webhook-timestamp` (Unix seconds when this attempt was signed) and `webhook-signature`
//! (`v1,<base64 HMAC-SHA256 over "id.timestamp.body">`, several separated by spaces while a
//! secret is being rotated). A secret is `whsec_` followed by the base64 of its key bytes.
//!
//! Nothing here touches the database or the network.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::Sha256;

/// How far a signed timestamp may be from the receiver's clock, either way (the figure every
/// Standard Webhooks library uses).
pub const TOLERANCE_SECONDS: i64 = 300;
/// What every secret starts with.
pub const SECRET_PREFIX: &str = "whsec_";
/// The bytes of key in a secret the service makes.
pub const KEY_BYTES: usize = 32;
/// The fewest and most key bytes a secret may hold (the specification's range).
pub const KEY_BYTES_RANGE: std::ops::RangeInclusive<usize> = 24..=64;
/// The longest `webhook-id` accepted (ids the service makes are far shorter).
pub const MAX_ID_CHARS: usize = 256;
/// The most signatures one `webhook-signature` header may carry.
pub const MAX_SIGNATURES: usize = 8;

type HmacSha256 = Hmac<Sha256>;

/// Why a message was refused. Every variant is answered the same way to the caller; the
/// variant is for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the webhook-id, webhook-timestamp or webhook-signature header is missing")]
    Missing,
    #[error("the webhook-id header is empty, too long or not printable ASCII")]
    BadId,
    #[error("the webhook-timestamp header is not a whole number of seconds")]
    BadTimestamp,
    #[error("the signed timestamp is more than {TOLERANCE_SECONDS} seconds away")]
    OutsideTolerance,
    #[error("no v1 signature matches the secret")]
    Mismatch,
}

/// Why a secret is not a Standard Webhooks secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a webhook secret is `whsec_` and the base64 of 24 to 64 bytes")]
pub struct BadSecret;

/// A signing key: the bytes a `whsec_` secret stands for.
#[derive(Clone)]
pub struct SigningKey(Vec<u8>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(..)")
    }
}

impl SigningKey {
    /// A new random key, and its secret as shown once to the person who asked for it.
    pub fn generate() -> Result<(SigningKey, SecretString), getrandom::Error> {
        let mut key = vec![0u8; KEY_BYTES];
        getrandom::fill(&mut key)?;
        let secret = SecretString::from(format!("{SECRET_PREFIX}{}", STANDARD.encode(&key)));
        Ok((SigningKey(key), secret))
    }

    /// The key of a `whsec_...` secret (the prefix may be left out, as the libraries allow).
    pub fn from_secret(secret: &SecretString) -> Result<SigningKey, BadSecret> {
        let text = secret.expose_secret();
        let encoded = text.strip_prefix(SECRET_PREFIX).unwrap_or(text);
        let key = STANDARD.decode(encoded).map_err(|_| BadSecret)?;
        if KEY_BYTES_RANGE.contains(&key.len()) { Ok(SigningKey(key)) } else { Err(BadSecret) }
    }

    /// The secret this key is (`whsec_` and the base64 of the key).
    pub fn secret(&self) -> SecretString {
        SecretString::from(format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.0)))
    }

    /// `v1,<base64 signature>` of one message.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        format!("v1,{}", STANDARD.encode(self.mac(id, timestamp, body).finalize().into_bytes()))
    }

    fn mac(&self, id: &str, timestamp: i64, body: &[u8]) -> HmacSha256 {
        #[allow(clippy::expect_used, reason = "HMAC takes a key of any length")]
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    fn matches(&self, id: &str, timestamp: i64, body: &[u8], signature: &[u8]) -> bool {
        self.mac(id, timestamp, body).verify_slice(signature).is_ok()
    }
}

/// The `webhook-signature` header of a message signed with each key (all of them during a
/// rotation's overlap, the newest first).
pub fn signature_header(keys: &[SigningKey], id: &str, timestamp: i64, body: &[u8]) -> String {
    keys.iter().map(|key| key.sign(id, timestamp, body)).collect::<Vec<_>>().join(" ")
}

/// The three headers of a received message, as sent.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    pub id: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub signature: Option<&'a str>,
}

/// A message that passed [`verify`]: its id and signed timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub id: String,
    pub timestamp: i64,
}

/// Checks a received message against the exact bytes of its body: the id is present and
/// sane, the timestamp within [`TOLERANCE_SECONDS`] of `now` (Unix seconds) either way, and
/// one `v1` signature matches one of `keys` (compared in constant time).
pub fn verify(
    keys: &[SigningKey],
    received: Received<'_>,
    body: &[u8],
    now: i64,
) -> Result<Verified, SignatureError> {
    let (Some(id), Some(timestamp), Some(signature)) =
        (received.id, received.timestamp, received.signature)
    else {
        return Err(SignatureError::Missing);
    };
    let id = id.trim();
    if id.is_empty() || id.len() > MAX_ID_CHARS || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(SignatureError::BadId);
    }
    let timestamp: i64 = timestamp.trim().parse().map_err(|_| SignatureError::BadTimestamp)?;
    if timestamp.abs_diff(now) > TOLERANCE_SECONDS.unsigned_abs() {
        return Err(SignatureError::OutsideTolerance);
    }
    let matched = signature
        .split(' ')
        .filter(|part| !part.is_empty())
        .take(MAX_SIGNATURES)
        .filter_map(|part| part.strip_prefix("v1,"))
        .filter_map(|encoded| STANDARD.decode(encoded).ok())
        .any(|decoded| keys.iter().any(|key| key.matches(id, timestamp, body, &decoded)));
    if matched {
        Ok(Verified { id: id.to_owned(), timestamp })
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    /// The example of the specification's reference libraries (the same secret, id, timestamp
    /// and body give this signature in each of them).
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn key() -> SigningKey {
        SigningKey::from_secret(&SecretString::from(SECRET)).unwrap()
    }

    fn received(signature: &str, timestamp: &str) -> (String, String, String) {
        (ID.to_owned(), timestamp.to_owned(), signature.to_owned())
    }

    fn check(
        parts: &(String, String, String),
        body: &[u8],
        now: i64,
    ) -> Result<Verified, SignatureError> {
        let received =
            Received { id: Some(&parts.0), timestamp: Some(&parts.1), signature: Some(&parts.2) };
        verify(&[key()], received, body, now)
    }

    #[test]
    fn signs_as_the_reference_libraries_do() {
        assert_eq!(key().sign(ID, TIMESTAMP, BODY), SIGNATURE);
        assert_eq!(key().secret().expose_secret(), SECRET);
    }

    #[test]
    fn accepts_a_good_signature_among_others_within_the_window() {
        let ts = TIMESTAMP.to_string();
        let one = received(SIGNATURE, &ts);
        assert_eq!(check(&one, BODY, TIMESTAMP).unwrap().id, ID);
        assert!(check(&one, BODY, TIMESTAMP + TOLERANCE_SECONDS).is_ok());
        assert!(check(&one, BODY, TIMESTAMP - TOLERANCE_SECONDS).is_ok());
        let among = received(&format!("v2,abc v1,Zm9v {SIGNATURE}"), &ts);
        assert!(check(&among, BODY, TIMESTAMP).is_ok());
    }

    #[test]
    fn refuses_what_does_not_match_or_is_out_of_time() {
        let ts = TIMESTAMP.to_string();
        let good = received(SIGNATURE, &ts);
        assert_eq!(check(&good, b"{\"test\": 1}", TIMESTAMP), Err(SignatureError::Mismatch));
        assert_eq!(
            check(&good, BODY, TIMESTAMP + TOLERANCE_SECONDS + 1),
            Err(SignatureError::OutsideTolerance)
        );
        assert_eq!(
            check(&good, BODY, TIMESTAMP - TOLERANCE_SECONDS - 1),
            Err(SignatureError::OutsideTolerance)
        );
        let other_time = received(SIGNATURE, &(TIMESTAMP + 1).to_string());
        assert_eq!(check(&other_time, BODY, TIMESTAMP), Err(SignatureError::Mismatch));
        assert_eq!(check(&received(SIGNATURE, "soon"), BODY, 0), Err(SignatureError::BadTimestamp));
        assert_eq!(check(&received("v1,!!!", &ts), BODY, TIMESTAMP), Err(SignatureError::Mismatch));
        let missing = Received { id: None, timestamp: Some("1"), signature: Some(SIGNATURE) };
        assert_eq!(verify(&[key()], missing, BODY, 1), Err(SignatureError::Missing));
        let bad_id = Received { id: Some("a b"), timestamp: Some(&ts), signature: Some(SIGNATURE) };
        assert_eq!(verify(&[key()], bad_id, BODY, TIMESTAMP), Err(SignatureError::BadId));
    }

    #[test]
    fn a_rotation_signs_with_every_key_and_each_verifies() {
        let (new, _) = SigningKey::generate().unwrap();
        let header = signature_header(&[new.clone(), key()], ID, TIMESTAMP, BODY);
        assert_eq!(header.split(' ').count(), 2);
        let ts = TIMESTAMP.to_string();
        let received = Received { id: Some(ID), timestamp: Some(&ts), signature: Some(&header) };
        assert!(verify(&[key()], received, BODY, TIMESTAMP).is_ok());
        assert!(verify(&[new], received, BODY, TIMESTAMP).is_ok());
    }

    #[test]
    fn secrets_are_checked() {
        let (key, secret) = SigningKey::generate().unwrap();
        assert!(secret.expose_secret().starts_with(SECRET_PREFIX));
        assert_eq!(SigningKey::from_secret(&secret).unwrap().0, key.0);
        for bad in ["whsec_", "whsec_not base64", "whsec_c2hvcnQ="] {
            assert!(SigningKey::from_secret(&SecretString::from(bad)).is_err(), "{bad}");
        }
    }
}
