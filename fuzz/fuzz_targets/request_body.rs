//! JSON request bodies as the HTTP routes read them: `agentd::decode_json_body::<T>` for each
//! request type of `agentcore::api`, then the type's `parse` into domain values.
//!
//! Input layout: the first byte picks the request type (`byte % 17`, in the order of `TYPES`),
//! the rest is the body.
//!
//! Beyond "never panics":
//! - a body is refused exactly when plain `serde_json` refuses it, always as a 400 with the
//!   API's code (`invalid_json` or `validation_failed`), and a wrong type names the field;
//! - a body that decodes re-encodes to one that decodes and validates the same way;
//! - a refusal by `parse` names at least one field, only fields of the request, and is a 400;
//! - what `parse` accepts keeps the request's values and holds to the domain's rules.

#![no_main]

use agentcore::ValidationErrors;
use agentcore::api::{
    AddMcpServerRequest, BudgetRequest, CallbackRequest, ConnectRequest, CreateAgentRequest,
    CreateScheduleRequest, CreateTaskRequest, LoginRequest, MapRequest, RegisterRequest,
    RolesRequest, SendRequest, SetupRequest, UpdateAgentRequest, UpdateScheduleRequest,
    UpdateTaskRequest, VacationRequest,
};
use agentcore::domain::agent::AgentId;
use agentcore::domain::schedule::Zone;
use agentd::error::ApiError;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The selector byte's meaning, for seeds and crash reports.
#[allow(dead_code)]
const TYPES: [&str; 17] = [
    "RegisterRequest",
    "LoginRequest",
    "CreateAgentRequest",
    "UpdateAgentRequest",
    "VacationRequest",
    "CreateTaskRequest",
    "UpdateTaskRequest",
    "SetupRequest",
    "CallbackRequest",
    "ConnectRequest",
    "MapRequest",
    "SendRequest",
    "AddMcpServerRequest",
    "CreateScheduleRequest",
    "UpdateScheduleRequest",
    "BudgetRequest",
    "RolesRequest",
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    match selector % 17 {
        0 => check::<RegisterRequest, _>(body, &["email", "password", "name"], |r| {
            let user = r.parse()?;
            let email = r.email.as_deref().expect("parsed, so present");
            assert_eq!(user.email.as_str(), email.trim());
            single_line(user.name.as_str(), 100);
            Ok(())
        }),
        1 => check::<LoginRequest, _>(body, &["email", "password"], |r| {
            let credentials = r.parse()?;
            assert_eq!(Some(credentials.email.as_str()), r.email.as_deref());
            Ok(())
        }),
        2 => check::<CreateAgentRequest, _>(
            body,
            &[
                "id",
                "name",
                "role_prompt",
                "channel",
                "workspace",
                "throttle_seconds",
                "model",
                "tools",
                "max_steps",
                "mcp_servers",
                "budget_monthly_usd",
                "approval_tools",
                "fallback_models",
            ],
            |r| {
                let agent = r.parse()?;
                assert_eq!(agent.budget.is_some(), r.budget_monthly_usd.is_some());
                assert_eq!(Some(agent.id.as_str()), r.id.as_deref());
                agent_id(agent.id.as_str());
                single_line(agent.name.as_str(), 100);
                single_line(agent.channel.as_str(), 100);
                assert!(!agent.role_prompt.as_str().trim().is_empty());
                assert_eq!(agent.workspace.is_some(), r.workspace.is_some());
                assert_eq!(agent.model.is_some(), r.model.is_some());
                throttle(agent.throttle_seconds.get());
                Ok(())
            },
        ),
        3 => check::<UpdateAgentRequest, _>(
            body,
            &[
                "name",
                "role_prompt",
                "channel",
                "workspace",
                "status",
                "throttle_seconds",
                "model",
                "tools",
                "max_steps",
                "mcp_servers",
                "budget_monthly_usd",
                "approval_tools",
                "fallback_models",
            ],
            |r| {
                let patch = r.parse()?;
                assert_eq!(patch.budget.is_some(), r.budget_monthly_usd.is_some());
                // Absent stays absent, present is applied, `null` clears.
                assert_eq!(patch.name.is_some(), r.name.is_some());
                assert_eq!(patch.role_prompt.is_some(), r.role_prompt.is_some());
                assert_eq!(patch.channel.is_some(), r.channel.is_some());
                assert_eq!(patch.status.is_some(), r.status.is_some());
                assert_eq!(patch.throttle_seconds.is_some(), r.throttle_seconds.is_some());
                assert_eq!(shape(&patch.workspace), shape(&r.workspace));
                assert_eq!(shape(&patch.model), shape(&r.model));
                if let Some(status) = patch.status {
                    assert_eq!(Some(status.as_str()), r.status.as_deref());
                }
                if let Some(t) = patch.throttle_seconds {
                    throttle(t.get());
                }
                Ok(())
            },
        ),
        // No `parse`: the route reads `enabled` as it is (and an empty body as `{}`).
        4 => check::<VacationRequest, _>(body, &["enabled"], |_| Ok(())),
        5 => check::<CreateTaskRequest, _>(body, &["title", "description", "priority"], |r| {
            let task = r.parse()?;
            single_line(task.title.as_str(), 200);
            assert!(!task.title.as_str().trim().is_empty());
            assert_eq!(Some(task.title.as_str()), r.title.as_deref());
            // An empty description is none.
            let given = r.description.as_deref().filter(|d| !d.is_empty());
            assert_eq!(task.description.as_ref().map(|d| d.as_str()), given);
            assert_eq!(i64::from(task.priority.get()), r.priority.unwrap_or(0));
            Ok(())
        }),
        6 => check::<UpdateTaskRequest, _>(body, &["title", "description", "priority"], |r| {
            let patch = r.parse()?;
            assert_eq!(patch.title.is_some(), r.title.is_some());
            assert_eq!(patch.priority.is_some(), r.priority.is_some());
            // `null` and `""` both clear the description.
            let want = r.description.as_ref().map(|d| d.as_deref().filter(|d| !d.is_empty()));
            let got = patch.description.as_ref().map(|d| d.as_ref().map(|d| d.as_str()));
            assert_eq!(got, want);
            Ok(())
        }),
        7 => check::<SetupRequest, _>(body, &["company_name", "role_template"], |r| {
            let (company, template) = r.parse()?;
            single_line(company.as_str(), 100);
            assert_eq!(Some(template.as_str()), r.role_template.as_deref());
            Ok(())
        }),
        8 => check::<CallbackRequest, _>(body, &["code", "guild_id", "state"], |r| {
            let (code, state) = r.parse()?;
            assert_eq!(Some(code.as_str()), r.code.as_deref());
            assert!(!code.is_empty() && code.chars().count() <= 512);
            assert_eq!(state, r.state);
            if let Some(guild) = &r.guild_id {
                snowflake(guild);
            }
            Ok(())
        }),
        9 => check::<ConnectRequest, _>(
            body,
            &["bot_token", "guild_id", "guild_name", "public_key"],
            |r| {
                let connection = r.parse()?;
                let guild = &connection.guild;
                snowflake(guild.as_str());
                assert_eq!(Some(guild.as_str()), r.guild_id.as_deref());
                assert_eq!(connection.guild_name.as_deref(), r.guild_name.as_deref());
                if let Some(key) = &connection.public_key {
                    assert!(key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit()));
                }
                Ok(())
            },
        ),
        10 => check::<MapRequest, _>(body, &["agent_id", "channel_id", "channel_name"], |r| {
            let (agent, channel) = r.parse()?;
            agent_id(agent.as_str());
            snowflake(channel.as_str());
            assert_eq!(Some(channel.as_str()), r.channel_id.as_deref());
            Ok(())
        }),
        11 => check::<SendRequest, _>(
            body,
            &["agent_id", "content", "embed_title", "embed_description", "embed_color"],
            |r| {
                let (agent, message) = r.parse()?;
                assert_eq!(Some(agent.as_str()), r.agent_id.as_deref());
                // Something to show, and nothing the request did not carry.
                let sent = message.body();
                let blank = |s: &Option<String>| s.as_deref().is_none_or(|s| s.trim().is_empty());
                assert!(!blank(&sent.content) || !sent.embeds.is_empty());
                assert!(sent.embeds.len() <= 1);
                if let Some(content) = &sent.content {
                    assert_eq!(Some(content), r.content.as_ref());
                }
                for embed in &sent.embeds {
                    assert!(!blank(&embed.title) || !blank(&embed.description));
                    assert_eq!(embed.color.map(i64::from), r.embed_color);
                    assert!(embed.color.is_none_or(|c| c <= 0xFF_FF_FF));
                }
                Ok(())
            },
        ),
        12 => check::<AddMcpServerRequest, _>(body, &["name", "url", "token"], |r| {
            let server = r.parse()?;
            assert_eq!(Some(server.name.as_str()), r.name.as_deref());
            assert_eq!(Some(server.url.as_str()), r.url.as_deref());
            assert!(server.url.as_str().starts_with("http"));
            assert_eq!(server.token.is_some(), r.token.is_some());
            Ok(())
        }),
        13 => check::<CreateScheduleRequest, _>(
            body,
            &[
                "cron",
                "timezone",
                "title",
                "description",
                "priority",
                "catch_up",
                "overlap",
                "enabled",
            ],
            |r| {
                let schedule = r.parse()?;
                let cron = r.cron.as_deref().expect("parsed, so present");
                assert_eq!(
                    schedule.timing.cron.as_str(),
                    cron.split_whitespace().collect::<Vec<_>>().join(" ")
                );
                let zone = schedule.timing.zone;
                assert_eq!(Zone::parse(zone.name()), Ok(zone));
                assert_eq!(Some(schedule.task.title.as_str()), r.title.as_deref());
                assert_eq!(schedule.enabled, r.enabled.unwrap_or(true));
                assert_eq!(
                    Some(schedule.catch_up.as_str()),
                    r.catch_up.as_deref().or(Some("skip"))
                );
                Ok(())
            },
        ),
        14 => check::<UpdateScheduleRequest, _>(
            body,
            &[
                "cron",
                "timezone",
                "title",
                "description",
                "priority",
                "catch_up",
                "overlap",
                "enabled",
            ],
            |r| {
                let patch = r.parse()?;
                assert_eq!(patch.cron.is_some(), r.cron.is_some());
                assert_eq!(patch.zone.is_some(), r.timezone.is_some());
                assert_eq!(patch.enabled, r.enabled);
                assert_eq!(patch.overlap.map(|o| o.as_str()), r.overlap.as_deref());
                Ok(())
            },
        ),
        15 => check::<BudgetRequest, _>(body, &["monthly_usd"], |r| {
            let budget = r.parse()?;
            let usd = r.monthly_usd.expect("parsed, so present");
            assert_eq!(budget.is_some(), usd.is_some());
            if let (Some(budget), Some(usd)) = (budget, usd) {
                assert!(budget.micros() >= 0 && (0.0..=1e9).contains(&usd));
            }
            Ok(())
        }),
        16 => check::<RolesRequest, _>(body, &["allowed_role_ids"], |r| {
            let roles = r.parse()?;
            assert!(roles.ids().len() <= 25);
            roles.ids().iter().for_each(|id| snowflake(id));
            Ok(())
        }),
        _ => unreachable!("selector % 17"),
    }
});

