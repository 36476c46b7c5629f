//! The runtime's storage: node heartbeats, agent and task leases, claims and their fencing,
//! judged by the database's clock.

use super::*;
use agentcore::domain::runtime::{AgentKey, Claim, Outcome};
use agentcore::store::{NextClaim, Store};

const A: &str = "node-a";
const B: &str = "node-b";

fn secs(seconds: u64) -> StdDuration {
    StdDuration::from_secs(seconds)
}

/// An owner with an active agent `r` and tasks of the given priorities.
async fn active(s: &dyn Store, priorities: &[i32]) -> (UserRecord, AgentKey, Vec<Task>) {
    let owner = user("runtime@example.com");
    s.insert_user(&owner).await.unwrap();
    s.insert_agent(
        &owner.ws(),
        &new_agent("r", None),
        agentcore::domain::now(),
        &created(),
        unlimited(),
    )
    .await
    .unwrap();
    s.update_agent(&owner.ws(), &id("r"), &|current| {
        Ok(Some(AgentChange {
            agent: Agent {
                summary: AgentSummary { status: AgentStatus::Active, ..current.summary.clone() },
                ..current.clone()
            },
            activity: vec![],
            post: None,
        }))
    })
    .await
    .unwrap();
    let mut tasks = Vec::new();
    for (n, priority) in priorities.iter().enumerate() {
        let t = task("r", &format!("t{n}"), *priority);
        s.insert_task(&owner.ws(), &t, &NewActivity::new(Action::TaskAdded, "added"))
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
    Outcome::Complete { text: "ok".into(), tool_calls: 0 }
}

backend_tests! { store;
    an_agent_is_leased_to_one_node_and_only_its_holder_claims_tasks,
    tasks_are_claimed_by_priority_one_at_a_time,
    finishing_is_fenced_on_the_task_lease,
    a_task_held_by_a_live_node_blocks_the_next_and_an_expired_one_runs_again,
    a_task_cut_off_max_attempts_times_is_failed_at_its_next_claim,
    releasing_a_node_requeues_its_tasks_and_frees_its_agents,
    releasing_an_agent_requeues_what_the_node_left_in_progress,
    the_database_clock_is_what_the_store_reports,
    a_finish_takes_the_next_claim_in_its_own_transaction,
}

async fn an_agent_is_leased_to_one_node_and_only_its_holder_claims_tasks(store: TestStore) {
    let s = store.store.as_ref();
    let (_, key, _) = active(s, &[0]).await;
    assert_eq!(s.claim_agents(A, secs(30), 10).await.unwrap(), std::slice::from_ref(&key));
    assert!(s.claim_agents(B, secs(30), 10).await.unwrap().is_empty());
    assert_eq!(s.claim_task(&key, B, secs(30), 5).await.unwrap(), Claim::Lost);
    claimed(s.claim_task(&key, A, secs(30), 5).await.unwrap());
    // The heartbeat renews what A holds; after its lease ends B may take the agent over.
    assert_eq!(s.heartbeat(A, secs(30)).await.unwrap(), std::slice::from_ref(&key));
    assert_eq!(s.heartbeat(B, secs(30)).await.unwrap(), []);
    let load = s.runtime_load().await.unwrap();
    assert_eq!((load.active, load.nodes, load.fair_share()), (1, 2, 1));
    store.db.travel(29).await;
    assert!(
        s.claim_agents(B, secs(30), 10).await.unwrap().is_empty(),
        "1 s to go by the database's clock"
    );
    store.db.travel(2).await;
    assert_eq!(s.runtime_load().await.unwrap().nodes, 0, "both heartbeats ran out");
    assert_eq!(s.claim_agents(B, secs(30), 10).await.unwrap(), [key]);
}

async fn tasks_are_claimed_by_priority_one_at_a_time(store: TestStore) {
    let s = store.store.as_ref();
    let (_, key, tasks) = active(s, &[0, 5, 2]).await;
    s.claim_agents(A, secs(30), 10).await.unwrap();
    let first = claimed(s.claim_task(&key, A, secs(30), 5).await.unwrap());
    assert_eq!(
        (first.id.clone(), first.status, first.attempts),
        (tasks[1].id.clone(), TaskStatus::InProgress, 1)
    );
    assert!(s.finish_task(&key, &first.id, A, &done(), 1, None).await.unwrap());
    // The agent's throttle (2.5 s, from the database's time at the finish) holds the next
    // task back, then lets it run.
    match s.claim_task(&key, A, secs(30), 5).await.unwrap() {
        Claim::Wait(Some(wait)) => assert!(
            wait > StdDuration::from_secs(2) && wait <= StdDuration::from_millis(2500),
            "{wait:?}"
        ),
        other => panic!("expected the throttle, got {other:?}"),
    }
    assert!(s.agents_with_work(A).await.unwrap().is_empty(), "throttled: no work yet");
    store.db.travel(3).await;
    assert_eq!(s.agents_with_work(A).await.unwrap(), std::slice::from_ref(&key));
    let second = claimed(s.claim_task(&key, A, secs(30), 5).await.unwrap());
    assert_eq!(second.id, tasks[2].id);
}

async fn finishing_is_fenced_on_the_task_lease(store: TestStore) {
    let s = store.store.as_ref();
    let (owner, key, _) = active(s, &[0]).await;
    s.claim_agents(A, secs(30), 10).await.unwrap();
    let running = claimed(s.claim_task(&key, A, secs(30), 5).await.unwrap());
    // Another node cannot finish it, and cannot start a second task meanwhile.
    assert!(!s.finish_task(&key, &running.id, B, &done(), 1, None).await.unwrap());
    assert_eq!(s.requeue_expired_tasks().await.unwrap(), 0, "its lease is alive");
    // Its lease ran out: the task goes back to the queue and A's late result is dropped.
    store.db.travel(31).await;
    assert_eq!(s.requeue_expired_tasks().await.unwrap(), 1);
    assert!(!s.finish_task(&key, &running.id, A, &done(), 1, None).await.unwrap());
    let task = s.task(&owner.ws(), &id("r"), &running.id).await.unwrap();
    assert_eq!((task.status, task.result), (TaskStatus::Queued, None));
}

async fn a_task_held_by_a_live_node_blocks_the_next_and_an_expired_one_runs_again(
    store: TestStore,
) {
    let s = store.store.as_ref();
    let (_, key, _) = active(s, &[1, 0]).await;
    s.claim_agents(A, secs(2), 10).await.unwrap();
    let running = claimed(s.claim_task(&key, A, secs(10), 5).await.unwrap());
    // A goes quiet: B takes the agent when its lease ends, but A's task still runs.
    store.db.travel(3).await;
    assert_eq!(s.claim_agents(B, secs(30), 10).await.unwrap(), std::slice::from_ref(&key));
    match s.claim_task(&key, B, secs(30), 5).await.unwrap() {
        Claim::Wait(Some(wait)) => assert!(
            wait > StdDuration::from_secs(6) && wait <= StdDuration::from_secs(7),
            "{wait:?}: the rest of A's task lease"
        ),
        other => panic!("expected to wait for A's task, got {other:?}"),
    }
    // Once the task's lease is over too, B runs it again before anything else.
    store.db.travel(8).await;
    let again = claimed(s.claim_task(&key, B, secs(30), 5).await.unwrap());
    assert_eq!((again.id, again.attempts), (running.id, 2));
}

async fn a_task_cut_off_max_attempts_times_is_failed_at_its_next_claim(store: TestStore) {
    let s = store.store.as_ref();
    let (owner, key, tasks) = active(s, &[5, 0]).await;
    s.claim_agents(A, secs(30), 10).await.unwrap();
    for attempt in 1..=2 {
        let running = claimed(s.claim_task(&key, A, secs(30), 2).await.unwrap());
        assert_eq!((running.id.clone(), running.attempts), (tasks[0].id.clone(), attempt));
        // The run is cut off: its lease runs out.
        store.db.travel(31).await;
        s.heartbeat(A, secs(30)).await.unwrap();
    }
    // Two interrupted runs: the third claim fails the task and lets the agent go on.
    assert!(matches!(s.claim_task(&key, A, secs(30), 2).await.unwrap(), Claim::Wait(Some(_))));
    let poisoned = s.task(&owner.ws(), &id("r"), &tasks[0].id).await.unwrap();
    assert_eq!((poisoned.status, poisoned.attempts), (TaskStatus::Failed, 2));
    assert!(
        poisoned.error.as_deref().unwrap().starts_with("Interrupted 2 times"),
        "{:?}",
        poisoned.error
    );
    store.db.travel(3).await;
    let next = claimed(s.claim_task(&key, A, secs(30), 2).await.unwrap());
    assert_eq!(next.id, tasks[1].id);
}

async fn releasing_a_node_requeues_its_tasks_and_frees_its_agents(store: TestStore) {
    let s = store.store.as_ref();
    let (owner, key, _) = active(s, &[0]).await;
    s.claim_agents(A, secs(30), 10).await.unwrap();
    s.heartbeat(A, secs(30)).await.unwrap();
    let running = claimed(s.claim_task(&key, A, secs(30), 5).await.unwrap());
    s.release_node(A).await.unwrap();
    let task = s.task(&owner.ws(), &id("r"), &running.id).await.unwrap();
    assert_eq!((task.status, task.attempts), (TaskStatus::Queued, 1));
    assert_eq!(s.runtime_load().await.unwrap().nodes, 0);
    assert_eq!(s.claim_agents(B, secs(30), 10).await.unwrap(), [key]);
}

/// A worker that leaves (its agent stopped or handed to another node) after a run it could
/// not finish (the database out of reach) gives the task back: the node's heartbeat would
/// otherwise renew its lease for as long as the node lives, and no node would run it.
async fn releasing_an_agent_requeues_what_the_node_left_in_progress(store: TestStore) {
    let s = store.store.as_ref();
    let (owner, key, _) = active(s, &[0]).await;
    s.claim_agents(A, secs(30), 10).await.unwrap();
    let running = claimed(s.claim_task(&key, A, secs(30), 5).await.unwrap());
    s.heartbeat(A, secs(30)).await.unwrap();
    s.release_agent(&key, A).await.unwrap();
    let task = s.task(&owner.ws(), &id("r"), &running.id).await.unwrap();
    assert_eq!((task.status, task.attempts), (TaskStatus::Queued, 1));
    // Another node takes the agent and runs the task at once, not after a lease.
    assert_eq!(s.claim_agents(B, secs(30), 10).await.unwrap(), std::slice::from_ref(&key));
    let again = claimed(s.claim_task(&key, B, secs(30), 5).await.unwrap());
    assert_eq!((again.id, again.attempts), (running.id, 2));
}

async fn the_database_clock_is_what_the_store_reports(store: TestStore) {
    let s = store.store.as_ref();
    let before = agentcore::domain::now() - Duration::seconds(1);
    let database = s.database_time().await.unwrap();
    let after = agentcore::domain::now() + Duration::seconds(1);
    assert!(
        before <= database && database <= after,
        "{database} (the test shares the machine's clock)"
    );
}

async fn status_of(s: &dyn Store, owner: &UserRecord, task: &Task) -> TaskStatus {
    s.task(&owner.ws(), &id("r"), &task.id).await.unwrap().status
}

async fn a_finish_takes_the_next_claim_in_its_own_transaction(store: TestStore) {
    let s = store.store.as_ref();
    let (owner, key, tasks) = active(s, &[3, 2, 1]).await;
    set_agent(s, &owner, "r", AgentStatus::Active, 0.0).await;
    s.claim_agents(A, secs(30), 10).await.unwrap();
    let next = NextClaim::Leased { lease: secs(30), max_attempts: 5 };
    // The finish writes the outcome and takes the next task: started, its attempt counted.
    let first = claimed(s.claim_task(&key, A, secs(30), 5).await.unwrap());
    assert_eq!(first.id, tasks[0].id);
    let (written, claim) =
        s.finish_then_claim(&key, &first.id, A, &done(), 1, None, next).await.unwrap();
    let second = claimed(claim.expect("a claim after the finish"));
    assert!(written);
    assert_eq!(
        (second.id.clone(), second.status, second.attempts),
        (tasks[1].id.clone(), TaskStatus::InProgress, 1)
    );
    assert_eq!(status_of(s, &owner, &first).await, TaskStatus::Complete);
    assert_eq!(status_of(s, &owner, &second).await, TaskStatus::InProgress);

    // Another node's finish is refused and claims nothing.
    let refused = s.finish_then_claim(&key, &second.id, B, &done(), 1, None, next).await.unwrap();
    assert!(matches!(refused, (false, None)), "{refused:?}");
    assert_eq!(status_of(s, &owner, &tasks[2]).await, TaskStatus::Queued);

    // Asked for no claim, the finish takes none.
    let none = NextClaim::None;
    let finished = s.finish_then_claim(&key, &second.id, A, &done(), 1, None, none).await;
    assert!(matches!(finished.unwrap(), (true, None)));
    assert_eq!(status_of(s, &owner, &tasks[2]).await, TaskStatus::Queued);

    // A throttle holds the next task back: the claim says for how long.
    set_agent(s, &owner, "r", AgentStatus::Active, 20.0).await;
    let third = claimed(s.claim_task(&key, A, secs(30), 5).await.unwrap());
    let extra = task("r", "t3", 0);
    s.insert_task(&owner.ws(), &extra, &NewActivity::new(Action::TaskAdded, "added"))
        .await
        .unwrap();
    match s.finish_then_claim(&key, &third.id, A, &done(), 1, None, next).await.unwrap() {
        (true, Some(Claim::Wait(Some(wait)))) => {
            assert!(wait > secs(19) && wait <= secs(20), "{wait:?}: the throttle");
        }
        other => panic!("expected to wait out the throttle, got {other:?}"),
    }
    assert_eq!(status_of(s, &owner, &extra).await, TaskStatus::Queued);

    // An agent stopped while its task ran is no longer the node's to claim for.
    store.db.travel(21).await;
    let last = claimed(s.claim_task(&key, A, secs(30), 5).await.unwrap());
    set_agent(s, &owner, "r", AgentStatus::Idle, 0.0).await;
    let stopped = s.finish_then_claim(&key, &last.id, A, &done(), 1, None, next).await.unwrap();
    assert!(matches!(stopped, (true, Some(Claim::Lost))), "{stopped:?}");
    assert_eq!(status_of(s, &owner, &last).await, TaskStatus::Complete);
}
