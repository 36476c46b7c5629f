//! A node's finished tasks committed together (`finish_lanes.rs`): each finish written as it
//! would be alone, fewer transactions than finishes, and one the database refuses failing
//! alone.

use super::*;
use agentcore::domain::runtime::{AgentKey, Claim, Outcome};
use agentcore::store::{NextClaim, Store};

const NODE: &str = "node-a";
/// Enough that the last finish to arrive is almost surely not the first of its lane (four on
/// PostgreSQL, agents spread by a hash): it shares a transaction.
const AGENTS: usize = 40;

backend_tests! { store;
    finishes_arriving_together_commit_together_each_as_alone,
}

/// `AGENTS` active agents of one owner, unthrottled, each with two queued tasks (the first
/// first).
async fn agents_with_two_tasks(s: &dyn Store) -> (UserRecord, Vec<(AgentKey, Task, Task)>) {
    let owner = user("finishes@example.com");
    s.insert_user(&owner).await.unwrap();
    let mut agents = Vec::new();
    for n in 0..AGENTS {
        let name = format!("r{n}");
        let now = agentcore::domain::now();
        s.insert_agent(&owner.ws(), &new_agent(&name, None), now, &created(), unlimited())
            .await
            .unwrap();
        set_agent(s, &owner, &name, AgentStatus::Active, 0.0).await;
        let (first, second) = (task(&name, "first", 1), task(&name, "second", 0));
        for t in [&first, &second] {
            s.insert_task(&owner.ws(), t, &NewActivity::new(Action::TaskAdded, "added"))
                .await
                .unwrap();
        }
        agents.push((AgentKey::new(owner.id.as_str(), &name), first, second));
    }
    (owner, agents)
}

fn claimed(claim: Claim) -> Task {
    match claim {
        Claim::Task(claimed) => claimed.task,
        other => panic!("expected a task, got {other:?}"),
    }
}

fn answer(text: &str) -> Outcome {
    Outcome::Complete { text: text.into(), tool_calls: 0 }
}

async fn status_of(s: &dyn Store, owner: &UserRecord, agent: &AgentKey, task: &Task) -> TaskStatus {
    s.task(&owner.ws(), &id(&agent.agent_id), &task.id).await.unwrap().status
}

async fn finishes_arriving_together_commit_together_each_as_alone(store: TestStore) {
    let s = store.store.as_ref();
    let (owner, agents) = agents_with_two_tasks(s).await;
    let lease = StdDuration::from_secs(30);
    assert_eq!(s.claim_agents(NODE, lease, 100).await.unwrap().len(), AGENTS);
    for (key, first, _) in &agents {
        assert_eq!(claimed(s.claim_task(key, NODE, lease, 5).await.unwrap()).id, first.id);
    }
    let next = NextClaim::Leased { lease, max_attempts: 5 };

    // Every agent's first task finishes at once, beside the node's heartbeat, and one
    // finish comes from a node that holds no lease (the first agent's): that one writes
    // nothing; the others are each written, each agent's own next task claimed, in fewer
    // transactions than finishes (they waited for the one in flight and went together in the
    // next). The second agent was stopped during its run: its finish still counts.
    set_agent(s, &owner, &agents[1].0.agent_id, AgentStatus::Idle, 0.0).await;
    let before = s.finish_transactions();
    let done = answer("done");
    let finishes = agents.iter().enumerate().map(|(n, (key, first, _))| {
        let node = if n == 0 { "node-b" } else { NODE };
        s.finish_then_claim(key, &first.id, node, &done, 1, None, next)
    });
    let (answers, held) =
        tokio::join!(futures::future::join_all(finishes), s.heartbeat(NODE, lease));
    let transactions = s.finish_transactions() - before;
    assert_eq!(held.unwrap().len(), AGENTS - 1, "the heartbeat renews the active agents");
    for (n, ((key, first, second), answer)) in agents.iter().zip(answers).enumerate() {
        let (written, claim) = answer.unwrap();
        let status = status_of(s, &owner, key, first).await;
        match n {
            0 => {
                assert!(!written && claim.is_none(), "another node's finish: {claim:?}");
                assert_eq!(status, TaskStatus::InProgress);
            }
            1 => {
                assert!(written && claim == Some(Claim::Lost), "a stopped agent: {claim:?}");
                assert_eq!(status, TaskStatus::Complete);
            }
            _ => {
                assert!(written, "{}: the finish was written", key.agent_id);
                let started = claimed(claim.expect("a claim after the finish"));
                assert_eq!((&started.id, started.attempts), (&second.id, 1), "{}", key.agent_id);
                assert_eq!(status, TaskStatus::Complete);
                let stored = s.task(&owner.ws(), &id(&key.agent_id), &first.id).await.unwrap();
                assert_eq!(stored.result.as_deref(), Some("done"));
            }
        }
    }
    assert!(
        (1..AGENTS as u64 - 1).contains(&transactions),
        "{transactions} transactions for {} finishes arriving together",
        AGENTS - 1
    );

    // The second tasks of the agents still running finish at once, the last to arrive with an
    // answer PostgreSQL cannot store (a NUL): the others are written all the same; that one
    // fails alone and writes nothing (SQLite stores it).
    let running = &agents[2..];
    let refused = running.len() - 1;
    let finishes = running.iter().enumerate().map(|(n, (key, _, second))| {
        let text = if n == refused { "nul\u{0}here" } else { "done again" };
        async move { s.finish_then_claim(key, &second.id, NODE, &answer(text), 1, None, next).await }
    });
    let answers = futures::future::join_all(finishes).await;
    let postgres = s.backend() == agentcore::store::Backend::Postgres;
    for (n, ((key, _, second), answer)) in running.iter().zip(answers).enumerate() {
        let status = status_of(s, &owner, key, second).await;
        if n == refused && postgres {
            assert!(answer.is_err(), "a NUL stored on PostgreSQL: {answer:?}");
            assert_eq!(status, TaskStatus::InProgress, "nothing of the refused finish written");
            continue;
        }
        let (written, claim) = answer.unwrap();
        assert!(written && matches!(claim, Some(Claim::Wait(None))), "{}: {claim:?}", key.agent_id);
        assert_eq!(status, TaskStatus::Complete, "{}", key.agent_id);
    }
}
