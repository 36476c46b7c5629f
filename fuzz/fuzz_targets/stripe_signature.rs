//! `Stripe-Signature` parsing and verification (`agentcore::stripe`).
//!
//! Input layout (so that seeds stay readable): `<header>\n<secret>\n<payload>`. Without a first
//! newline the whole input is the header, signed with the fixtures' secret over an empty payload;
//! without a second one the rest is the secret and the payload is empty. The header and the
//! secret are read as lossy UTF-8, the payload is raw bytes.
//!
//! Properties checked, beyond "never panics":
//! - `SignatureHeader::parse` ignores unknown schemes, refuses a second `t=`, and reads back its
//!   own canonical rendering;
//! - `verify` agrees with a model written from its documentation (some `v1` equals the HMAC under
//!   some secret, then the timestamp is within the tolerance) at several clock readings;
//! - a header made by `sign` verifies for its payload and secret within the tolerance and not
//!   beyond it, survives key rotation (extra `v1`s, `v0`s), and fails for any other payload or
//!   secret.

#![no_main]

use agentcore::stripe::{self, SignatureError, SignatureHeader, TOLERANCE_SECONDS};
use libfuzzer_sys::fuzz_target;
use secrecy::SecretString;

/// The secret of the shared Stripe fixtures' signature vector.
const FIXTURE_SECRET: &str = "whsec_test_secret_for_fixtures";
/// The vector's timestamp, used when the header has none.
const FIXTURE_TIME: i64 = 1_700_000_000;

fuzz_target!(|data: &[u8]| {
    let (header, secret, payload) = split(data);
    let header = String::from_utf8_lossy(header);
    let secret = String::from_utf8_lossy(secret);

    let parsed = check_parse(&header);

    let secrets = [SecretString::from(secret.as_ref()), SecretString::from(FIXTURE_SECRET)];
    let names = [secret.as_ref(), FIXTURE_SECRET];
    assert_eq!(stripe::verify(None, payload, &secrets, FIXTURE_TIME), Err(SignatureError::Missing));
    let base = parsed.as_ref().map_or(FIXTURE_TIME, |h| h.timestamp);
    let matched = parsed.as_ref().map(|h| matches(h, payload, &names));
    for now in clock_readings(base) {
        let got = stripe::verify(Some(&header), payload, &secrets, now);
        let want = model(&parsed, matched, now);
        assert_eq!(got, want, "verify disagrees with the model at now={now}");
    }

    check_sign_round_trip(&secret, base, payload);
});

fn split(data: &[u8]) -> (&[u8], &[u8], &[u8]) {
    let Some(at) = data.iter().position(|&b| b == b'\n') else {
        return (data, FIXTURE_SECRET.as_bytes(), b"");
    };
    let (header, rest) = (&data[..at], &data[at + 1..]);
    match rest.iter().position(|&b| b == b'\n') {
        Some(at) => (header, &rest[..at], &rest[at + 1..]),
        None => (header, rest, b""),
    }
}

fn check_parse(header: &str) -> Result<SignatureHeader, SignatureError> {
    let parsed = SignatureHeader::parse(header);
    // Other schemes are ignored wherever they appear.
    assert_eq!(SignatureHeader::parse(&format!("{header},v0=00")), parsed);
    assert_eq!(SignatureHeader::parse(&format!("v0=zz,{header}")), parsed);
    if let Ok(h) = &parsed {
        // One timestamp only.
        assert_eq!(
            SignatureHeader::parse(&format!("{header},t={}", h.timestamp)),
            Err(SignatureError::BadTimestamp)
        );
        // The canonical form reads back the same; a header whose every `v1` was dropped as
        // non-hex still had one, so its canonical form keeps a non-hex `v1` to stay `Ok`.
        let mut canonical = format!("t={}", h.timestamp);
        for v1 in &h.v1 {
            canonical.push_str(",v1=");
            canonical.push_str(&hex::encode(v1));
        }
        if h.v1.is_empty() {
            canonical.push_str(",v1=not-hex");
        }
        assert_eq!(SignatureHeader::parse(&canonical).as_ref(), Ok(h));
    }
    parsed
}

/// Whether some `v1` of `header` is the HMAC of `payload` under some secret.
fn matches(header: &SignatureHeader, payload: &[u8], secrets: &[&str]) -> bool {
    secrets.iter().any(|secret| {
        let expected = mac(secret, header.timestamp, payload);
        header.v1.iter().any(|candidate| *candidate == expected)
    })
}

