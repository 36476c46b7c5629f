//! Accounts: `POST /auth/register` and `POST /auth/login`.

use serde::{Deserialize, Serialize};

use crate::domain::user::{Credentials, Email, NewUser, Password, UserName};
use crate::error::ValidationErrors;

use super::required;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegisterRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false, format = Email))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 8, max_length = 1024)
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 100)
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl RegisterRequest {
    pub fn parse(&self) -> Result<NewUser, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let email = required(&mut errors, "email", &self.email)
            .and_then(|v| errors.check("email", Email::parse(v)));
        let password = required(&mut errors, "password", &self.password)
            .and_then(|v| errors.check("password", Password::parse(v)));
        let name = required(&mut errors, "name", &self.name)
            .and_then(|v| errors.check("name", UserName::parse(v)));
        match (email, password, name) {
            (Some(email), Some(password), Some(name)) if errors.is_empty() => {
                Ok(NewUser { email, password, name })
            }
            _ => Err(errors),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LoginRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

impl LoginRequest {
    pub fn parse(&self) -> Result<Credentials, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let email = required(&mut errors, "email", &self.email);
        let password = required(&mut errors, "password", &self.password);
        match (email, password) {
            (Some(email), Some(password)) => {
                Ok(Credentials { email: email.to_owned(), password: password.into() })
            }
            _ => Err(errors),
        }
    }
}