/// Decodes `body` as a route would and checks the outcome; `parse` validates a decoded request
/// (asserting what holds when it is accepted).
fn check<T, F>(body: &[u8], fields: &[&str], parse: F)
where
    T: DeserializeOwned + Serialize,
    F: Fn(&T) -> Result<(), ValidationErrors>,
{
    let decoded = agentd::decode_json_body::<T>(body);
    assert_eq!(
        decoded.is_ok(),
        serde_json::from_slice::<T>(body).is_ok(),
        "the route decoder and serde_json disagree on this body"
    );
    let request = match decoded {
        Ok(request) => request,
        Err(error) => return check_decode_error(&error, fields),
    };
    let outcome = parse(&request);
    if let Err(errors) = &outcome {
        check_validation_errors(errors, fields);
    }

    // What decoded, encoded again, decodes and validates the same way.
    let encoded = serde_json::to_vec(&request).expect("a request serialises");
    let again: T = match agentd::decode_json_body(&encoded) {
        Ok(again) => again,
        Err(error) => panic!("re-encoded body {:?} refused: {error:?}", lossy(&encoded)),
    };
    let again_outcome = parse(&again);
    assert_eq!(
        again_outcome.as_ref().map_err(|e| e.fields().keys().collect::<Vec<_>>()),
        outcome.as_ref().map_err(|e| e.fields().keys().collect::<Vec<_>>()),
        "re-encoded as {:?}",
        lossy(&encoded)
    );
}

