//! Discord interaction signatures (`agentcore::discord::signature`) and the decoding of an
//! interaction's body (`agentcore::discord::interaction`).
//!
//! Input layout: `<timestamp>\n<signature hex>\n<body>`. Without newlines the whole input is
//! the body, with the fixture timestamp and no signature given. The timestamp and signature
//! are read as lossy UTF-8, the body is raw bytes.
//!
//! Properties checked, beyond "never panics":
//! - the given signature verifies only if it is the key's signature over timestamp + body and
//!   the timestamp is within the tolerance;
//! - our own signature over timestamp + body verifies within the tolerance and not beyond it,
//!   and fails for any other body, timestamp, or key;
//! - any body that decodes as an interaction reads as one request, and a command that reads
//!   as one has a label; answers built from its text stay within Discord's limits.

#![no_main]

use agentcore::discord::interaction::{Interaction, MAX_CONTENT, wire};
use agentcore::discord::signature::{PublicKey, SignatureError, TOLERANCE_SECONDS};
use agentcore::domain::interaction::{Reply, Request};
use ed25519_dalek::{Signer, SigningKey};
use libfuzzer_sys::fuzz_target;

const FIXTURE_TIME: i64 = 1_700_000_000;

fuzz_target!(|data: &[u8]| {
    let (timestamp, signature, body) = split(data);
    let key = SigningKey::from_bytes(&[7; 32]);
    let public = PublicKey::parse(&hex::encode(key.verifying_key().to_bytes())).unwrap();
    let now = timestamp.trim().parse::<i64>().unwrap_or(FIXTURE_TIME);

    // The given signature: accepted exactly when it is ours and the time is right.
    let given = public.verify(signature.as_deref(), Some(&timestamp), body, now);
    let ours = sign(&key, &timestamp, body);
    match (&signature, timestamp.parse::<i64>()) {
        (None, _) => assert_eq!(given, Err(SignatureError::Missing)),
        (Some(s), Ok(_)) if s.trim().eq_ignore_ascii_case(&ours) => assert_eq!(given, Ok(())),
        (Some(_), _) => assert!(given.is_err()),
    }

    // Our own signature, at the edges of the tolerance.
    if let Ok(t) = timestamp.parse::<i64>() {
        for (offset, fits) in [
            (0, true),
            (TOLERANCE_SECONDS, true),
            (-TOLERANCE_SECONDS, true),
            (TOLERANCE_SECONDS + 1, false),
        ] {
            let Some(at) = t.checked_add(offset) else { continue };
            let verified = public.verify(Some(&ours), Some(&timestamp), body, at);
            if fits {
                assert_eq!(verified, Ok(()), "offset {offset}");
            } else {
                assert_eq!(verified, Err(SignatureError::OutsideTolerance));
            }
        }
        let mut changed = body.to_vec();
        match changed.first_mut() {
            Some(byte) => *byte ^= 0x01,
            None => changed.push(b'{'),
        }
        assert_eq!(
            public.verify(Some(&ours), Some(&timestamp), &changed, t),
            Err(SignatureError::Mismatch)
        );
        let other = PublicKey::parse(&hex::encode(
            SigningKey::from_bytes(&[8; 32]).verifying_key().to_bytes(),
        ))
        .unwrap();
        assert_eq!(
            other.verify(Some(&ours), Some(&timestamp), body, t),
            Err(SignatureError::Mismatch)
        );
    }

    // Decoding: whatever parses is read without panicking, and answers fit Discord.
    if let Ok(parsed) = serde_json::from_slice::<Interaction>(body) {
        match parsed.request() {
            Request::Command(command) => {
                assert!(command.label().starts_with('/'));
                let _ = command.changes();
            }
            Request::Decide { approval_id, .. } => assert!(!approval_id.is_empty()),
            Request::Cancel { task_id } => assert!(!task_id.is_empty()),
            Request::Ping | Request::Autocomplete { .. } | Request::Unknown => {}
        }
        if let Some(member) = &parsed.member {
            let _ = member.may_change(&[]);
            let name = member.display_name();
            let answer = wire(&Reply::private(name.repeat(3)));
            let content = answer["data"]["content"].as_str().unwrap();
            assert!(content.chars().count() <= MAX_CONTENT);
        }
    }
});

fn split(data: &[u8]) -> (String, Option<String>, &[u8]) {
    let Some(at) = data.iter().position(|&b| b == b'\n') else {
        return (FIXTURE_TIME.to_string(), None, data);
    };
    let timestamp = String::from_utf8_lossy(&data[..at]).into_owned();
    let rest = &data[at + 1..];
    match rest.iter().position(|&b| b == b'\n') {
        Some(at) => {
            (timestamp, Some(String::from_utf8_lossy(&rest[..at]).into_owned()), &rest[at + 1..])
        }
        None => (timestamp, None, rest),
    }
}

fn sign(key: &SigningKey, timestamp: &str, body: &[u8]) -> String {
    let mut message = timestamp.as_bytes().to_vec();
    message.extend_from_slice(body);
    hex::encode(key.sign(&message).to_bytes())
}
