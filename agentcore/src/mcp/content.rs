//! A tool result as the model reads it: text passed on, images, audio and resources described
//! by type and size (their bytes mean nothing to a text model and would fill its context).

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use crate::domain::tool_result::{ToolError, ToolResult};

/// The result's text, or the error text when the server marked it one.
pub(super) fn render(result: CallToolResult) -> ToolResult {
    let mut parts: Vec<String> = result.content.iter().map(part).collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        let text = if text.trim().is_empty() { "the tool failed".to_owned() } else { text };
        return Err(ToolError::Failed(text));
    }
    Ok(text)
}

fn part(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => {
            format!("[image: {}, {} bytes]", image.mime_type, decoded_len(&image.data))
        }
        ContentBlock::Audio(audio) => {
            format!("[audio: {}, {} bytes]", audio.mime_type, decoded_len(&audio.data))
        }
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, mime_type, text, .. } => {
                format!("[resource {uri}{}]\n{text}", mime(mime_type.as_deref()))
            }
            ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => format!(
                "[resource {uri}{}, {} bytes]",
                mime(mime_type.as_deref()),
                decoded_len(blob)
            ),
            _ => "[resource of a kind this version does not read]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => {
            format!("[resource link: {} ({})]", link.uri, link.name)
        }
        _ => "[content of a kind this version does not read]".to_owned(),
    }
}

fn mime(mime_type: Option<&str>) -> String {
    mime_type.map(|m| format!(", {m}")).unwrap_or_default()
}

/// The size of base64 `data` once decoded.
fn decoded_len(data: &str) -> usize {
    let padding = data.bytes().rev().take_while(|&b| b == b'=').count();
    (data.len() / 4 * 3).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_sizes_are_the_decoded_ones() {
        assert_eq!(decoded_len("aGVsbG8="), 5);
        assert_eq!(decoded_len("aGVsbG8h"), 6);
        assert_eq!(decoded_len(""), 0);
    }

    #[test]
    fn errors_and_structured_results_are_kept() {
        let failed: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [{"type": "text", "text": "boom"}], "isError": true
        }))
        .unwrap();
        assert_eq!(render(failed), Err(ToolError::failed("boom")));
        let structured: CallToolResult = serde_json::from_value(
            serde_json::json!({"content": [], "structuredContent": {"sum": 35}}),
        )
        .unwrap();
        assert_eq!(render(structured), Ok(r#"{"sum":35}"#.into()));
        let image: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [{"type": "text", "text": "a chart"},
                        {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]
        }))
        .unwrap();
        assert_eq!(render(image), Ok("a chart\n[image: image/png, 5 bytes]".into()));
    }
}
