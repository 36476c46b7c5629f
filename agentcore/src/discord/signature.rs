//! The signature on an interaction Discord POSTs: `X-Signature-Ed25519` (hex) over
//! `X-Signature-Timestamp` followed by the exact body bytes, made with the application's key;
//! verified with its public key (hex, as the developer portal shows it).

use ed25519_dalek::{Signature, VerifyingKey};

/// How far the signed timestamp may be from this node's clock, either way. Discord delivers at
/// once; an old timestamp is a replay.
pub const TOLERANCE_SECONDS: i64 = 300;

/// Why an interaction's signature was refused. Every variant is answered the same way (401);
/// the variant is for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the X-Signature-Ed25519 or X-Signature-Timestamp header is missing")]
    Missing,
    #[error("the application's public key is not 32 bytes of hex")]
    BadKey,
    #[error("the signature is not 64 bytes of hex")]
    Malformed,
    #[error("the timestamp is not unix seconds")]
    BadTimestamp,
    #[error("the signed timestamp is more than {TOLERANCE_SECONDS} seconds away")]
    OutsideTolerance,
    #[error("the signature does not match the body")]
    Mismatch,
}

/// The application's public key, parsed once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

impl PublicKey {
    /// 64 hex characters, as Discord shows an application's public key.
    pub fn parse(hex_key: &str) -> Result<Self, SignatureError> {
        let bytes: [u8; 32] = hex::decode(hex_key.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(SignatureError::BadKey)?;
        VerifyingKey::from_bytes(&bytes).map(Self).map_err(|_| SignatureError::BadKey)
    }

    /// Checks `signature` over `timestamp` + `body`, and that `timestamp` is within
    /// [`TOLERANCE_SECONDS`] of `now` (unix seconds).
    pub fn verify(
        &self,
        signature: Option<&str>,
        timestamp: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<(), SignatureError> {
        let (Some(signature), Some(timestamp)) = (signature, timestamp) else {
            return Err(SignatureError::Missing);
        };
        let bytes: [u8; 64] = hex::decode(signature.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(SignatureError::Malformed)?;
        let signed_at = timestamp.parse::<i64>().map_err(|_| SignatureError::BadTimestamp)?;
        if (now - signed_at).abs() > TOLERANCE_SECONDS {
            return Err(SignatureError::OutsideTolerance);
        }
        let mut message = Vec::with_capacity(timestamp.len() + body.len());
        message.extend_from_slice(timestamp.as_bytes());
        message.extend_from_slice(body);
        self.0
            .verify_strict(&message, &Signature::from_bytes(&bytes))
            .map_err(|_| SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::{Signer, SigningKey};

    use super::*;

    fn signed(key: &SigningKey, timestamp: &str, body: &str) -> String {
        hex::encode(key.sign(format!("{timestamp}{body}").as_bytes()).to_bytes())
    }

    #[test]
    fn a_signature_over_timestamp_and_body_verifies_and_nothing_else_does() {
        let key = SigningKey::from_bytes(&[9; 32]);
        let public = PublicKey::parse(&hex::encode(key.verifying_key().to_bytes())).unwrap();
        let body = r#"{"type":1}"#;
        let good = signed(&key, "1700000000", body);
        assert_eq!(
            public.verify(Some(&good), Some("1700000000"), body.as_bytes(), 1700000100),
            Ok(())
        );
        let changed = br#"{"type":2}"#;
        assert_eq!(
            public.verify(Some(&good), Some("1700000000"), changed, 1700000100),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            public.verify(Some(&good), Some("1700000001"), body.as_bytes(), 1700000100),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            public.verify(Some(&good), Some("1700000000"), body.as_bytes(), 1700000301),
            Err(SignatureError::OutsideTolerance)
        );
        let other = SigningKey::from_bytes(&[8; 32]);
        let forged = signed(&other, "1700000000", body);
        assert_eq!(
            public.verify(Some(&forged), Some("1700000000"), body.as_bytes(), 1700000000),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(public.verify(None, Some("1"), b"", 1), Err(SignatureError::Missing));
        assert_eq!(public.verify(Some("zz"), Some("1"), b"", 1), Err(SignatureError::Malformed));
        assert_eq!(
            public.verify(Some(&good), Some("soon"), body.as_bytes(), 1),
            Err(SignatureError::BadTimestamp)
        );
    }

    #[test]
    fn keys_must_be_32_bytes_of_hex() {
        assert_eq!(PublicKey::parse("abc"), Err(SignatureError::BadKey));
        assert_eq!(PublicKey::parse(&"g".repeat(64)), Err(SignatureError::BadKey));
    }
}
