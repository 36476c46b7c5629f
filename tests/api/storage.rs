//! The storage conformance suite: the `Store` trait's promises, written once and run against
//! both backends, each test on a fresh database.

use agentcore::domain::activity::{Action, ActivityQuery, NewActivity};
use agentcore::domain::agent::{
    Agent, AgentFilter, AgentId, AgentName, AgentStatus, ChannelName, ModelName, NewAgent,
    RolePrompt, ThrottleSeconds, Workspace,
};
use agentcore::domain::task::{NewTask, Priority, Task, TaskDescription, TaskStatus, TaskTitle};
use agentcore::domain::user::UserId;
use agentcore::store::{AgentChange, TaskChange, TaskWrite, UserRecord};
use agentcore::{Error, Resource};
use chrono::{Duration, Utc};

use crate::helpers::backend_tests;

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

fn new_agent(id: &str, workspace: Option<&str>) -> NewAgent {
    NewAgent {
        id: AgentId::parse(id).unwrap(),
        name: AgentName::parse(&format!("Agent {id}")).unwrap(),
        role_prompt: RolePrompt::parse("Be useful.").unwrap(),
        channel: ChannelName::parse("general").unwrap(),
        workspace: workspace.map(|w| Workspace::parse(w).unwrap()),
        throttle_seconds: ThrottleSeconds::parse(2.5).unwrap(),
        model: Some(ModelName::parse("echo").unwrap()),
    }
}

