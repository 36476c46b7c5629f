//! How many input tokens a request makes, counted before it is sent: the budget's worst case
//! (and the context a run keeps) rests on it, so it must never be below what the provider
//! will count.
//!
//! - OpenAI's own models (`gpt-4o`, `gpt-4.1`, `gpt-5`, `o1`/`o3`/`o4`, `gpt-4`, `gpt-3.5`) are
//!   counted with OpenAI's tokenizer (`tiktoken-rs`, the `o200k_base` or `cl100k_base`
//!   encoding), text by text, plus what the chat format adds around each message, tool call
//!   and tool ([`MESSAGE_TOKENS`], [`PART_TOKENS`], [`REPLY_TOKENS`]: above OpenAI's own
//!   accounting).
//! - Every other model (Anthropic's, whose tokenizer is not published; a local server's) is
//!   bounded by the request's bytes, as no byte-level tokenizer makes more tokens of a text
//!   than it has bytes. That bound is safe but about four times the real count for English;
//!   a provider that can count exactly (Anthropic's `count_tokens`) is asked when the bound
//!   would refuse a call (see the runtime's `spend.rs`).
//!
//! Counting is cached per text (a run sends its conversation again with every call: each
//! message is counted once per node), in a bounded map.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Mutex;

use tiktoken_rs::CoreBPE;

use super::{CompletionRequest, Message};

/// Tokens counted for the chat format around each message of a request counted with a
/// tokenizer (the system prompt too): OpenAI's accounting adds 3 and the role's token.
pub const MESSAGE_TOKENS: usize = 5;
/// Tokens counted around each tool call of an earlier answer and each tool offered, beside
/// their texts (a tool's JSON Schema is counted as its JSON text, longer than the form the
/// model is shown).
pub const PART_TOKENS: usize = 8;
/// Tokens counted once per request: OpenAI's accounting primes the reply with 3.
pub const REPLY_TOKENS: usize = 3;

/// Texts shorter than this are counted each time, not cached.
const CACHED_FROM_BYTES: usize = 64;
/// Entries the count cache holds before it is emptied.
const CACHE_ENTRIES: usize = 16_384;

/// OpenAI's encodings, as their models use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// GPT-4o, GPT-4.1, GPT-5, the `o` series.
    O200kBase,
    /// GPT-4 and GPT-3.5.
    Cl100kBase,
}

impl Encoding {
    /// The encoding of an OpenAI model, by its name as sent (an OpenRouter-style `openai/`
    /// prefix is allowed); `None` for a model not known to be OpenAI's.
    pub fn of_openai_model(model: &str) -> Option<Self> {
        let name = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
        let starts = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
        if starts(&["gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4"]) {
            Some(Self::O200kBase)
        } else if starts(&["gpt-4", "gpt-3.5", "gpt-35"]) {
            Some(Self::Cl100kBase)
        } else {
            None
        }
    }

    fn bpe(self) -> &'static CoreBPE {
        match self {
            Self::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Self::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        }
    }
}

/// A run of this many bytes without white space is not tokenized: BPE's merging is quadratic
/// in a piece's length, so such a text is bounded by its bytes instead.
const LONGEST_PIECE: usize = 512;

/// Counts texts with one encoding, caching the counts of longer texts (keyed by a hash seeded
/// per process, so texts that collide cannot be made offline to share a count).
#[derive(Debug, Default)]
pub struct Counter {
    cache: Mutex<HashMap<(Encoding, u64), usize>>,
    seed: std::collections::hash_map::RandomState,
}

impl Counter {
    /// The tokens of `text` in `encoding`.
    pub fn count(&self, encoding: Encoding, text: &str) -> usize {
        if text.len() < CACHED_FROM_BYTES {
            return encoding.bpe().encode_ordinary(text).len();
        }
        if longest_piece(text) > LONGEST_PIECE {
            return text.len();
        }
        let key = (encoding, self.seed.hash_one(text));
        if let Some(count) = self.lock().get(&key) {
            return *count;
        }
        let count = encoding.bpe().encode_ordinary(text).len();
        let mut cache = self.lock();
        if cache.len() >= CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(key, count);
        count
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Encoding, u64), usize>> {
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A bound on the input tokens of `request` counted in `encoding`: each text counted,
    /// plus [`MESSAGE_TOKENS`] for each message, [`PART_TOKENS`] for each tool call and tool,
    /// and [`REPLY_TOKENS`].
    pub fn request(&self, encoding: Encoding, request: &CompletionRequest) -> usize {
        let count = |text: &str| self.count(encoding, text);
        let mut tokens = REPLY_TOKENS + MESSAGE_TOKENS + count(&request.system);
        for message in &request.messages {
            tokens += MESSAGE_TOKENS
                + match message {
                    Message::User(text) => count(text),
                    Message::Assistant { text, tool_calls } => {
                        count(text)
                            + tool_calls
                                .iter()
                                .map(|c| {
                                    PART_TOKENS
                                        + count(&c.id)
                                        + count(&c.name)
                                        + count(&c.arguments)
                                })
                                .sum::<usize>()
                    }
                    Message::ToolResult { call_id, content, .. } => count(call_id) + count(content),
                };
        }
        for tool in &request.tools {
            tokens += PART_TOKENS
                + count(&tool.name)
                + count(&tool.description)
                + count(&tool.parameters.to_string());
        }
        tokens
    }
}

/// The longest run of bytes in `text` without white space.
fn longest_piece(text: &str) -> usize {
    text.split(|c: char| c.is_whitespace()).map(str::len).max().unwrap_or(0)
}

/// A bound on the input tokens of `request` for a model that is not counted with a tokenizer:
/// its bytes, plus [`super::FRAMING_TOKENS`] for each part (see [`CompletionRequest::text_bytes`]).
pub fn byte_bound(request: &CompletionRequest) -> usize {
    request.text_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_models_have_their_encoding_and_others_none() {
        let of = Encoding::of_openai_model;
        assert_eq!(of("gpt-4o-mini"), Some(Encoding::O200kBase));
        assert_eq!(of("gpt-4.1"), Some(Encoding::O200kBase));
        assert_eq!(of("o3-mini"), Some(Encoding::O200kBase));
        assert_eq!(of("gpt-5"), Some(Encoding::O200kBase));
        assert_eq!(of("openai/gpt-4o"), Some(Encoding::O200kBase));
        assert_eq!(of("gpt-4-turbo"), Some(Encoding::Cl100kBase));
        assert_eq!(of("gpt-3.5-turbo"), Some(Encoding::Cl100kBase));
        assert_eq!(of("llama3.1"), None);
        assert_eq!(of("qwen2.5:7b"), None);
        assert_eq!(of("claude-sonnet-4-5"), None);
    }

    #[test]
    fn counts_are_the_tokenizers_and_cached_counts_agree() {
        let counter = Counter::default();
        assert_eq!(counter.count(Encoding::O200kBase, "hello world"), 2);
        let long = "The quick brown fox jumps over the lazy dog. ".repeat(20);
        let first = counter.count(Encoding::Cl100kBase, &long);
        assert_eq!(first, Encoding::Cl100kBase.bpe().encode_ordinary(&long).len());
        assert_eq!(counter.count(Encoding::Cl100kBase, &long), first, "from the cache");
        assert!(!counter.lock().is_empty());
        let unbroken = "x".repeat(LONGEST_PIECE + 1);
        assert_eq!(counter.count(Encoding::O200kBase, &unbroken), unbroken.len(), "its bytes");
    }
}
