//! Onboarding: the templates and `POST /api/onboarding/setup`.

use serde::{Deserialize, Serialize};

use crate::domain::onboarding::{CompanyName, Template};
use crate::error::ValidationErrors;

use super::required;

/// `POST /api/onboarding/setup`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SetupRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub company_name: Option<String>,
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role_template: Option<String>,
}

impl SetupRequest {
    /// The company and the template id (looked up by the facade: unknown is a 404).
    pub fn parse(&self) -> Result<(CompanyName, String), ValidationErrors> {
        let mut e = ValidationErrors::new();
        let company = required(&mut e, "company_name", &self.company_name)
            .and_then(|v| e.check("company_name", CompanyName::parse(v)));
        let template = required(&mut e, "role_template", &self.role_template);
        match (company, template) {
            (Some(company), Some(template)) if e.is_empty() => Ok((company, template.to_owned())),
            _ => Err(e),
        }
    }
}

/// `{"templates": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TemplateList {
    pub templates: Vec<Template>,
}
