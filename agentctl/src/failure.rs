//! Why a command failed, what the user reads on stderr, and the exit code scripts match on.

use std::fmt;
use std::process::ExitCode;

use axum::http::StatusCode;
use serde_json::Value;

/// agentctl's exit codes (docs/api.md, "agentctl exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// 2: the command line or its values are wrong.
    Usage,
    /// 3: not logged in, or the token is no longer accepted.
    Auth,
    /// 4: the agent, task, connection, mapping, template, workspace, member or invite does
    /// not exist.
    NotFound,
    /// 5: a conflict with the current state, or the plan's limit.
    Conflict,
    /// 6: the server or the network failed.
    Failure,
    /// 7: the task a command watched (`tasks watch <agent> <task>`, `tasks add --watch`) failed.
    TaskFailed,
    /// 8: the task a command watched was cancelled.
    TaskCancelled,
    /// 130: Ctrl-C stopped watching a task before it ended (the task goes on).
    Interrupted,
}

impl Kind {
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(match self {
            Kind::Usage => 2,
            Kind::Auth => 3,
            Kind::NotFound => 4,
            Kind::Conflict => 5,
            Kind::Failure => 6,
            Kind::TaskFailed => 7,
            Kind::TaskCancelled => 8,
            Kind::Interrupted => 130,
        })
    }

    /// The kind of a service error code.
    fn of_code(status: StatusCode, code: &str) -> Self {
        match code {
            "unauthorized" | "forbidden" => Kind::Auth,
            "plan_limit_reached" | "quota_exceeded" | "agent_exists" | "email_taken"
            | "agent_not_mapped" | "task_not_editable" => Kind::Conflict,
            c if c.ends_with("_not_found") => Kind::NotFound,
            _ if status == StatusCode::CONFLICT => Kind::Conflict,
            _ if status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS => Kind::Usage,
            _ => Kind::Failure,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: Kind,
    /// The service's error code, when the service answered.
    pub code: Option<String>,
    pub message: String,
    pub request_id: Option<String>,
    /// Field name to problem, for validation errors.
    pub details: Vec<(String, String)>,
}

impl Failure {
    fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self { kind, code: None, message: message.into(), request_id: None, details: Vec::new() }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Kind::Usage, message)
    }

    pub fn auth(message: impl Into<String>) -> Self {
        Self::new(Kind::Auth, message)
    }

    /// Something named on the command line that the service does not have for the caller.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Kind::NotFound, message)
    }

    pub fn network(message: impl Into<String>) -> Self {
        Self::new(Kind::Failure, message)
    }

    /// A watched task that ended other than complete (`TaskFailed`, `TaskCancelled`), or a
    /// watch stopped before it ended (`Interrupted`).
    pub fn watched(kind: Kind, message: impl Into<String>) -> Self {
        Self::new(kind, message)
    }

    pub fn internal(error: impl fmt::Display) -> Self {
        Self::new(Kind::Failure, error.to_string())
    }

    /// From the service's error body `{"error": {code, message, request_id, details?}}`.
    pub fn from_response(status: StatusCode, body: &Value) -> Self {
        let error = &body["error"];
        let code = error["code"].as_str().unwrap_or("unknown").to_owned();
        let mut message = error["message"]
            .as_str()
            .map_or_else(|| format!("the server answered {status}"), str::to_owned);
        let kind = Kind::of_code(status, &code);
        if kind == Kind::Auth && code == "unauthorized" {
            message =
                "Not logged in, or the session has ended: run `agentctl login` again.".to_owned();
        }
        let details = error["details"]
            .as_object()
            .map(|fields| {
                fields
                    .iter()
                    .map(|(field, problem)| {
                        let problem =
                            problem.as_str().map_or_else(|| problem.to_string(), str::to_owned);
                        (field.clone(), problem)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            kind,
            code: Some(code),
            message,
            request_id: error["request_id"].as_str().map(str::to_owned),
            details,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)?;
        if let Some(code) = &self.code {
            write!(f, " ({code}")?;
            if let Some(id) = &self.request_id {
                write!(f, ", request {id}")?;
            }
            f.write_str(")")?;
        }
        for (field, problem) in &self.details {
            write!(f, "\n  {field}: {problem}")?;
        }
        Ok(())
    }
}

impl From<dialoguer::Error> for Failure {
    fn from(error: dialoguer::Error) -> Self {
        Failure::usage(format!("cannot read from the terminal: {error}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_codes_map_to_the_documented_exit_codes() {
        let kind =
            |status: u16, code: &str| Kind::of_code(StatusCode::from_u16(status).unwrap(), code);
        assert_eq!(kind(400, "validation_failed"), Kind::Usage);
        assert_eq!(kind(400, "invalid_json"), Kind::Usage);
        assert_eq!(kind(401, "unauthorized"), Kind::Auth);
        assert_eq!(kind(404, "agent_not_found"), Kind::NotFound);
        assert_eq!(kind(404, "template_not_found"), Kind::NotFound);
        assert_eq!(kind(409, "agent_exists"), Kind::Conflict);
        assert_eq!(kind(402, "plan_limit_reached"), Kind::Conflict);
        assert_eq!(kind(429, "quota_exceeded"), Kind::Conflict);
        assert_eq!(kind(429, "rate_limited"), Kind::Failure);
        assert_eq!(kind(502, "upstream_error"), Kind::Failure);
        assert_eq!(kind(503, "not_configured"), Kind::Failure);
    }
}
