use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use agentcore::Session;
use agentcore::api::{AgentList, KeyList, ScheduleList, StepList, TaskList, ToolList};
use agentcore::domain::access::{CreatedInvite, CreatedKey};
use agentcore::domain::agent::{Agent, AgentDetail};
use agentcore::domain::billing::Billing;
use agentcore::domain::mcp::McpServerTools;
use agentcore::domain::onboarding::Onboarded;
use agentcore::domain::schedule::Schedule;
use agentcore::domain::tools::Memory;
use agentcore::domain::usage::{BudgetView, UsageReport};

use super::*;

/// A typed answer read from the JSON the service sends, as the client reads it.
fn typed<T: DeserializeOwned>(json: Value) -> T {
    serde_json::from_value(json).expect("a well-formed answer")
}

fn agent_json() -> Value {
    json!({
        "id": "writer", "name": "Writer", "status": "idle", "channel": "news",
        "throttle_seconds": 1.5, "workspace": null, "model": "gpt-x", "tools": ["memory"],
        "max_steps": 12, "mcp_servers": [], "budget_monthly_usd": null,
        "approval_tools": ["http_fetch"], "created_at": "2026-01-02T03:04:05.678Z",
        "updated_at": "2026-01-02T03:04:05Z", "role_prompt": "Write.",
        "backlog_summary": {"queued": 2, "in_progress": 0, "awaiting_approval": 0, "complete": 1, "failed": 0, "cancelled": 0},
    })
}

fn task_json() -> Value {
    json!({
        "id": "0190a8b4-0000-7000-8000-000000000001", "agent_id": "writer",
        "title": "Write a haiku", "description": null, "priority": 5, "status": "queued",
        "result": null, "error": null, "attempts": 0, "created_at": "2026-01-02T03:04:05Z",
        "updated_at": "2026-01-02T03:04:05Z", "started_at": null, "completed_at": null,
        "usage": {"input_tokens": 10, "output_tokens": 3}, "steps": 0,
        "created_by": {"type": "user"}, "depth": 0,
    })
}

fn schedule_json(next_runs: Value) -> Value {
    json!({
        "id": "0190a8b4-0000-7000-8000-000000000002", "agent_id": "writer", "cron": "0 9 * * *",
        "timezone": "America/New_York", "title": "Daily brief", "description": null,
        "priority": 0, "catch_up": "run_once", "overlap": "skip_if_active", "enabled": true,
        "next_runs": next_runs, "last_fired_at": null, "created_at": "2026-01-02T03:04:05Z",
        "updated_at": "2026-01-02T03:04:05Z",
    })
}

#[test]
fn lists_render_their_columns_and_empty_ones_say_so() {
    let agents: AgentList = typed(json!({"agents": [agent_json()]}));
    let table = agents.render(Screen::default());
    for expected in ["ID", "QUEUED", "writer", "Writer", "idle", "news", "2"] {
        assert!(table.contains(expected), "{expected} missing from\n{table}");
    }
    assert_eq!(typed::<TaskList>(json!({"tasks": []})).render(Screen::default()), "(none)");
    let billing: Billing = typed(
        json!({"plan": "free", "agent_limit": 3, "agents_used": 1, "subscription_status": null}),
    );
    assert!(billing.render(Screen::default()).contains("agent_limit"));
}

#[test]
fn an_agent_shows_its_fields_in_key_order_then_its_backlog() {
    let agent: Agent = typed(agent_json());
    let shown = agent.render(Screen::default());
    let keys: Vec<&str> = shown
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|word| word.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted, "{shown}");
    for expected in ["1.5", "[\"http_fetch\"]", "2026-01-02T03:04:05.678Z", "workspace"] {
        assert!(shown.contains(expected), "{expected} missing from\n{shown}");
    }
    assert!(!shown.contains("backlog_summary") && !shown.contains("next_cursor"), "{shown}");
    assert!(shown.ends_with("\nBacklog:\n(none)"), "{shown}");

    let mut detail = agent_json();
    detail["backlog"] = json!([task_json()]);
    detail["next_cursor"] = json!("page-2");
    let detail: AgentDetail = typed(detail);
    let shown = detail.render(Screen::default());
    assert!(shown.contains("next_cursor") && shown.contains("page-2"), "{shown}");
    assert!(shown.contains("Write a haiku") && shown.contains("PRIORITY"), "{shown}");
}

