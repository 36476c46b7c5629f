//! A task's place in a distributed trace (W3C Trace Context): the trace its runs belong to and
//! the span they hang under. Chosen when the task is added and stored with it, so every run,
//! on whichever node and after a crash or an approval, continues the same trace.

/// A trace id (32 lowercase hex digits) and a span id (16), neither all zeros: what W3C's
/// `traceparent` calls a valid parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    trace_id: String,
    parent_span_id: String,
}

impl TraceContext {
    /// `None` unless both ids are valid (hex of the right length, not all zeros); upper-case
    /// hex is read as lower.
    pub fn parse(trace_id: &str, parent_span_id: &str) -> Option<Self> {
        let trace_id = valid_hex(trace_id, 32)?;
        let parent_span_id = valid_hex(parent_span_id, 16)?;
        Some(Self { trace_id, parent_span_id })
    }

    pub fn trace_id(&self) -> &str {
        &self.trace_id
    }

    pub fn parent_span_id(&self) -> &str {
        &self.parent_span_id
    }
}

fn valid_hex(text: &str, digits: usize) -> Option<String> {
    let hex = text.len() == digits && text.bytes().all(|b| b.is_ascii_hexdigit());
    let zero = text.bytes().all(|b| b == b'0');
    (hex && !zero).then(|| text.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ids_of_the_right_length_in_hex_and_not_zero_make_a_context() {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let span = "00f067aa0ba902b7";
        let context = TraceContext::parse(trace, span).unwrap();
        assert_eq!((context.trace_id(), context.parent_span_id()), (trace, span));
        assert_eq!(
            TraceContext::parse(&trace.to_uppercase(), span).unwrap().trace_id(),
            trace,
            "read as lower case"
        );
        assert!(TraceContext::parse(&"0".repeat(32), span).is_none());
        assert!(TraceContext::parse(trace, &"0".repeat(16)).is_none());
        assert!(TraceContext::parse(&trace[1..], span).is_none());
        assert!(TraceContext::parse(trace, "00f067aa0ba902bz").is_none());
    }
}