fn check_decode_error(error: &ApiError, fields: &[&str]) {
    assert_eq!(error.status().as_u16(), 400, "{error:?}");
    let body = serde_json::to_value(error.body("fuzz")).expect("an error body serialises");
    let code = body["error"]["code"].as_str().expect("a code");
    assert_eq!(code, error.code());
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    match error {
        ApiError::InvalidJson(_) => {
            assert_eq!(code, "invalid_json");
            assert!(body["error"].get("details").is_none());
        }
        ApiError::WrongTypes(details) => {
            assert_eq!(code, "validation_failed");
            assert_eq!(details.len(), 1, "{details:?}");
            for (field, problem) in details {
                assert!(
                    field == "body" || names_a_field(field, fields),
                    "a wrong type names {field:?}"
                );
                assert!(!problem.is_empty());
            }
            assert_eq!(body["error"]["details"], serde_json::json!(details));
        }
        other => panic!("a body decodes to no other error: {other:?}"),
    }
}

/// Whether a wrong type's path starts at one of the request's fields: `tools`, or a path into
/// it (`tools[0]`, `a.b`), as the API documents. serde's derived structs also read a JSON
/// array, field by field in order: then the path starts with the position, `[0]` for the first
/// field (`[0][0]`: the first element of the first field).
fn names_a_field(path: &str, fields: &[&str]) -> bool {
    if let Some(rest) = path.strip_prefix('[') {
        let position = rest.split(']').next().and_then(|n| n.parse::<usize>().ok());
        return position.is_some_and(|n| n < fields.len());
    }
    let head = path.split(['.', '[']).next().unwrap_or(path);
    fields.contains(&head)
}