/// `verify` as documented: the header parses, a signature matches, then the clock is checked.
fn model(
    parsed: &Result<SignatureHeader, SignatureError>,
    matched: Result<bool, &SignatureError>,
    now: i64,
) -> Result<(), SignatureError> {
    let header = parsed.as_ref().map_err(|e| *e)?;
    if !matched.map_err(|e| *e)? {
        return Err(SignatureError::Mismatch);
    }
    if now.abs_diff(header.timestamp) > TOLERANCE_SECONDS.unsigned_abs() {
        return Err(SignatureError::OutsideTolerance);
    }
    Ok(())
}

/// The `v1` bytes `sign` produces.
fn mac(secret: &str, timestamp: i64, payload: &[u8]) -> Vec<u8> {
    let header = stripe::sign(secret, timestamp, payload);
    let (_, v1) = header.split_once(",v1=").expect("sign writes a v1");
    hex::decode(v1).expect("sign writes hex")
}

fn clock_readings(t: i64) -> Vec<i64> {
    let tol = TOLERANCE_SECONDS;
    // The edges of the tolerance, and a clock at the far end of i64 (`now - t` would overflow).
    let mut nows = vec![t, if t < 0 { i64::MAX } else { i64::MIN }];
    for offset in [-tol - 1, -tol, tol, tol + 1] {
        nows.extend(t.checked_add(offset));
    }
    nows
}

fn check_sign_round_trip(secret: &str, t: i64, payload: &[u8]) {
    let ours = [SecretString::from(secret)];
    let header = stripe::sign(secret, t, payload);
    let v1 = mac(secret, t, payload);
    assert_eq!(v1.len(), 32, "HMAC-SHA256 is 32 bytes");
    assert_eq!(
        SignatureHeader::parse(&header),
        Ok(SignatureHeader { timestamp: t, v1: vec![v1.clone()] })
    );

    assert_eq!(stripe::verify(Some(&header), payload, &ours, t), Ok(()));
    let tol = TOLERANCE_SECONDS;
    for now in [t.checked_add(tol), t.checked_sub(tol)].into_iter().flatten() {
        assert_eq!(stripe::verify(Some(&header), payload, &ours, now), Ok(()), "now={now}");
    }
    for now in [t.checked_add(tol + 1), t.checked_sub(tol + 1)].into_iter().flatten() {
        assert_eq!(
            stripe::verify(Some(&header), payload, &ours, now),
            Err(SignatureError::OutsideTolerance),
            "now={now}"
        );
    }

    // Key rotation: several v1s, v0s and a second configured secret.
    let wrong = "0".repeat(64);
    let rotated = format!("v0={wrong}, t={t} ,v1={wrong},v1={}, v0=x", hex::encode(&v1));
    assert_eq!(stripe::verify(Some(&rotated), payload, &ours, t), Ok(()), "{rotated}");
    let both = [SecretString::from("whsec_other"), SecretString::from(secret)];
    assert_eq!(stripe::verify(Some(&header), payload, &both, t), Ok(()));

    // Any other payload, secret or timestamp fails.
    let mut tampered = payload.to_vec();
    match tampered.first_mut() {
        Some(byte) => *byte ^= 0x01,
        None => tampered.push(b'{'),
    }
    assert_eq!(stripe::verify(Some(&header), &tampered, &ours, t), Err(SignatureError::Mismatch));
    let mut longer = payload.to_vec();
    longer.push(b' ');
    assert_eq!(stripe::verify(Some(&header), &longer, &ours, t), Err(SignatureError::Mismatch));
    let other_secret = [SecretString::from(format!("{secret}x"))];
    assert_eq!(
        stripe::verify(Some(&header), payload, &other_secret, t),
        Err(SignatureError::Mismatch)
    );
    assert_eq!(stripe::verify(Some(&header), payload, &[], t), Err(SignatureError::Mismatch));
    if let Some(other_t) = t.checked_add(1) {
        let moved = header.replacen(&format!("t={t},"), &format!("t={other_t},"), 1);
        assert_eq!(
            stripe::verify(Some(&moved), payload, &ours, other_t),
            Err(SignatureError::Mismatch)
        );
    }
}