#[test]
fn texts_read_their_typed_fields() {
    let memory: Memory =
        typed(json!({"agent_id": "keeper", "memory": "Standup at 9.", "chars": 13, "limit": 8000}));
    assert_eq!(memory.render(Screen::default()), "Standup at 9.\n(13 of 8000 characters)");
    let empty = Memory { memory: String::new(), chars: 0, ..memory };
    assert_eq!(empty.render(Screen::default()), "(empty) (0 of 8000 characters)");

    let session: Session = typed(json!({"access_token": "secret", "token_type": "Bearer",
        "user": {"id": "u1", "email": "ada@example.com", "name": "Ada"}}));
    assert_eq!(session.render(Screen::default()), "Logged in as Ada <ada@example.com> (u1).");

    let onboarded: Onboarded = typed(json!({"task": task_json(), "agent": {"id": "support-lead",
        "name": "Support", "status": "active", "channel": "support", "created_at": "2026-01-02T03:04:05Z"}}));
    assert_eq!(
        onboarded.render(Screen::default()),
        "Created agent support-lead (Support), active, with its first task queued: Write a \
         haiku (0190a8b4-0000-7000-8000-000000000001)."
    );

    let unreachable: McpServerTools =
        typed(json!({"server": "calc", "origin": "user", "tools": [], "error": "refused"}));
    assert_eq!(
        unreachable.render(Screen::default()),
        "MCP server calc (user): unreachable: refused"
    );
}

#[test]
fn schedules_show_their_next_run_or_off() {
    let runs = json!([{"at": "2026-01-02T14:00:00Z", "local": "2026-01-02T09:00:00-05:00"}]);
    let listed: ScheduleList =
        typed(json!({"schedules": [schedule_json(runs.clone()), schedule_json(json!([]))]}));
    let table = listed.render(Screen::default());
    assert!(table.contains("2026-01-02T09:00:00-05:00") && table.contains("(off)"), "{table}");
    let shown: Schedule = typed(schedule_json(runs));
    let shown = shown.render(Screen::default());
    for expected in ["catch_up", "run_once", "NEXT RUNS (LOCAL)", "2026-01-02T14:00:00Z"] {
        assert!(shown.contains(expected), "{expected} missing from\n{shown}");
    }
}

#[test]
fn steps_show_calls_results_and_tokens() {
    let steps: StepList = typed(json!({"steps": [
        {"seq": 1, "kind": "model", "tool": null, "call_id": null, "arguments": null,
         "output": "", "tool_calls": [{"id": "c1", "name": "memory", "arguments": "{}"}],
         "error": null, "duration_ms": 120, "usage": {"input_tokens": 10, "output_tokens": 3},
         "created_at": "2026-01-02T03:04:05Z"},
        {"seq": 2, "kind": "tool", "tool": "memory", "call_id": "c1", "arguments": "{\"text\":\"x\"}",
         "output": null, "tool_calls": [], "error": "too long\nreally", "duration_ms": 4,
         "usage": null, "created_at": "2026-01-02T03:04:06Z"},
    ]}));
    let table = steps.render(Screen::default());
    for expected in ["→ memory", "10/3", "memory({\"text\":\"x\"})", "error: too long…"] {
        assert!(table.contains(expected), "{expected} missing from\n{table}");
    }
}

#[test]
fn a_new_key_or_invite_shows_its_secret_once_below_its_fields() {
    let key = json!({"id": "00112233aabbccdd", "prefix": "agk_00112233aabbccdd", "name": "ci",
        "role": "member", "created_by": "ada@example.com", "created_at": "2026-01-02T03:04:05Z",
        "expires_at": null, "last_used_at": null, "revoked_at": null});
    let mut created = key.clone();
    created["secret"] = json!("agk_00112233aabbccdd_5ec2e7");
    let shown = typed::<CreatedKey>(created).render(Screen::default());
    assert!(shown.ends_with("\nSecret: agk_00112233aabbccdd_5ec2e7"), "{shown}");
    assert_eq!(shown.matches("5ec2e7").count(), 1, "{shown}");
    let listed = typed::<KeyList>(json!({"keys": [key]})).render(Screen::default());
    for expected in ["LAST USED", "REVOKED", "ci", "member", "ada@example.com"] {
        assert!(listed.contains(expected), "{expected} missing from\n{listed}");
    }

    let invite: CreatedInvite = typed(json!({"id": "i1", "role": "viewer", "email": null,
        "created_by": "ada@example.com", "created_at": "2026-01-02T03:04:05Z",
        "expires_at": "2026-01-05T03:04:05Z", "token": "70ce4"}));
    let link = "https://agents.example.com/invite/70ce4".to_owned();
    let shown = InviteLink { invite: &invite, link }.render(Screen::default());
    assert!(
        shown.ends_with("\nToken: 70ce4\nLink: https://agents.example.com/invite/70ce4"),
        "{shown}"
    );
    assert!(shown.contains("viewer") && shown.contains("2026-01-05T03:04:05Z"), "{shown}");
}

