//! Server-Sent Events as the service sends them, read from a body that arrives in pieces:
//! `id`, `event` and `data` fields, comment lines (`: keep-alive`), a blank line ending each
//! message (<https://html.spec.whatwg.org/multipage/server-sent-events.html>).

/// One message of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The `id` field, when the message had one.
    pub id: Option<String>,
    /// The `event` field (`message` when absent).
    pub event: String,
    /// The `data` fields, joined by newlines.
    pub data: String,
}

/// Bytes in, whole messages out.
#[derive(Debug, Default)]
pub struct Parser {
    /// What came after the last complete line.
    pending: Vec<u8>,
    id: Option<String>,
    event: Option<String>,
    data: Option<String>,
}

impl Parser {
    /// Takes the next piece of the body; returns the messages it completed.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Message> {
        self.pending.extend_from_slice(bytes);
        let mut messages = Vec::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line[..end]);
            let line = line.strip_suffix('\r').unwrap_or(&line);
            if let Some(message) = self.line(line) {
                messages.push(message);
            }
        }
        messages
    }

    fn line(&mut self, line: &str) -> Option<Message> {
        if line.is_empty() {
            // The end of a message; one without data is not dispatched.
            let (id, event) = (self.id.take(), self.event.take());
            let data = self.data.take()?;
            return Some(Message { id, event: event.unwrap_or_else(|| "message".into()), data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
        match field {
            "id" => self.id = Some(value),
            "event" => self.event = Some(value),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(&value);
                }
                None => self.data = Some(value),
            },
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: Option<&str>, event: &str, data: &str) -> Message {
        Message { id: id.map(str::to_owned), event: event.into(), data: data.into() }
    }

    #[test]
    fn messages_split_anywhere_come_out_whole_and_comments_are_skipped() {
        let body = ": keep-alive\n\nevent: task.added\nid: 7\ndata: {\"a\":\"é\"}\n\n\
                    event: step.started\ndata: {}\n\n";
        let bytes = body.as_bytes();
        // Every split point, a multi-byte character's middle included.
        for cut in 0..bytes.len() {
            let mut parser = Parser::default();
            let mut seen = parser.push(&bytes[..cut]);
            seen.extend(parser.push(&bytes[cut..]));
            assert_eq!(
                seen,
                [
                    message(Some("7"), "task.added", "{\"a\":\"é\"}"),
                    message(None, "step.started", "{}")
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn crlf_lines_several_data_fields_and_a_message_not_yet_ended() {
        let mut parser = Parser::default();
        let seen = parser.push(b"id: 1\r\ndata: one\r\ndata:two\r\n\r\nevent: x\ndata: open");
        assert_eq!(seen, [message(Some("1"), "message", "one\ntwo")]);
        assert_eq!(parser.push(b"\n\n"), [message(None, "x", "open")]);
        assert!(parser.push(b"id: 3\n\n").is_empty(), "no data, no message");
    }
}
