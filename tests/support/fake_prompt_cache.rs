//! The fake model server's prompt caches, as the providers describe theirs, so a test sees
//! what a request's layout earns: Anthropic caches the prefix up to each block marked
//! `cache_control` (tools, then system, then the messages' blocks; at most 4 marks; not below
//! 1,024 tokens) and reports `cache_creation_input_tokens` and `cache_read_input_tokens`
//! apart from `input_tokens`; OpenAI caches every prompt's prefix on its own and reports the
//! longest one seen before (at least 1,024 tokens, in steps of 128) as
//! `prompt_tokens_details.cached_tokens`, inside `prompt_tokens`.
//!
//! The fake counts a token for every 4 bytes of a block's JSON (without its `cache_control`).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Value, json};

/// Neither provider caches a shorter prefix (Anthropic's minimum for Sonnet, OpenAI's).
pub const MIN_CACHED_TOKENS: i64 = 1024;
/// Anthropic refuses a request with more blocks marked `cache_control`.
pub const MAX_BREAKPOINTS: usize = 4;

/// The prefixes each provider has cached, by a hash of the model and the blocks.
#[derive(Debug, Default)]
pub struct PromptCaches {
    anthropic: HashSet<u64>,
    openai: HashSet<u64>,
}

/// The cache tokens of one answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cached {
    pub read: i64,
    pub written: i64,
}

/// One block of a prompt as a cache sees it.
struct Block {
    /// The tokens of the prompt up to and with this block.
    tokens_through: i64,
    /// The hash of the model and every block up to and with this one.
    prefix: u64,
    breakpoint: bool,
}

impl PromptCaches {
    /// What Anthropic's cache reads and writes for `body`; `Err` the message of its 400 when
    /// the request has too many breakpoints.
    pub fn anthropic(&mut self, body: &Value) -> Result<Cached, String> {
        let blocks = prefixes(body, anthropic_blocks(body));
        let marks = blocks.iter().filter(|b| b.breakpoint).count();
        if marks > MAX_BREAKPOINTS {
            return Err(format!(
                "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {marks}."
            ));
        }
        let Some(last) = blocks.iter().rposition(|b| b.breakpoint) else {
            return Ok(Cached::default());
        };
        let read = blocks[..=last]
            .iter()
            .rev()
            .find(|b| self.anthropic.contains(&b.prefix))
            .map_or(0, |b| b.tokens_through);
        let through = blocks[last].tokens_through;
        if through < MIN_CACHED_TOKENS {
            return Ok(Cached { read, written: 0 });
        }
        for block in blocks.iter().filter(|b| b.breakpoint && b.tokens_through >= MIN_CACHED_TOKENS)
        {
            self.anthropic.insert(block.prefix);
        }
        Ok(Cached { read, written: through - read })
    }

    /// The tokens OpenAI reads from its cache for `body`: the longest prefix of an earlier
    /// request, when long enough; every prefix of this one is cached for the next.
    pub fn openai(&mut self, body: &Value) -> i64 {
        let blocks = prefixes(body, openai_blocks(body));
        let longest = blocks
            .iter()
            .rev()
            .find(|b| self.openai.contains(&b.prefix))
            .map_or(0, |b| b.tokens_through);
        self.openai.extend(blocks.iter().map(|b| b.prefix));
        if longest < MIN_CACHED_TOKENS { 0 } else { longest - longest % 128 }
    }
}

/// Anthropic's order: tools, system, then each message's blocks (a string content is one
/// text block); each with whether it is marked.
fn anthropic_blocks(body: &Value) -> Vec<(Value, bool)> {
    let mut blocks: Vec<Value> = items(&body["tools"]).to_vec();
    match &body["system"] {
        Value::String(text) => blocks.push(json!({"type": "text", "text": text})),
        system => blocks.extend(items(system).iter().cloned()),
    }
    for message in items(&body["messages"]) {
        let role = &message["role"];
        let content = match &message["content"] {
            Value::String(text) => vec![json!({"type": "text", "text": text})],
            content => items(content).to_vec(),
        };
        blocks.extend(content.into_iter().map(|block| json!({"role": role, "block": block})));
    }
    blocks
        .into_iter()
        .map(|mut block| {
            let inner = if block.get("block").is_some() { &mut block["block"] } else { &mut block };
            let marked = inner.as_object_mut().and_then(|o| o.remove("cache_control")).is_some();
            (block, marked)
        })
        .collect()
}

/// OpenAI's order: the tools, then each message whole.
fn openai_blocks(body: &Value) -> Vec<(Value, bool)> {
    let tools = items(&body["tools"]).iter().cloned();
    tools.chain(items(&body["messages"]).iter().cloned()).map(|block| (block, false)).collect()
}

fn prefixes(body: &Value, blocks: Vec<(Value, bool)>) -> Vec<Block> {
    let mut hasher = DefaultHasher::new();
    body["model"].to_string().hash(&mut hasher);
    let mut tokens = 0;
    blocks
        .into_iter()
        .map(|(block, breakpoint)| {
            let text = block.to_string();
            text.hash(&mut hasher);
            tokens += (text.len() as i64 + 3) / 4;
            Block { tokens_through: tokens, prefix: hasher.clone().finish(), breakpoint }
        })
        .collect()
}

fn items(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}
