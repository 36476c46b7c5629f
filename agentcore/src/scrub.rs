//! Secrets out of text that came from elsewhere: a model provider's or an MCP server's error
//! message can echo the credentials it was sent (a proxy answering "Incorrect API key
//! provided: Bearer sk-..."), and that text becomes a task's error, an activity entry, a
//! Discord post and a log line. Before it goes anywhere, every configured secret is masked,
//! and so is anything shaped like a key: a token after `Bearer`, a well-known key prefix
//! (`sk-`, `ghp_`, `xoxb-`, `AKIA`...), or a long run of mixed letters and digits.

/// What a masked secret reads as.
pub const MASK: &str = "[redacted]";

/// Prefixes of API keys and tokens as the big providers issue them.
const KEY_PREFIXES: [&str; 16] = [
    "sk-",
    "sk_",
    "pk_",
    "rk_",
    "whsec_",
    "xoxb-",
    "xoxp-",
    "xapp-",
    "ghp_",
    "gho_",
    "ghs_",
    "github_pat_",
    "glpat-",
    "AKIA",
    "AIza",
    "hf_",
];
/// Words after which the next token is a credential (`Bearer abc...`, `api_key=abc...`).
const CREDENTIAL_WORDS: [&str; 10] = [
    "bearer", "basic", "bot", "token", "key", "apikey", "api_key", "api-key", "secret", "password",
];
/// A token this long, of letters and digits mixed, is taken for a key.
const LONG_TOKEN: usize = 32;

/// Masks the configured secrets it was given, and key-shaped strings.
#[derive(Debug, Clone, Default)]
pub struct Scrubber {
    /// Longest first, so a secret that contains another is masked whole.
    secrets: Vec<String>,
}

impl Scrubber {
    /// A scrubber for `secrets` (those shorter than 8 characters are left to the key shapes:
    /// masking a short word everywhere would garble the text).
    pub fn new<S: AsRef<str>>(secrets: impl IntoIterator<Item = S>) -> Self {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .map(|s| s.as_ref().trim().to_owned())
            .filter(|s| s.chars().count() >= 8)
            .collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// `text` with every configured secret and key-shaped string masked.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        key_shaped(&out)
    }
}

/// `text` with key-shaped tokens masked (see the module's documentation).
pub fn key_shaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut previous: Option<(&str, &str)> = None; // (token, the separator after it)
    let mut rest = text;
    while !rest.is_empty() {
        let start = rest.find(is_token_char).unwrap_or(rest.len());
        let (separator, tail) = rest.split_at(start);
        out.push_str(separator);
        if let Some((_, after)) = previous.as_mut() {
            *after = separator;
        }
        if tail.is_empty() {
            break;
        }
        let end = tail.find(|c: char| !is_token_char(c)).unwrap_or(tail.len());
        let (token, remainder) = tail.split_at(end);
        if is_key(token, previous) {
            out.push_str(MASK);
        } else {
            out.push_str(token);
        }
        previous = Some((token, ""));
        rest = remainder;
    }
    out
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn is_key(token: &str, previous: Option<(&str, &str)>) -> bool {
    let letters = token.chars().any(|c| c.is_ascii_alphabetic());
    let digits = token.chars().any(|c| c.is_ascii_digit());
    if token.len() >= 16 && KEY_PREFIXES.iter().any(|p| token.starts_with(p)) {
        return true;
    }
    if let Some((word, separator)) = previous
        && CREDENTIAL_WORDS.contains(&word.to_ascii_lowercase().as_str())
        && token.len() >= 8
    {
        let assigned = separator.contains('=') || separator.contains(':');
        let spaced = separator.trim().is_empty() && !separator.is_empty();
        // `api_key=abc...`, `token: abc...`; after a space (`Bearer abc...`) only what does not
        // read as a word.
        if assigned || (spaced && (digits || token.len() >= 20)) {
            return true;
        }
    }
    token.len() >= LONG_TOKEN && letters && digits && !is_uuid(token)
}

/// A UUID names a task or a request, not a credential.
fn is_uuid(token: &str) -> bool {
    token.len() == 36
        && token.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_secrets_and_key_shapes_are_masked() {
        let scrubber = Scrubber::new(["sk-LEAKY-OPERATOR-KEY-123", "short"]);
        assert_eq!(
            scrubber.scrub("Incorrect API key provided: Bearer sk-LEAKY-OPERATOR-KEY-123"),
            "Incorrect API key provided: Bearer [redacted]"
        );
        assert_eq!(scrubber.scrub("bad key sk-LEAKY-OPERATOR-KEY-123."), "bad key [redacted].");
        for (text, masked) in [
            ("Authorization: Bearer abc123def456", "Authorization: Bearer [redacted]"),
            ("got api_key=hunter2hunter2 in query", "got api_key=[redacted] in query"),
            ("key ghp_0123456789abcdefABCDEF leaked", "key [redacted] leaked"),
            ("AKIAIOSFODNN7EXAMPLE is not yours", "[redacted] is not yours"),
            (
                "token 9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddcc rejected",
                "token [redacted] rejected",
            ),
        ] {
            assert_eq!(scrubber.scrub(text), masked, "{text}");
        }
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let scrubber = Scrubber::new(["short"]);
        for text in [
            "Incorrect API key provided: please check it",
            "openai answered 503 Service Unavailable: the model is overloaded",
            "task 0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b failed at https://api.example.com/v1/chat",
            "The bot answered quickly",
            "context_length_exceeded: maximum context length is 128000 tokens",
            "a short word stays short",
        ] {
            assert_eq!(scrubber.scrub(text), text);
        }
    }
}
