//! Every configured provider's failures, with secrets masked before anyone reads them: the
//! text of a failed call becomes a task's error, an activity entry, a Discord post and a log
//! line, and a provider (or a proxy in front of it) may echo the key it was sent.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Completion, CompletionRequest, ModelError, ModelProvider};
use crate::domain::runtime::cut;
use crate::scrub::Scrubber;

/// A failure's text is cut to this many characters: a provider's whole error page is noise.
const MAX_REASON_CHARS: usize = 1_000;

/// `inner`, its failures scrubbed of every configured provider's key and of key shapes (the
/// runtime logs the scrubbed text, as it stores it).
#[derive(Debug)]
pub(super) struct Scrubbed {
    pub(super) inner: Arc<dyn ModelProvider>,
    pub(super) scrubber: Arc<Scrubber>,
}

#[async_trait]
impl ModelProvider for Scrubbed {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError> {
        self.inner.complete(request).await.map_err(|error| self.clean(error))
    }

    async fn count_input_tokens(
        &self,
        request: &CompletionRequest,
    ) -> Result<Option<u64>, ModelError> {
        self.inner.count_input_tokens(request).await.map_err(|error| self.clean(error))
    }
}

impl Scrubbed {
    fn clean(&self, error: ModelError) -> ModelError {
        let clean = |reason: &str| cut(&self.scrubber.scrub(reason), MAX_REASON_CHARS);
        match error {
            ModelError::Transient { reason, retry_after, status } => {
                ModelError::Transient { reason: clean(&reason), retry_after, status }
            }
            ModelError::Permanent { reason } => ModelError::Permanent { reason: clean(&reason) },
        }
    }
}