fn check_validation_errors(errors: &ValidationErrors, fields: &[&str]) {
    assert!(!errors.is_empty(), "a refusal names a field");
    for (field, problem) in errors.fields() {
        assert!(fields.contains(&field.as_str()), "a refusal names {field:?}");
        assert!(!problem.is_empty());
    }
    let error = ApiError::from(errors.clone());
    assert_eq!(error.status().as_u16(), 400);
    assert_eq!(error.code(), "validation_failed");
    let body = serde_json::to_value(error.body("fuzz")).expect("an error body serialises");
    assert_eq!(body["error"]["details"].as_object().map(|d| d.len()), Some(errors.fields().len()));
}

/// Absent, `null` or a value: what a nullable field says, whatever its type.
fn shape<T>(value: &Option<Option<T>>) -> Option<bool> {
    value.as_ref().map(Option::is_some)
}

fn single_line(value: &str, max: usize) {
    assert!(!value.trim().is_empty(), "{value:?} is blank");
    assert!(value.chars().count() <= max, "{value:?} is too long");
    assert!(!value.chars().any(char::is_control), "{value:?} has a control character");
}

fn agent_id(value: &str) {
    assert!((1..=AgentId::MAX_CHARS).contains(&value.len()), "{value:?}");
    assert!(value.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit()));
    assert!(
        value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_".contains(c))
    );
}

fn snowflake(value: &str) {
    assert!((1..=20).contains(&value.len()) && !value.starts_with('0'), "{value:?}");
    assert!(value.bytes().all(|b| b.is_ascii_digit()), "{value:?}");
}

fn throttle(seconds: f64) {
    assert!(seconds.is_finite() && (0.0..=86_400.0).contains(&seconds), "{seconds}");
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
