//! The storage conformance suite: the `Store` trait's promises, written once and run against
//! both backends, each test on a fresh database.

use agentcore::domain::activity::{Action, ActivityQuery, NewActivity};
use agentcore::domain::agent::{
    Agent, AgentFilter, AgentId, AgentName, AgentStatus, AgentSummary, ChannelName, ModelName,
    NewAgent, RolePrompt, ThrottleSeconds, Workspace,
};
use agentcore::domain::task::{NewTask, Priority, Task, TaskDescription, TaskStatus, TaskTitle};
use agentcore::domain::user::UserId;
use agentcore::domain::workspace::WorkspaceId;
use agentcore::store::{AgentChange, TaskChange, TaskWrite, UserRecord};
use agentcore::{Error, Resource};
use chrono::{Duration, Utc};
use std::time::Duration as StdDuration;

use crate::helpers::{TestStore, backend_tests};

fn user(email: &str) -> UserRecord {
    UserRecord {
        id: UserId::parse(&uuid::Uuid::now_v7().to_string()).unwrap(),
        email: email.to_owned(),
        email_key: email.to_lowercase(),
        name: "Someone".into(),
        password_hash: "$argon2id$placeholder".into(),
        token_version: 0,
        created_at: agentcore::domain::now(),
    }
}

/// The personal workspace of a user: what owns their agents.
trait Personal {
    fn ws(&self) -> WorkspaceId;
}

impl Personal for UserRecord {
    fn ws(&self) -> WorkspaceId {
        WorkspaceId::personal(&self.id)
    }
}

fn new_agent(id: &str, workspace: Option<&str>) -> NewAgent {
    NewAgent {
        id: AgentId::parse(id).unwrap(),
        name: AgentName::parse(&format!("Agent {id}")).unwrap(),
        role_prompt: RolePrompt::parse("Be useful.").unwrap(),
        channel: ChannelName::parse("general").unwrap(),
        workspace: workspace.map(|w| Workspace::parse(w).unwrap()),
        throttle_seconds: ThrottleSeconds::parse(2.5).unwrap(),
        model: Some(ModelName::parse("echo").unwrap()),
        tools: agentcore::domain::tools::ToolSet::default_set(),
        max_steps: agentcore::domain::tools::MaxSteps::default(),
        mcp_servers: agentcore::domain::mcp::McpServerSet::default(),
        budget: Some(agentcore::domain::budget::Budget::parse(12.5).unwrap()),
        approval_tools: agentcore::domain::approval::ApprovalTools::parse(&["http_fetch"]).unwrap(),
        fallback_models: None,
    }
}

/// No limit on a user's agents.
fn unlimited() -> agentcore::domain::billing::AgentLimit<'static> {
    agentcore::domain::billing::AgentLimit::Quota(0)
}

fn created() -> NewActivity {
    NewActivity::new(Action::AgentCreated, "created")
}

fn task(agent: &str, title: &str, priority: i32) -> Task {
    let new = NewTask {
        title: TaskTitle::parse(title).unwrap(),
        description: Some(TaskDescription::parse("details").unwrap()),
        priority: Priority::parse(priority.into()).unwrap(),
    };
    Task::queued(&AgentId::parse(agent).unwrap(), new, agentcore::domain::now())
}

fn id(value: &str) -> AgentId {
    AgentId::parse(value).unwrap()
}

/// Sets `agent`'s status and throttle as a PATCH would.
async fn set_agent(
    s: &dyn agentcore::store::Store,
    owner: &UserRecord,
    agent: &str,
    status: AgentStatus,
    throttle: f64,
) {
    s.update_agent(&owner.ws(), &id(agent), &|current| {
        Ok(Some(AgentChange {
            agent: Agent {
                summary: AgentSummary {
                    status,
                    throttle_seconds: throttle,
                    ..current.summary.clone()
                },
                ..current.clone()
            },
            activity: vec![],
            post: None,
        }))
    })
    .await
    .unwrap();
}

