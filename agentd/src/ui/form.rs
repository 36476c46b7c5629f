//! A posted HTML form, as its fields in order (a checkbox group repeats its name).

use axum::body::to_bytes;
use axum::extract::{FromRequest, Request};
use axum::response::Response;

use crate::error::ApiError;

#[derive(Debug, Default)]
pub(super) struct Fields(Vec<(String, String)>);

impl Fields {
    /// The first value of `name`, trimmed; `None` when absent.
    pub(super) fn get(&self, name: &str) -> Option<String> {
        self.0.iter().find(|(key, _)| key == name).map(|(_, value)| value.trim().to_owned())
    }

    /// The value of `name`, absent when empty (an optional text box left blank).
    pub(super) fn text(&self, name: &str) -> Option<String> {
        self.get(name).filter(|value| !value.is_empty())
    }

    /// Every value of `name`.
    pub(super) fn all(&self, name: &str) -> Vec<String> {
        self.0.iter().filter(|(key, _)| key == name).map(|(_, value)| value.clone()).collect()
    }

    /// The fields as a map, to refill the form after a refusal (the CSRF token left out).
    pub(super) fn values(&self) -> std::collections::BTreeMap<String, String> {
        self.0.iter().filter(|(key, _)| key != super::session::CSRF_FIELD).cloned().collect()
    }

    /// Every field's values, in order, by name: what a refused form's checkboxes and multiple
    /// selects are ticked from (`values` keeps one value a name).
    pub(super) fn lists(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        let mut lists = std::collections::BTreeMap::<String, Vec<String>>::new();
        for (key, value) in self.0.iter().filter(|(key, _)| key != super::session::CSRF_FIELD) {
            lists.entry(key.clone()).or_default().push(value.clone());
        }
        lists
    }

    /// A number field: absent when blank; otherwise the number, or the field named wrong.
    pub(super) fn number<T: std::str::FromStr>(
        &self,
        name: &str,
        errors: &mut agentcore::ValidationErrors,
    ) -> Option<T> {
        let raw = self.text(name)?;
        errors.check(name, raw.parse::<T>().map_err(|_| format!("'{raw}' is not a number")))
    }
}

impl<S: Send + Sync> FromRequest<S> for Fields {
    type Rejection = Response;

    async fn from_request(request: Request, _: &S) -> Result<Self, Response> {
        let bytes = to_bytes(request.into_body(), usize::MAX)
            .await
            .map_err(|_| super::render::error_page(&ApiError::PayloadTooLarge))?;
        serde_urlencoded::from_bytes(&bytes).map(Fields).map_err(|error| {
            let problem = format!("the body is not a form: {error}");
            super::render::error_page(&agentcore::ValidationErrors::single("form", problem).into())
        })
    }
}
