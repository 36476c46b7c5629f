//! agentctl's typed client against a running server: every operation it offers sends a body
//! the server accepts and reads the answer into the service's own type, so the client and the
//! server cannot drift apart unnoticed. Failures keep the service's error code.

use agentcore::api::{
    ConnectRequest, CreateAgentRequest, CreateTaskRequest, LoginRequest, MapRequest,
    RegisterRequest, SendRequest, SetupRequest, UpdateAgentRequest, UpdateTaskRequest,
    VacationRequest,
};
use agentcore::domain::agent::AgentStatus;
use agentcore::domain::task::TaskStatus;
use agentctl::api::{ActivityQuery, AgentQuery};
use agentctl::client::{Client, Transport};
use agentctl::failure::Kind;

use crate::helpers::{TestApp, backend_tests};

backend_tests! { app;
    every_typed_call_reads_the_servers_answer,
}

const GUILD: &str = "606";
const BOT: &str = "typed-bot.1";

async fn every_typed_call_reads_the_servers_answer(app: TestApp) {
    app.discord.add_bot(BOT, "TypedBot");
    app.discord.add_guild(GUILD, "Typed", &[BOT]);
    let transport = Transport::remote(&app.address).unwrap();
    let anonymous = Client { transport, token: None, workspace: None };
    let register = RegisterRequest {
        email: Some("typed@example.com".into()),
        password: Some("correct horse".into()),
        name: Some("Typed".into()),
    };
    let session = anonymous.register(&register).await.unwrap().body;
    assert_eq!(session.user.email, "typed@example.com");
    let client = Client { token: Some(session.access_token), ..anonymous.clone() };
    assert_eq!(client.me().await.unwrap().body.name, "Typed");

    // Agents.
    let create = CreateAgentRequest {
        id: Some("typed".into()),
        name: Some("Typed".into()),
        role_prompt: Some("Answer.".into()),
        channel: Some("general".into()),
        model: Some("openai:gpt-typed".into()),
        ..Default::default()
    };
    let created = client.create_agent(&create).await.unwrap();
    assert_eq!((created.body.id.as_str(), created.body.status), ("typed", AgentStatus::Idle));
    assert!(created.answer.raw.contains("\"backlog_summary\""), "the raw body is kept");
    let listed = client.list_agents(&AgentQuery::default()).await.unwrap().body;
    assert_eq!(listed.agents.len(), 1);
    let filtered = AgentQuery { status: Some("active".into()), ..Default::default() };
    assert!(client.list_agents(&filtered).await.unwrap().body.agents.is_empty());
    let change = UpdateAgentRequest { model: Some(None), ..Default::default() };
    assert_eq!(client.update_agent("typed", &change).await.unwrap().body.model, None);
    let on = VacationRequest { enabled: Some(true) };
    assert_eq!(client.vacation("typed", Some(&on)).await.unwrap().body.status, "vacation");
    assert_eq!(client.vacation("typed", None).await.unwrap().body.status, "idle");

    // Backlog.
    let task = CreateTaskRequest { title: Some("First".into()), ..Default::default() };
    let task = client.add_task("typed", &task).await.unwrap().body;
    assert_eq!(task.status, TaskStatus::Queued);
    let id = task.id.as_str().to_owned();
    let edit = UpdateTaskRequest { priority: Some(3), ..Default::default() };
    assert_eq!(client.update_task("typed", &id, &edit).await.unwrap().body.priority, 3);
    assert_eq!(client.tasks("typed", Some("queued".into())).await.unwrap().body.tasks.len(), 1);
    assert_eq!(client.task("typed", &id).await.unwrap().body.title, "First");
    app.force_task_status(&id, "failed").await;
    let retried = client.retry_task("typed", &id).await.unwrap().body;
    assert_eq!(retried.status, TaskStatus::Queued);
    assert_eq!(client.agent("typed").await.unwrap().body.backlog.len(), 1);
    assert_eq!(client.delete_task("typed", &id).await.unwrap().body.deleted, id);
    let page = ActivityQuery { limit: Some(2), before: None };
    assert_eq!(client.activity("typed", &page).await.unwrap().body.entries.len(), 2);

    // Chat.
    let connect = ConnectRequest {
        guild_id: Some(GUILD.into()),
        bot_token: Some(BOT.into()),
        guild_name: None,
        public_key: None,
    };
    assert_eq!(client.connect(&connect).await.unwrap().body.guild_name, "Typed");
    assert_eq!(client.connections().await.unwrap().body.connections.len(), 1);
    let channels = client.channels(GUILD).await.unwrap().body.channels;
    let names: Vec<&str> = channels.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["updates", "general", "news"],
        "text and announcement channels, by position"
    );
    let map = MapRequest {
        agent_id: Some("typed".into()),
        channel_id: Some(format!("{GUILD}1")),
        channel_name: None,
    };
    assert_eq!(client.map(GUILD, &map).await.unwrap().body.mapping.channel_name, "general");
    assert_eq!(client.mappings().await.unwrap().body.mappings.len(), 1);
    let send = SendRequest {
        agent_id: Some("typed".into()),
        content: Some("Hello".into()),
        ..Default::default()
    };
    assert_eq!(client.send(GUILD, &send).await.unwrap().body.channel_id, format!("{GUILD}1"));
    assert_eq!(client.test_connection(GUILD).await.unwrap().body.guild_name, "Typed");
    assert_eq!(client.unmap("typed").await.unwrap().body.agent_id, "typed");
    assert_eq!(client.disconnect(GUILD).await.unwrap().body.guild_id, GUILD);
    assert!(client.oauth_url().await.unwrap().body.url.contains("client_id="));

    // Billing and onboarding.
    let billing = client.billing().await.unwrap().body;
    assert_eq!((billing.plan.as_str(), billing.agents_used), ("free", 1));
    let templates = client.templates().await.unwrap().body.templates;
    let setup = SetupRequest {
        company_name: Some("Acme".into()),
        role_template: Some(templates[0].id.to_string()),
    };
    let onboarded = client.setup(&setup).await.unwrap().body;
    assert_eq!(onboarded.task.status, TaskStatus::Queued);
    assert_eq!(client.start_agent("typed").await.unwrap().body.status, "started");
    assert_eq!(client.stop_agent("typed").await.unwrap().body.status, "stopped");
    assert_eq!(client.delete_agent("typed").await.unwrap().body.deleted, "typed");

    // A failure carries the service's code and the exit code's kind.
    let missing = client.agent("typed").await.unwrap_err();
    assert_eq!((missing.kind, missing.code.as_deref()), (Kind::NotFound, Some("agent_not_found")));
    let refused = client.create_agent(&CreateAgentRequest::default()).await.unwrap_err();
    assert_eq!(refused.kind, Kind::Usage);
    assert!(refused.details.iter().any(|(field, _)| field == "id"), "{:?}", refused.details);

    assert_eq!(client.logout().await.unwrap().body.status, "logged_out");
    assert_eq!(client.me().await.unwrap_err().kind, Kind::Auth);
    let login = LoginRequest {
        email: Some("typed@example.com".into()),
        password: Some("correct horse".into()),
    };
    assert_eq!(anonymous.login(&login).await.unwrap().body.user.email, "typed@example.com");
}