backend_tests! { store;
    users_are_unique_by_email_key_and_found_by_key_and_id,
    a_secret_is_stored_once_and_the_first_value_wins,
    agents_round_trip_exactly_and_are_scoped_to_their_owner,
    listing_orders_by_creation_and_applies_filters,
    an_agent_update_writes_the_decided_change_with_its_activity,
    tasks_round_trip_and_are_scoped_to_owner_and_agent,
    deleting_an_agent_cascades_to_its_tasks_and_activity,
    activity_pages_newest_first_by_limit_and_before,
    activity_written_by_a_node_whose_clock_is_behind_still_pages_in_written_order,
    writes_cut_off_at_any_point_leave_the_store_writable,
    concurrent_inserts_of_one_agent_id_keep_exactly_one,
}

async fn users_are_unique_by_email_key_and_found_by_key_and_id(store: TestStore) {
    let s = &store.store;
    let ada = user("Ada@Example.com");
    s.insert_user(&ada).await.unwrap();
    let mut twin = user("ada@example.com");
    twin.email_key = "ada@example.com".into();
    assert_eq!(s.insert_user(&twin).await.unwrap_err().code(), "email_taken");

    let found = s.user_by_email_key("ada@example.com").await.unwrap().unwrap();
    assert_eq!(
        (found.id.clone(), found.email.as_str(), found.created_at),
        (ada.id.clone(), "Ada@Example.com", ada.created_at)
    );
    assert_eq!(s.user_by_id(&ada.id).await.unwrap().unwrap().email_key, "ada@example.com");
    assert!(s.user_by_email_key("nobody@example.com").await.unwrap().is_none());

    assert_eq!(s.bump_token_version(&ada.id).await.unwrap(), 1);
    assert_eq!(s.bump_token_version(&ada.id).await.unwrap(), 2);
    assert_eq!(s.user_by_id(&ada.id).await.unwrap().unwrap().token_version, 2);
}

async fn a_secret_is_stored_once_and_the_first_value_wins(store: TestStore) {
    let s = &store.store;
    assert_eq!(s.secret_or_insert("jwt_secret", "first").await.unwrap(), "first");
    assert_eq!(s.secret_or_insert("jwt_secret", "second").await.unwrap(), "first");
    assert_eq!(s.secret_or_insert("other", "x").await.unwrap(), "x");
}

async fn agents_round_trip_exactly_and_are_scoped_to_their_owner(store: TestStore) {
    let s = &store.store;
    let (ada, bob) = (user("ada@example.com"), user("bob@example.com"));
    s.insert_user(&ada).await.unwrap();
    s.insert_user(&bob).await.unwrap();
    let at = agentcore::domain::now();
    let agent = s
        .insert_agent(&ada.ws(), &new_agent("writer", Some("ops")), at, &created(), unlimited())
        .await
        .unwrap();
    assert_eq!(
        (agent.status, agent.created_at, agent.updated_at, agent.throttle_seconds),
        (AgentStatus::Idle, at, at, 2.5)
    );
    assert_eq!(agent.workspace.as_deref(), Some("ops"));
    assert_eq!(s.agent(&ada.ws(), &id("writer")).await.unwrap(), agent);

    let duplicate = s
        .insert_agent(&ada.ws(), &new_agent("writer", None), at, &created(), unlimited())
        .await
        .unwrap_err();
    assert_eq!(duplicate.code(), "agent_exists");
    s.insert_agent(&bob.ws(), &new_agent("writer", None), at, &created(), unlimited())
        .await
        .unwrap();

    let missing = s.agent(&bob.ws(), &id("nobody")).await.unwrap_err();
    assert!(matches!(missing, Error::NotFound { resource: Resource::Agent, .. }));
    // The view of an agent without tasks is the agent alone; another owner's is not found.
    assert_eq!(s.agent_with_tasks(&ada.ws(), &id("writer"), None).await.unwrap(), (agent, vec![]));
    let missing = s.agent_with_tasks(&bob.ws(), &id("nobody"), Some((5, None))).await.unwrap_err();
    assert!(matches!(missing, Error::NotFound { resource: Resource::Agent, .. }));
    assert_eq!(s.list_agents(&ada.ws(), &AgentFilter::default()).await.unwrap().len(), 1);
}