/// The widest line of `text`, in characters (every character these tables draw is one column).
fn widest(text: &str) -> usize {
    text.lines().map(|line| line.chars().count()).max().unwrap_or(0)
}

#[test]
fn tables_fit_the_screen_and_lists_cut_long_texts() {
    let screen = Screen { width: Some(80) };
    let long = "A long paragraph of the kind a role prompt holds. ".repeat(20);
    let mut agent = agent_json();
    agent["role_prompt"] = json!(long);
    let mut task = task_json();
    task["title"] = json!("A title that goes on ".repeat(12));
    agent["backlog"] = json!([task.clone()]);
    let detail: AgentDetail = typed(agent.clone());
    let shown = detail.render(screen);
    assert!(widest(&shown) <= 80, "{shown}");
    let prompt_words = shown.matches("paragraph").count();
    assert_eq!(prompt_words, 20, "show keeps the whole role prompt:\n{shown}");
    assert!(shown.contains('…'), "the backlog's long title is cut:\n{shown}");

    let agents: AgentList = typed(json!({"agents": [agent]}));
    let tasks: TaskList = typed(json!({"tasks": [task]}));
    let tools: ToolList = typed(json!({"tools": [{"name": "http_fetch", "effect": false,
        "parameters": {}, "description": "Fetches a public web page. ".repeat(30)}],
        "mcp_servers": []}));
    for table in [agents.render(screen), tasks.render(screen), tools.render(screen)] {
        assert!(widest(&table) <= 80, "{table}");
    }
    assert!(widest(&tools.render(Screen::default())) > 80, "no screen, no wrapping");
}

#[test]
fn money_is_dollars_and_cents() {
    let budget: BudgetView = typed(
        json!({"monthly_usd": 25.0, "month": "2026-11", "spent_micros": 0, "spent_usd": 0.0}),
    );
    let shown = budget.render(Screen::default());
    assert!(shown.contains("$25.00") && shown.contains("$0.00"), "{shown}");
    assert!(!shown.contains("25.0 ") && !shown.contains(" 0.0"), "{shown}");
    let row = json!({"input_tokens": 1, "output_tokens": 1, "cost_micros": 4200,
        "cost_usd": 0.0042, "tasks": 1, "steps": 1, "unpriced_steps": 0,
        "cache_read_tokens": 7010, "cache_write_tokens": 3020});
    let usage: UsageReport = typed(json!({"from": "2026-11-01T00:00:00Z",
        "to": "2026-12-01T00:00:00Z", "rows": [], "total": row}));
    let shown = usage.render(Screen::default());
    assert!(shown.contains("$0.0042"), "{shown}");
    assert!(shown.contains("CACHE READS") && shown.contains("7010"), "{shown}");
    assert!(shown.contains("3020"), "{shown}");
    let mut agent = agent_json();
    agent["budget_monthly_usd"] = json!(12.5);
    assert!(typed::<Agent>(agent).render(Screen::default()).contains("$12.50"));
}

#[test]
fn deliveries_show_their_latest_answer_and_the_next_page() {
    let attempt = |n: i32, status: Value, error: Value| {
        json!({"attempt": n, "at": "2026-01-02T03:04:05Z", "status": status, "error": error,
               "duration_ms": 12, "response": null})
    };
    let delivery = |id: &str, responses: Value| {
        json!({"id": id, "webhook_id": "msg_1", "event_type": "task.completed",
               "status": "failed", "attempts": 2, "next_attempt_at": null,
               "created_at": "2026-01-02T03:04:05Z", "responses": responses})
    };
    let page: agentcore::api::DeliveryPage = typed(json!({
        "deliveries": [
            delivery("0190a8b4-0000-7000-8000-000000000003",
                json!([attempt(2, json!(503), Value::Null), attempt(1, Value::Null, json!("timed out"))])),
            delivery("0190a8b4-0000-7000-8000-000000000004",
                json!([attempt(1, Value::Null, json!("connection refused"))])),
        ],
        "next_before": "0190a8b4-0000-7000-8000-000000000004",
    }));
    let table = page.render(Screen::default());
    for expected in ["HTTP 503 (12 ms)", "connection refused (12 ms)", "msg_1", "failed"] {
        assert!(table.contains(expected), "{expected} missing from\n{table}");
    }
    assert!(!table.contains("timed out"), "only the latest attempt:\n{table}");
    assert!(table.ends_with("Older deliveries: --before 0190a8b4-0000-7000-8000-000000000004"));
}