fn unlimited() -> agentcore::domain::billing::Plans {
    agentcore::domain::billing::Plans::parse("free=1000").unwrap()
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

backend_tests! { store;

async fn users_are_unique_by_email_key_and_found_by_key_and_id(store) {
    let s = &store.store;
    let ada = user("Ada@Example.com");
    s.insert_user(&ada).await.unwrap();
    let mut twin = user("ada@example.com");
    twin.email_key = "ada@example.com".into();
    assert_eq!(s.insert_user(&twin).await.unwrap_err().code(), "email_taken");

    let found = s.user_by_email_key("ada@example.com").await.unwrap().unwrap();
    assert_eq!((found.id.clone(), found.email.as_str(), found.created_at), (ada.id.clone(), "Ada@Example.com", ada.created_at));
    assert_eq!(s.user_by_id(&ada.id).await.unwrap().unwrap().email_key, "ada@example.com");
    assert!(s.user_by_email_key("nobody@example.com").await.unwrap().is_none());

    assert_eq!(s.bump_token_version(&ada.id).await.unwrap(), 1);
    assert_eq!(s.bump_token_version(&ada.id).await.unwrap(), 2);
    assert_eq!(s.user_by_id(&ada.id).await.unwrap().unwrap().token_version, 2);
}

async fn a_secret_is_stored_once_and_the_first_value_wins(store) {
    let s = &store.store;
    assert_eq!(s.secret_or_insert("jwt_secret", "first").await.unwrap(), "first");
    assert_eq!(s.secret_or_insert("jwt_secret", "second").await.unwrap(), "first");
    assert_eq!(s.secret_or_insert("other", "x").await.unwrap(), "x");
}

async fn agents_round_trip_exactly_and_are_scoped_to_their_owner(store) {
    let s = &store.store;
    let (ada, bob) = (user("ada@example.com"), user("bob@example.com"));
    s.insert_user(&ada).await.unwrap();
    s.insert_user(&bob).await.unwrap();
    let at = agentcore::domain::now();
    let agent = s.insert_agent(&ada.id, &new_agent("writer", Some("ops")), at, &created(), &unlimited()).await.unwrap();
    assert_eq!((agent.status, agent.created_at, agent.updated_at, agent.throttle_seconds), (AgentStatus::Idle, at, at, 2.5));
    assert_eq!(agent.workspace.as_deref(), Some("ops"));
    assert_eq!(s.agent(&ada.id, &id("writer")).await.unwrap(), agent);

    let duplicate = s.insert_agent(&ada.id, &new_agent("writer", None), at, &created(), &unlimited()).await.unwrap_err();
    assert_eq!(duplicate.code(), "agent_exists");
    s.insert_agent(&bob.id, &new_agent("writer", None), at, &created(), &unlimited()).await.unwrap();

    let missing = s.agent(&bob.id, &id("nobody")).await.unwrap_err();
    assert!(matches!(missing, Error::NotFound { resource: Resource::Agent, .. }));
    assert_eq!(s.list_agents(&ada.id, &AgentFilter::default()).await.unwrap().len(), 1);
}

async fn listing_orders_by_creation_and_applies_filters(store) {
    let s = &store.store;
    let owner = user("list@example.com");
    s.insert_user(&owner).await.unwrap();
    let base = agentcore::domain::now();
    for (i, (name, workspace)) in [("zeta", Some("a")), ("alpha", None), ("mid", Some("a"))].into_iter().enumerate() {
        s.insert_agent(&owner.id, &new_agent(name, workspace), base + Duration::milliseconds(i as i64), &created(), &unlimited()).await.unwrap();
    }
    let ids = |agents: Vec<Agent>| agents.into_iter().map(|a| a.id.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(s.list_agents(&owner.id, &AgentFilter::default()).await.unwrap()), ["zeta", "alpha", "mid"]);
    let in_a = AgentFilter { workspace: Some("a".into()), status: None };
    assert_eq!(ids(s.list_agents(&owner.id, &in_a).await.unwrap()), ["zeta", "mid"]);
    let active = AgentFilter { workspace: None, status: Some(AgentStatus::Active) };
    assert!(s.list_agents(&owner.id, &active).await.unwrap().is_empty());
}

async fn an_agent_update_writes_the_decided_change_with_its_activity(store) {
    let s = &store.store;
    let owner = user("update@example.com");
    s.insert_user(&owner).await.unwrap();
    s.insert_agent(&owner.id, &new_agent("worker", None), agentcore::domain::now(), &created(), &unlimited()).await.unwrap();

    let updated = s.update_agent(&owner.id, &id("worker"), &|current| {
        Ok(Some(AgentChange {
            agent: Agent { status: AgentStatus::Vacation, status_before_vacation: Some(AgentStatus::Active), name: "Renamed".into(), model: None, updated_at: agentcore::domain::now(), ..current.clone() },
            activity: vec![NewActivity::new(Action::VacationStarted, "off")],
            post: None,
        }))
    }).await.unwrap();
    let stored = s.agent(&owner.id, &id("worker")).await.unwrap();
    assert_eq!(stored, updated);
    assert_eq!((stored.status, stored.status_before_vacation, stored.model.clone()), (AgentStatus::Vacation, Some(AgentStatus::Active), None));

    let refused = s.update_agent(&owner.id, &id("worker"), &|_| Err(Error::Forbidden("no".into()))).await;
    assert!(matches!(refused, Err(Error::Forbidden(_))));
    let unchanged = s.update_agent(&owner.id, &id("worker"), &|_| Ok(None)).await.unwrap();
    assert_eq!(unchanged, stored);
    let missing = s.update_agent(&owner.id, &id("ghost"), &|_| Ok(None)).await.unwrap_err();
    assert_eq!(missing.code(), "agent_not_found");

    let log = s.activity(&owner.id, &id("worker"), &ActivityQuery::default()).await.unwrap();
    let actions: Vec<Action> = log.iter().map(|e| e.action).collect();
    assert_eq!(actions, [Action::VacationStarted, Action::AgentCreated]);
}

async fn tasks_round_trip_and_are_scoped_to_owner_and_agent(store) {
    let s = &store.store;
    let (owner, other) = (user("tasks@example.com"), user("other@example.com"));
    s.insert_user(&owner).await.unwrap();
    s.insert_user(&other).await.unwrap();
    let now = agentcore::domain::now();
    s.insert_agent(&owner.id, &new_agent("a", None), now, &created(), &unlimited()).await.unwrap();
    s.insert_agent(&owner.id, &new_agent("b", None), now, &created(), &unlimited()).await.unwrap();
    let t = task("a", "first", 1);
    s.insert_task(&owner.id, &t, &NewActivity::for_task(Action::TaskAdded, t.id.as_str(), "added")).await.unwrap();

    assert_eq!(s.task(&owner.id, &id("a"), &t.id).await.unwrap(), t);
    assert_eq!(s.task(&owner.id, &id("b"), &t.id).await.unwrap_err().code(), "task_not_found");
    assert_eq!(s.task(&other.id, &id("a"), &t.id).await.unwrap_err().code(), "agent_not_found");
    assert_eq!(s.tasks(&owner.id, &id("a"), None).await.unwrap(), vec![t.clone()]);
    assert!(s.tasks(&owner.id, &id("a"), Some(TaskStatus::Failed)).await.unwrap().is_empty());
    let orphan = task("ghost", "nowhere", 0);
    let refused = s.insert_task(&owner.id, &orphan, &NewActivity::new(Action::TaskAdded, "x")).await.unwrap_err();
    assert_eq!(refused.code(), "agent_not_found");

    let finished_at = agentcore::domain::now();
    let done = s.update_task(&owner.id, &id("a"), &t.id, &|current| {
        Ok(TaskChange {
            write: TaskWrite::Update(Box::new(Task { status: TaskStatus::Complete, result: Some("answer".into()), attempts: 1, completed_at: Some(finished_at), usage: Some(agentcore::domain::task::Usage { input_tokens: 12, output_tokens: 34 }), ..current.clone() })),
            activity: vec![NewActivity::for_task(Action::TaskCompleted, current.id.as_str(), "done")],
        })
    }).await.unwrap();
    assert_eq!(s.task(&owner.id, &id("a"), &t.id).await.unwrap(), done);
    assert_eq!(s.agent(&owner.id, &id("a")).await.unwrap().backlog_summary.complete, 1);

    s.update_task(&owner.id, &id("a"), &t.id, &|_| Ok(TaskChange { write: TaskWrite::Delete, activity: vec![] })).await.unwrap();
    assert_eq!(s.task(&owner.id, &id("a"), &t.id).await.unwrap_err().code(), "task_not_found");
}

async fn deleting_an_agent_cascades_to_its_tasks_and_activity(store) {
    let s = &store.store;
    let owner = user("cascade@example.com");
    s.insert_user(&owner).await.unwrap();
    s.insert_agent(&owner.id, &new_agent("gone", None), agentcore::domain::now(), &created(), &unlimited()).await.unwrap();
    for i in 0..3 {
        let t = task("gone", &format!("t{i}"), 0);
        s.insert_task(&owner.id, &t, &NewActivity::new(Action::TaskAdded, "added")).await.unwrap();
    }
    s.delete_agent(&owner.id, &id("gone")).await.unwrap();
    assert_eq!(store.db.count("SELECT COUNT(*) FROM tasks", &[]).await, 0);
    assert_eq!(store.db.count("SELECT COUNT(*) FROM activity", &[]).await, 0);
    assert_eq!(s.delete_agent(&owner.id, &id("gone")).await.unwrap_err().code(), "agent_not_found");
}

async fn activity_pages_newest_first_by_limit_and_before(store) {
    let s = &store.store;
    let owner = user("activity@example.com");
    s.insert_user(&owner).await.unwrap();
    let start = Utc::now() - Duration::hours(1);
    s.insert_agent(&owner.id, &new_agent("log", None), agentcore::domain::now(), &created(), &unlimited()).await.unwrap();
    for i in 0..5 {
        let mut t = task("log", &format!("t{i}"), 0);
        t.created_at = start + Duration::minutes(i);
        s.insert_task(&owner.id, &t, &NewActivity::new(Action::TaskAdded, format!("t{i}"))).await.unwrap();
    }
    let owner_id = &owner.id;
    let page = |limit, before| async move {
        s.activity(owner_id, &id("log"), &ActivityQuery { limit, before }).await.unwrap().into_iter().map(|e| e.details).collect::<Vec<_>>()
    };
    assert_eq!(page(2, None).await, ["t4", "t3"]);
    assert_eq!(page(10, Some(start + Duration::minutes(2))).await, ["t1", "t0"]);
    assert_eq!(page(1, Some(start + Duration::seconds(30))).await, ["t0"]);
}

async fn concurrent_inserts_of_one_agent_id_keep_exactly_one(store) {
    let s = &store.store;
    let owner = user("race@example.com");
    s.insert_user(&owner).await.unwrap();
    let (agent, entry, plans) = (new_agent("same", None), created(), unlimited());
    let attempts = (0..8).map(|_| s.insert_agent(&owner.id, &agent, agentcore::domain::now(), &entry, &plans));
    let results = futures::future::join_all(attempts).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(results.iter().filter_map(|r| r.as_ref().err()).all(|e| e.code() == "agent_exists"));
}

}

mod outbox {
    use super::*;
    use agentcore::discord::MessageBody;
    use agentcore::domain::chat::{Connection, ConnectionKind, Mapping, NewPost, OutboxLane};
    use agentcore::store::ConnectionRecord;

    /// An owner with agent `a` mapped to channel 71 of guild 7, and `count` status posts queued.
    fn lane(owner: &UserId) -> OutboxLane {
        OutboxLane { owner_id: owner.as_str().to_owned(), channel_id: "71".into() }
    }

    async fn queued(s: &std::sync::Arc<dyn agentcore::store::Store>, count: usize) -> UserId {
        let owner = user("outbox@example.com");
        s.insert_user(&owner).await.unwrap();
        s.insert_agent(
            &owner.id,
            &new_agent("a", None),
            agentcore::domain::now(),
            &created(),
            &unlimited(),
        )
        .await
        .unwrap();
        let connection = Connection {
            id: "c1".into(),
            guild_id: "7".into(),
            guild_name: "G".into(),
            kind: ConnectionKind::Oauth,
            connected_at: agentcore::domain::now(),
            channel_count: 1,
        };
        s.upsert_connection(&owner.id, &ConnectionRecord { connection, sealed_token: None })
            .await
            .unwrap();
        let mapping = Mapping {
            id: "m1".into(),
            agent_id: id("a"),
            guild_id: "7".into(),
            channel_id: "71".into(),
            channel_name: "c".into(),
            created_at: agentcore::domain::now(),
        };
        s.upsert_mapping(&owner.id, &mapping).await.unwrap();
        for i in 0..count {
            s.update_agent(&owner.id, &id("a"), &|current| {
                Ok(Some(AgentChange {
                    agent: Agent { name: format!("n{i}"), ..current.clone() },
                    activity: vec![],
                    post: Some(NewPost::new(MessageBody::new(Some(format!("post {i}")), None))),
                }))
            })
            .await
            .unwrap();
        }
        owner.id
    }

    backend_tests! { store;

    async fn only_the_oldest_post_of_a_channel_can_be_claimed_and_only_once(store) {
        let s = &store.store;
        let owner = queued(s, 2).await;
        let lane = &lane(&owner);
        assert_eq!(s.outbox_lanes().await.unwrap(), std::slice::from_ref(lane));
        let now = agentcore::domain::now();
        let lease = now + Duration::seconds(30);
        let first = s.claim_post(lane, "node-a", now, lease).await.unwrap().unwrap();
        assert_eq!(first.body.content.as_deref(), Some("post 0"));
        assert!(s.claim_post(lane, "node-b", now, lease).await.unwrap().is_none(), "the head is leased");
        assert_eq!(s.next_post_due(lane).await.unwrap(), Some(lease));

        let retry_at = now + Duration::seconds(5);
        s.retry_post(first.id, "node-b", retry_at, "not the holder").await.unwrap();
        assert_eq!(s.next_post_due(lane).await.unwrap(), Some(lease), "only the holder can release");
        s.retry_post(first.id, "node-a", retry_at, "500").await.unwrap();
        assert!(s.claim_post(lane, "node-b", now, lease).await.unwrap().is_none(), "the head waits for its retry");
        let again = s.claim_post(lane, "node-b", retry_at, lease).await.unwrap().unwrap();
        assert_eq!((again.id, again.attempts), (first.id, 1));

        assert!(s.finish_post(again.id, "node-b", "999").await.unwrap());
        let second = s.claim_post(lane, "node-a", retry_at, lease).await.unwrap().unwrap();
        assert_eq!(second.body.content.as_deref(), Some("post 1"));
        assert_eq!(store.db.count("SELECT COUNT(*) FROM outbox WHERE message_id = '999'", &[]).await, 1);

        assert!(!s.finish_post(second.id, "node-b", "1000").await.unwrap(), "only the holder records delivery");
        assert!(s.finish_post(second.id, "node-a", "1000").await.unwrap());
        assert!(s.outbox_lanes().await.unwrap().is_empty());
        assert_eq!(s.next_post_due(lane).await.unwrap(), None);
        assert_eq!(s.prune_delivered(agentcore::domain::now() + Duration::seconds(1)).await.unwrap(), 2);
    }

    async fn a_dropped_post_logs_for_its_agent_and_removing_the_connection_clears_the_channel(store) {
        let s = &store.store;
        let owner = queued(s, 2).await;
        let now = agentcore::domain::now();
        let post = s.claim_post(&lane(&owner), "n", now, now + Duration::seconds(30)).await.unwrap().unwrap();
        s.drop_post(&post, "n", &NewActivity::new(Action::PostFailed, "gone")).await.unwrap();
        let log = s.activity(&owner, &id("a"), &ActivityQuery::default()).await.unwrap();
        assert_eq!(log[0].action, Action::PostFailed);
        assert_eq!(store.db.count("SELECT COUNT(*) FROM outbox", &[]).await, 1);
        s.delete_connection(&owner, "7").await.unwrap();
        assert_eq!(store.db.count("SELECT COUNT(*) FROM outbox", &[]).await, 0);
        assert_eq!(store.db.count("SELECT COUNT(*) FROM chat_mappings", &[]).await, 0);
    }

    }
}

mod runtime {
    use super::*;
    use agentcore::domain::runtime::{AgentKey, Claim, Outcome};
    use agentcore::store::Store;

    const A: &str = "node-a";
    const B: &str = "node-b";

    fn later(seconds: i64) -> chrono::DateTime<Utc> {
        agentcore::domain::now() + Duration::seconds(seconds)
    }

    /// An owner with an active agent `r` and tasks of the given priorities.
    async fn active(s: &dyn Store, priorities: &[i32]) -> (UserRecord, AgentKey, Vec<Task>) {
        let owner = user("runtime@example.com");
        s.insert_user(&owner).await.unwrap();
        s.insert_agent(
            &owner.id,
            &new_agent("r", None),
            agentcore::domain::now(),
            &created(),
            &unlimited(),
        )
        .await
        .unwrap();
        s.update_agent(&owner.id, &id("r"), &|current| {
            Ok(Some(AgentChange {
                agent: Agent { status: AgentStatus::Active, ..current.clone() },
                activity: vec![],
                post: None,
            }))
        })
        .await
        .unwrap();
        let mut tasks = Vec::new();
        for (n, priority) in priorities.iter().enumerate() {
            let t = task("r", &format!("t{n}"), *priority);
            s.insert_task(&owner.id, &t, &NewActivity::new(Action::TaskAdded, "added"))
                .await
                .unwrap();
            tasks.push(t);
        }
        let key = AgentKey::new(owner.id.as_str(), "r");
        (owner, key, tasks)
    }

    fn claimed(claim: Claim) -> Task {
        match claim {
            Claim::Task(claimed) => claimed.task,
            other => panic!("expected a task, got {other:?}"),
        }
    }

    fn done() -> Outcome {
        Outcome::Complete { text: "ok".into(), usage: None }
    }

    backend_tests! { store;

    async fn an_agent_is_leased_to_one_node_and_only_its_holder_claims_tasks(store) {
        let s = store.store.as_ref();
        let (_, key, _) = active(s, &[0]).await;
        let now = agentcore::domain::now();
        assert_eq!(s.claim_agents(A, now, later(30), 10).await.unwrap(), std::slice::from_ref(&key));
        assert!(s.claim_agents(B, now, later(30), 10).await.unwrap().is_empty());
        assert_eq!(s.claim_task(&key, B, now, later(30)).await.unwrap(), Claim::Lost);
        claimed(s.claim_task(&key, A, now, later(30)).await.unwrap());
        // The heartbeat renews what A holds; after its lease ends B may take the agent over.
        assert_eq!(s.heartbeat(A, now, later(30)).await.unwrap(), std::slice::from_ref(&key));
        assert_eq!(s.heartbeat(B, now, later(30)).await.unwrap(), []);
        let load = s.runtime_load(now).await.unwrap();
        assert_eq!((load.active, load.nodes, load.fair_share()), (1, 2, 1));
        let after_expiry = later(31);
        assert_eq!(s.claim_agents(B, after_expiry, later(60), 10).await.unwrap(), [key]);
    }

    async fn tasks_are_claimed_by_priority_one_at_a_time(store) {
        let s = store.store.as_ref();
        let (_, key, tasks) = active(s, &[0, 5, 2]).await;
        let now = agentcore::domain::now();
        s.claim_agents(A, now, later(30), 10).await.unwrap();
        let first = claimed(s.claim_task(&key, A, now, later(30)).await.unwrap());
        assert_eq!((first.id.clone(), first.status, first.attempts), (tasks[1].id.clone(), TaskStatus::InProgress, 1));
        assert!(s.finish_task(&key, &first.id, A, &done(), 1).await.unwrap());
        // The agent's throttle (2.5 s) holds the next task back, then lets it run.
        let soon = agentcore::domain::now() + Duration::seconds(1);
        assert!(matches!(s.claim_task(&key, A, soon, later(30)).await.unwrap(), Claim::Wait(Some(_))));
        let after = agentcore::domain::now() + Duration::seconds(3);
        let second = claimed(s.claim_task(&key, A, after, later(30)).await.unwrap());
        assert_eq!(second.id, tasks[2].id);
    }

    async fn finishing_is_fenced_on_the_task_lease(store) {
        let s = store.store.as_ref();
        let (owner, key, _) = active(s, &[0]).await;
        let now = agentcore::domain::now();
        s.claim_agents(A, now, later(30), 10).await.unwrap();
        let running = claimed(s.claim_task(&key, A, now, later(30)).await.unwrap());
        // Another node cannot finish it, and cannot start a second task meanwhile.
        assert!(!s.finish_task(&key, &running.id, B, &done(), 1).await.unwrap());
        // Its lease ran out: the task goes back to the queue and A's late result is dropped.
        assert_eq!(s.requeue_expired_tasks(later(31)).await.unwrap(), 1);
        assert!(!s.finish_task(&key, &running.id, A, &done(), 1).await.unwrap());
        let task = s.task(&owner.id, &id("r"), &running.id).await.unwrap();
        assert_eq!((task.status, task.result), (TaskStatus::Queued, None));
    }

    async fn a_task_held_by_a_live_node_blocks_the_next_and_an_expired_one_runs_again(store) {
        let s = store.store.as_ref();
        let (_, key, _) = active(s, &[1, 0]).await;
        let now = agentcore::domain::now();
        let task_lease = now + Duration::seconds(10);
        s.claim_agents(A, now, now + Duration::seconds(2), 10).await.unwrap();
        let running = claimed(s.claim_task(&key, A, now, task_lease).await.unwrap());
        // A goes quiet: B takes the agent when its lease ends, but A's task still runs.
        let at = now + Duration::seconds(3);
        assert_eq!(s.claim_agents(B, at, at + Duration::seconds(30), 10).await.unwrap(), std::slice::from_ref(&key));
        assert_eq!(s.claim_task(&key, B, at, at + Duration::seconds(30)).await.unwrap(), Claim::Wait(Some(task_lease)));
        // Once the task's lease is over too, B runs it again before anything else.
        let at = now + Duration::seconds(11);
        let again = claimed(s.claim_task(&key, B, at, at + Duration::seconds(30)).await.unwrap());
        assert_eq!((again.id, again.attempts), (running.id, 2));
    }

    async fn releasing_a_node_requeues_its_tasks_and_frees_its_agents(store) {
        let s = store.store.as_ref();
        let (owner, key, _) = active(s, &[0]).await;
        let now = agentcore::domain::now();
        s.claim_agents(A, now, later(30), 10).await.unwrap();
        s.heartbeat(A, now, later(30)).await.unwrap();
        let running = claimed(s.claim_task(&key, A, now, later(30)).await.unwrap());
        s.release_node(A, agentcore::domain::now()).await.unwrap();
        let task = s.task(&owner.id, &id("r"), &running.id).await.unwrap();
        assert_eq!((task.status, task.attempts), (TaskStatus::Queued, 1));
        assert_eq!(s.runtime_load(agentcore::domain::now()).await.unwrap().nodes, 0);
        assert_eq!(s.claim_agents(B, agentcore::domain::now(), later(30), 10).await.unwrap(), [key]);
    }

    }
}