async fn listing_orders_by_creation_and_applies_filters(store: TestStore) {
    let s = &store.store;
    let owner = user("list@example.com");
    s.insert_user(&owner).await.unwrap();
    let base = agentcore::domain::now();
    for (i, (name, workspace)) in
        [("zeta", Some("a")), ("alpha", None), ("mid", Some("a"))].into_iter().enumerate()
    {
        s.insert_agent(
            &owner.ws(),
            &new_agent(name, workspace),
            base + Duration::milliseconds(i as i64),
            &created(),
            unlimited(),
        )
        .await
        .unwrap();
    }
    let ids = |agents: Vec<Agent>| agents.into_iter().map(|a| a.id.to_string()).collect::<Vec<_>>();
    assert_eq!(
        ids(s.list_agents(&owner.ws(), &AgentFilter::default()).await.unwrap()),
        ["zeta", "alpha", "mid"]
    );
    let in_a = AgentFilter { workspace: Some(Workspace::parse("a").unwrap()), status: None };
    assert_eq!(ids(s.list_agents(&owner.ws(), &in_a).await.unwrap()), ["zeta", "mid"]);
    let active = AgentFilter { workspace: None, status: Some(AgentStatus::Active) };
    assert!(s.list_agents(&owner.ws(), &active).await.unwrap().is_empty());
}

async fn an_agent_update_writes_the_decided_change_with_its_activity(store: TestStore) {
    let s = &store.store;
    let owner = user("update@example.com");
    s.insert_user(&owner).await.unwrap();
    s.insert_agent(
        &owner.ws(),
        &new_agent("worker", None),
        agentcore::domain::now(),
        &created(),
        unlimited(),
    )
    .await
    .unwrap();

    let updated = s
        .update_agent(&owner.ws(), &id("worker"), &|current| {
            Ok(Some(AgentChange {
                agent: Agent {
                    summary: AgentSummary {
                        status: AgentStatus::Vacation,
                        name: "Renamed".into(),
                        model: None,
                        updated_at: agentcore::domain::now(),
                        ..current.summary.clone()
                    },
                    status_before_vacation: Some(AgentStatus::Active),
                    ..current.clone()
                },
                activity: vec![NewActivity::new(Action::VacationStarted, "off")],
                post: None,
            }))
        })
        .await
        .unwrap();
    let stored = s.agent(&owner.ws(), &id("worker")).await.unwrap();
    assert_eq!(stored, updated);
    assert_eq!(
        (stored.status, stored.status_before_vacation, stored.model.clone()),
        (AgentStatus::Vacation, Some(AgentStatus::Active), None)
    );

    let refused =
        s.update_agent(&owner.ws(), &id("worker"), &|_| Err(Error::Forbidden("no".into()))).await;
    assert!(matches!(refused, Err(Error::Forbidden(_))));
    let unchanged = s.update_agent(&owner.ws(), &id("worker"), &|_| Ok(None)).await.unwrap();
    assert_eq!(unchanged, stored);
    let missing = s.update_agent(&owner.ws(), &id("ghost"), &|_| Ok(None)).await.unwrap_err();
    assert_eq!(missing.code(), "agent_not_found");

    let log = s.activity(&owner.ws(), &id("worker"), &ActivityQuery::default()).await.unwrap();
    let actions: Vec<Action> = log.iter().map(|e| e.action).collect();
    assert_eq!(actions, [Action::VacationStarted, Action::AgentCreated]);
}

