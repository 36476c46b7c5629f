//! `echo`: answers without calling any model, deterministically, and says so.

use async_trait::async_trait;

use super::{Completion, CompletionRequest, Message, ModelError, ModelProvider};

#[derive(Debug, Clone, Copy, Default)]
pub struct EchoProvider;

#[async_trait]
impl ModelProvider for EchoProvider {
    /// Offers no tool calls, whatever tools the request offers: it answers the task, the first
    /// user message.
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError> {
        let task = request.messages.iter().find_map(|message| match message {
            Message::User(text) => Some(text.as_str()),
            _ => None,
        });
        let text = format!(
            "[echo] No model was called: this agent uses the offline `echo` model. \
             Configure a model provider to get real answers: the [Models page](/models) of \
             the dashboard (or `GET /api/models`) lists the providers and how to add a key.\n\n\
             Task received:\n{}",
            task.unwrap_or_default()
        );
        Ok(Completion { text, tool_calls: Vec::new(), usage: None, spent_for: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn echo_is_deterministic_and_says_no_model_was_called() {
        let request = CompletionRequest {
            model: crate::domain::agent::ECHO.into(),
            system: "s".into(),
            messages: vec![Message::User("Write a haiku".into())],
            tools: Vec::new(),
            tool_choice: Default::default(),
            max_tokens: 10,
        };
        let first = EchoProvider.complete(&request).await.unwrap();
        assert_eq!(first, EchoProvider.complete(&request).await.unwrap());
        assert!(first.text.contains("No model was called") && first.text.contains("Write a haiku"));
    }
}
