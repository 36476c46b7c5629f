//! Adding tasks concurrently: on SQLite the adds that wait together are committed as one
//! transaction (`store/script.rs`); each caller still gets its own answer, one caller's failure
//! is not the others', and creation times stay in commit order within each agent.

use super::*;
use agentcore::domain::task::TaskId;
use agentcore::store::Store;

backend_tests! { store;
    concurrent_adds_each_get_their_own_answer,
    an_add_dated_at_or_before_the_latest_task_is_stored_just_after_it,
}

async fn concurrent_adds_each_get_their_own_answer(store: TestStore) {
    let s: &dyn Store = store.store.as_ref();
    let owner = user("ada@example.com");
    s.insert_user(&owner).await.unwrap();
    for name in ["one", "two", "three"] {
        s.insert_agent(
            &owner.ws(),
            &new_agent(name, None),
            agentcore::domain::now(),
            &created(),
            unlimited(),
        )
        .await
        .unwrap();
    }
    let first = task("one", "first", 0);
    s.insert_task(&owner.ws(), &first, &NewActivity::new(Action::TaskAdded, "added"))
        .await
        .unwrap();

    // 120 adds at once round three agents, every seventh to an agent that does not exist, and
    // one reusing the first task's id (a constraint the database refuses).
    let mut adds: Vec<Task> = (0..120)
        .map(|i| {
            let agent = if i % 7 == 3 { "nobody" } else { ["one", "two", "three"][i % 3] };
            task(agent, &format!("task {i}"), 0)
        })
        .collect();
    adds[60] = Task { id: first.id.clone(), ..task("two", "duplicate id", 0) };
    let entries: Vec<NewActivity> = adds
        .iter()
        .map(|t| NewActivity::for_task(Action::TaskAdded, t.id.as_str(), "added"))
        .collect();
    let workspace = owner.ws();
    let answers = futures::future::join_all(
        adds.iter().zip(&entries).map(|(t, entry)| s.insert_task(&workspace, t, entry)),
    )
    .await;

    let mut added = 0;
    for (i, (t, answer)) in adds.iter().zip(&answers).enumerate() {
        match (i, t.agent_id.as_str(), answer) {
            (60, _, Err(error)) => assert_ne!(error.code(), "agent_not_found", "{error}"),
            (60, _, Ok(_)) => panic!("a second task with the first one's id was added"),
            (_, "nobody", Err(Error::NotFound { resource: Resource::Agent, .. })) => {}
            (_, "nobody", other) => panic!("an add to a missing agent answered {other:?}"),
            (_, _, Ok(answer)) => {
                assert_eq!(answer.agent_status, AgentStatus::Idle);
                added += 1;
            }
            (_, _, Err(error)) => panic!("add {i} failed beside the others: {error}"),
        }
    }
    assert_eq!(added, 120 - 17 - 1);

    let mut stored = 0;
    for name in ["one", "two", "three"] {
        let tasks = s.tasks(&owner.ws(), &id(name), None).await.unwrap();
        stored += tasks.len();
        // Each answer's time is the one stored, and no two tasks of an agent share one.
        for t in &tasks {
            let index = adds.iter().position(|a| a.id == t.id);
            if let Some(Ok(answer)) = index.map(|i| &answers[i]) {
                assert_eq!(answer.created_at, t.created_at, "task {}", t.title);
            }
        }
        let mut times: Vec<_> = tasks.iter().map(|t| t.created_at).collect();
        times.sort();
        times.dedup();
        assert_eq!(times.len(), tasks.len(), "two tasks of {name} share a creation time");
    }
    assert_eq!(stored, added + 1);
    // Each added task has its activity entry (the agents' creation has one each); the refused
    // adds left none.
    let mut entries = 0;
    for name in ["one", "two", "three"] {
        let query = ActivityQuery { limit: 200, before: None, after: None };
        entries += s.activity(&owner.ws(), &id(name), &query).await.unwrap().len();
    }
    assert_eq!(entries, 3 + added + 1);
    let duplicate = TaskId::parse(first.id.as_str()).unwrap();
    assert_eq!(s.task(&owner.ws(), &id("one"), &duplicate).await.unwrap().title, "first");
}

/// Each backend decides a task's creation time in its own SQL (SQLite's script, PostgreSQL's
/// `add_task`): for a node's time at, before and after the agent's latest task, to the
/// microsecond about a millisecond's edges, the time stored, answered and given to the task's
/// entry is the domain's `creation_time`.
async fn an_add_dated_at_or_before_the_latest_task_is_stored_just_after_it(store: TestStore) {
    use agentcore::domain::task::creation_time;
    let s: &dyn Store = store.store.as_ref();
    let owner = user("ada@example.com");
    s.insert_user(&owner).await.unwrap();
    let base: chrono::DateTime<Utc> = "2026-11-27T08:00:00Z".parse().unwrap();
    let micros = [0, 1, 499, 500, 501, 999, 250_000, 999_500];
    let mut cases = 0;
    for (n, (latest, requested)) in
        micros.iter().flat_map(|l| micros.iter().map(move |r| (*l, *r))).enumerate()
    {
        let agent = format!("agent-{n}");
        // Created the day before, so its entry does not date the tasks' entries.
        let day_before = base - Duration::days(1);
        s.insert_agent(&owner.ws(), &new_agent(&agent, None), day_before, &created(), unlimited())
            .await
            .unwrap();
        let latest = base + Duration::microseconds(latest);
        let requested = base + Duration::microseconds(requested);
        let first = Task { created_at: latest, ..task(&agent, "first", 0) };
        let added = NewActivity::new(Action::TaskAdded, "added");
        assert_eq!(s.insert_task(&owner.ws(), &first, &added).await.unwrap().created_at, latest);
        let second = Task { created_at: requested, ..task(&agent, "second", 0) };
        let answer = s.insert_task(&owner.ws(), &second, &added).await.unwrap();
        let expected = creation_time(requested, Some(latest));
        assert_eq!(answer.created_at, expected, "latest {latest}, requested {requested}");
        assert!(expected > latest || requested > latest);
        let stored = s.task(&owner.ws(), &id(&agent), &second.id).await.unwrap();
        assert_eq!(stored.created_at, expected);
        let query = ActivityQuery { limit: 1, before: None, after: None };
        let entry = s.activity(&owner.ws(), &id(&agent), &query).await.unwrap();
        assert_eq!(entry[0].timestamp, expected, "the entry is dated as its task");
        cases += 1;
    }
    assert_eq!(cases, 64);
}