async fn tasks_round_trip_and_are_scoped_to_owner_and_agent(store: TestStore) {
    let s = &store.store;
    let (owner, other) = (user("tasks@example.com"), user("other@example.com"));
    s.insert_user(&owner).await.unwrap();
    s.insert_user(&other).await.unwrap();
    let now = agentcore::domain::now();
    s.insert_agent(&owner.ws(), &new_agent("a", None), now, &created(), unlimited()).await.unwrap();
    s.insert_agent(&owner.ws(), &new_agent("b", None), now, &created(), unlimited()).await.unwrap();
    let t = task("a", "first", 1);
    s.insert_task(
        &owner.ws(),
        &t,
        &NewActivity::for_task(Action::TaskAdded, t.id.as_str(), "added"),
    )
    .await
    .unwrap();

    assert_eq!(s.task(&owner.ws(), &id("a"), &t.id).await.unwrap(), t);
    assert_eq!(s.task(&owner.ws(), &id("b"), &t.id).await.unwrap_err().code(), "task_not_found");
    assert_eq!(s.task(&other.ws(), &id("a"), &t.id).await.unwrap_err().code(), "agent_not_found");
    assert_eq!(s.tasks(&owner.ws(), &id("a"), None).await.unwrap(), vec![t.clone()]);
    assert!(s.tasks(&owner.ws(), &id("a"), Some(TaskStatus::Failed)).await.unwrap().is_empty());
    let orphan = task("ghost", "nowhere", 0);
    let refused = s
        .insert_task(&owner.ws(), &orphan, &NewActivity::new(Action::TaskAdded, "x"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "agent_not_found");

    let finished_at = agentcore::domain::now();
    let done = s
        .update_task(&owner.ws(), &id("a"), &t.id, &|current| {
            Ok(TaskChange {
                write: TaskWrite::Update(Box::new(Task {
                    status: TaskStatus::Complete,
                    result: Some("answer".into()),
                    attempts: 1,
                    completed_at: Some(finished_at),
                    usage: Some(agentcore::domain::task::Usage::new(12, 34)),
                    ..current.clone()
                })),
                activity: vec![NewActivity::for_task(
                    Action::TaskCompleted,
                    current.id.as_str(),
                    "done",
                )],
                post: None,
            })
        })
        .await
        .unwrap();
    assert_eq!(s.task(&owner.ws(), &id("a"), &t.id).await.unwrap(), done);
    assert_eq!(s.agent(&owner.ws(), &id("a")).await.unwrap().backlog_summary.complete, 1);

    s.update_task(&owner.ws(), &id("a"), &t.id, &|_| {
        Ok(TaskChange { write: TaskWrite::Delete, activity: vec![], post: None })
    })
    .await
    .unwrap();
    assert_eq!(s.task(&owner.ws(), &id("a"), &t.id).await.unwrap_err().code(), "task_not_found");
}

async fn deleting_an_agent_cascades_to_its_tasks_and_activity(store: TestStore) {
    let s = &store.store;
    let owner = user("cascade@example.com");
    s.insert_user(&owner).await.unwrap();
    s.insert_agent(
        &owner.ws(),
        &new_agent("gone", None),
        agentcore::domain::now(),
        &created(),
        unlimited(),
    )
    .await
    .unwrap();
    for i in 0..3 {
        let t = task("gone", &format!("t{i}"), 0);
        s.insert_task(&owner.ws(), &t, &NewActivity::new(Action::TaskAdded, "added"))
            .await
            .unwrap();
    }
    s.delete_agent(&owner.ws(), &id("gone")).await.unwrap();
    assert_eq!(store.db.count("SELECT COUNT(*) FROM tasks", &[]).await, 0);
    assert_eq!(store.db.count("SELECT COUNT(*) FROM activity", &[]).await, 0);
    assert_eq!(
        s.delete_agent(&owner.ws(), &id("gone")).await.unwrap_err().code(),
        "agent_not_found"
    );
}

async fn activity_pages_newest_first_by_limit_and_before(store: TestStore) {
    let s = &store.store;
    let owner = user("activity@example.com");
    s.insert_user(&owner).await.unwrap();
    let start = Utc::now() - Duration::hours(1);
    // Entries are written in time order: one dated before the agent's previous entry would be
    // moved after it (see the next test).
    s.insert_agent(
        &owner.ws(),
        &new_agent("log", None),
        start - Duration::minutes(1),
        &created(),
        unlimited(),
    )
    .await
    .unwrap();
    for i in 0..5 {
        let mut t = task("log", &format!("t{i}"), 0);
        t.created_at = start + Duration::minutes(i);
        s.insert_task(&owner.ws(), &t, &NewActivity::new(Action::TaskAdded, format!("t{i}")))
            .await
            .unwrap();
    }
    let owner_id = &owner.ws();
    let page = |limit, before| async move {
        s.activity(owner_id, &id("log"), &ActivityQuery { limit, before, after: None })
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.details)
            .collect::<Vec<_>>()
    };
    assert_eq!(page(2, None).await, ["t4", "t3"]);
    assert_eq!(page(10, Some(start + Duration::minutes(2))).await, ["t1", "t0", "created"]);
    assert_eq!(page(1, Some(start + Duration::seconds(30))).await, ["t0"]);
}

