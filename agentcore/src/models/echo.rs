//! `echo`: answers without calling any model, deterministically, and says so.

use async_trait::async_trait;

use super::{Completion, CompletionRequest, ModelError, ModelProvider};

#[derive(Debug, Clone, Copy, Default)]
pub struct EchoProvider;

#[async_trait]
impl ModelProvider for EchoProvider {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError> {
        let text = format!(
            "[echo] No model was called: this agent uses the offline `echo` model. \
             Configure a model provider to get real answers.\n\nTask received:\n{}",
            request.user
        );
        Ok(Completion { text, usage: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn echo_is_deterministic_and_says_no_model_was_called() {
        let request = CompletionRequest {
            model: "echo".into(),
            system: "s".into(),
            user: "Write a haiku".into(),
            max_tokens: 10,
        };
        let first = EchoProvider.complete(&request).await.unwrap();
        assert_eq!(first, EchoProvider.complete(&request).await.unwrap());
        assert!(first.text.contains("No model was called") && first.text.contains("Write a haiku"));
    }
}