async fn activity_written_by_a_node_whose_clock_is_behind_still_pages_in_written_order(
    store: TestStore,
) {
    let s = &store.store;
    let owner = user("skewed@example.com");
    s.insert_user(&owner).await.unwrap();
    let now = Utc::now();
    s.insert_agent(&owner.ws(), &new_agent("log", None), now, &created(), unlimited())
        .await
        .unwrap();
    // Written next, by a node 45 s behind.
    let behind = now - Duration::seconds(45);
    let mut t = task("log", "late", 0);
    t.created_at = behind;
    s.insert_task(&owner.ws(), &t, &NewActivity::new(Action::TaskAdded, "late")).await.unwrap();
    let entries = s
        .activity(&owner.ws(), &id("log"), &ActivityQuery { limit: 10, before: None, after: None })
        .await
        .unwrap();
    let details: Vec<&str> = entries.iter().map(|e| e.details.as_str()).collect();
    assert_eq!(details[0], "late", "newest first: the order written");
    if store.db.backend == crate::helpers::Backend::Postgres {
        // Several clocks write to PostgreSQL: the late entry is dated after the one before it,
        // so paging back from it never skips or repeats an entry.
        assert!(
            entries[0].timestamp > entries[1].timestamp,
            "{:?} then {:?}",
            entries[1].timestamp,
            entries[0].timestamp
        );
        let older = s
            .activity(
                &owner.ws(),
                &id("log"),
                &ActivityQuery { limit: 10, before: Some(entries[0].timestamp), after: None },
            )
            .await
            .unwrap();
        assert_eq!(older.len(), entries.len() - 1);
    }
}

async fn writes_cut_off_at_any_point_leave_the_store_writable(store: TestStore) {
    let s = &store.store;
    let owner = user("cut@example.com");
    s.insert_user(&owner).await.unwrap();
    let (entry, plans) = (created(), unlimited());
    // A caller that gives up (a request's deadline, a client gone) drops the write wherever
    // it is: before BEGIN, inside the transaction, at COMMIT.
    let mut stored = 0;
    let workspace = owner.ws();
    for n in 0..200u64 {
        let agent = new_agent(&format!("cut-{n}"), None);
        let write = s.insert_agent(&workspace, &agent, agentcore::domain::now(), &entry, plans);
        if let Ok(result) =
            tokio::time::timeout(std::time::Duration::from_micros(n * 5), write).await
        {
            result.unwrap();
            stored += 1;
        }
    }
    // The next writes find a healthy connection, and every write that returned is there.
    s.insert_agent(&owner.ws(), &new_agent("after", None), agentcore::domain::now(), &entry, plans)
        .await
        .unwrap();
    let listed = s
        .list_agents(&owner.ws(), &agentcore::domain::agent::AgentFilter::default())
        .await
        .unwrap();
    assert!(listed.len() > stored, "{} listed, {stored} acknowledged", listed.len());
    assert!(s.health().fault().is_none());
}

async fn concurrent_inserts_of_one_agent_id_keep_exactly_one(store: TestStore) {
    let s = &store.store;
    let owner = user("race@example.com");
    s.insert_user(&owner).await.unwrap();
    let (agent, entry, plans) = (new_agent("same", None), created(), unlimited());
    let workspace = owner.ws();
    let attempts =
        (0..8).map(|_| s.insert_agent(&workspace, &agent, agentcore::domain::now(), &entry, plans));
    let results = futures::future::join_all(attempts).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(results.iter().filter_map(|r| r.as_ref().err()).all(|e| e.code() == "agent_exists"));
}

mod counters;

/// Finishes that wait together, committed together.
mod finishes;

mod outbox;

mod rate_limits;

mod retention;

mod runtime;

mod upgrade;

mod webhooks;

/// Adds that wait together, committed together.
mod writes;
