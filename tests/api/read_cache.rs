//! The per-node read cache (`http.read_cache`, on by default): the agent list and view may be
//! answered from what a node read a moment ago, but a client reads its own writes on the node
//! it wrote through, callers never share answers, and what another node or process writes is
//! seen within a second (docs/api.md, "Conventions").

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use agentcore::domain::workspace::WorkspaceId;
use agentcore::stripes::stripe;
use reqwest::Method;

use crate::helpers::{Backend, TestApp, User, backend_tests, eventually};
use crate::metrics::scrape;

backend_tests! { app;
    a_kept_answer_is_served_while_young_until_a_write_goes_through_the_node,
    a_client_reads_its_own_writes_on_the_node_it_wrote_through,
    callers_never_share_answers,
    another_workspaces_writes_and_events_leave_kept_answers,
    what_another_node_writes_is_seen_within_a_second,
}

/// The agent's name in its view and in the list (where it is the first agent).
async fn names(app: &TestApp, user: &User, agent: &str) -> (Value, Value) {
    let shown = app.get(&format!("/api/agents/{agent}"), user).await.assert_status(200).clone();
    let listed = app.get("/api/agents", user).await.assert_status(200).clone();
    (shown["name"].clone(), listed["agents"][0]["name"].clone())
}

/// Until the events written so far are numbered. PostgreSQL numbers them after their commit,
/// and the numbering rings the owner's generation of the cache: a ring that came after a
/// round's first read would end its kept answers for a reason the round did not make.
async fn events_numbered(app: &TestApp) {
    if app.db.backend == Backend::Postgres {
        eventually(Duration::from_secs(10), "the events written so far are numbered", || async {
            app.db.count("SELECT COUNT(*) FROM pending_events", &[]).await == 0
        })
        .await;
    }
}

/// The cache's age bound (agentd's `read_cache::MAX_AGE`).
const MAX_AGE: Duration = Duration::from_millis(250);

/// A rename made in the database behind the node's back (no request, no event) is not seen
/// while the kept answers are young; any request that may write, even one refused, ends them.
async fn a_kept_answer_is_served_while_young_until_a_write_goes_through_the_node(app: TestApp) {
    let user = app.register("kept@example.com").await;
    app.create_agent(&user, "first").await;
    events_numbered(&app).await;
    let mut young = 0;
    let refused_write = || async {
        app.post("/api/agents", &user, json!({})).await.assert_status(400);
    };
    for round in 0..20 {
        refused_write().await;
        // The answers are read now and kept, each with the time its read began.
        let began = Instant::now();
        let (before, _) = names(&app, &user, "first").await;
        let name = format!("Behind its back {round}");
        app.db.execute("UPDATE agents SET name = $1 WHERE id = 'first'", &[&name]).await;
        let kept = names(&app, &user, "first").await;
        refused_write().await;
        let after = names(&app, &user, "first").await;
        // Whatever the timing: once a request that may write was answered, reads are fresh.
        assert_eq!(after, (json!(name), json!(name)), "round {round}");
        // Every read above began and ended within MAX_AGE of the first: the kept answers
        // were young, so they were served.
        if began.elapsed() < MAX_AGE {
            young += 1;
            assert_eq!(kept, (before.clone(), before), "round {round}: the kept answers");
        }
    }
    assert!(young > 0, "no round took less than {MAX_AGE:?}");
}

async fn a_client_reads_its_own_writes_on_the_node_it_wrote_through(app: TestApp) {
    let user = app.register("own@example.com").await;
    app.create_agent(&user, "first").await;
    for round in 0..10 {
        // Read (and keep) the answers, then change what they say through the node.
        let (before, _) = names(&app, &user, "first").await;
        let name = format!("Name {round}");
        assert_ne!(before, name);
        app.patch("/api/agents/first", &user, json!({"name": name})).await.assert_status(200);
        assert_eq!(names(&app, &user, "first").await, (json!(name), json!(name)), "round {round}");
    }

    // A new agent and a removed one, as soon as each write is answered.
    app.create_agent(&user, "second").await;
    let listed = app.get("/api/agents", &user).await.assert_status(200).clone();
    assert_eq!(listed["agents"].as_array().unwrap().len(), 2, "{listed}");
    app.delete("/api/agents/second", &user).await.assert_status(200);
    let listed = app.get("/api/agents", &user).await.assert_status(200).clone();
    assert_eq!(listed["agents"].as_array().unwrap().len(), 1, "{listed}");
    app.get("/api/agents/second", &user).await.assert_error(404, "agent_not_found");

    // An answer from the cache is the same JSON, with its tag, and a 304 for that tag.
    let get = |tag: Option<String>| {
        let mut request =
            app.client.get(format!("{}/api/agents/first", app.address)).bearer_auth(&user.token);
        if let Some(tag) = tag {
            request = request.header("if-none-match", tag);
        }
        request.send()
    };
    let first = get(None).await.unwrap();
    let tag = first.headers()["etag"].to_str().unwrap().to_owned();
    let first = first.text().await.unwrap();
    let again = get(None).await.unwrap();
    assert_eq!(again.headers()["etag"].to_str().unwrap(), tag);
    assert_eq!(again.headers()["content-type"], "application/json");
    assert_eq!(again.headers()["cache-control"], "private, no-cache");
    assert_eq!(again.text().await.unwrap(), first);
    assert_eq!(get(Some(tag)).await.unwrap().status(), 304);
}

async fn callers_never_share_answers(app: TestApp) {
    let ada = app.register("ada@example.com").await;
    let bob = app.register("bob@example.com").await;
    // The same agent id, each their own.
    for (user, name) in [(&ada, "Ada's"), (&bob, "Bob's")] {
        app.post(
            "/api/agents",
            user,
            json!({"id": "same", "name": name, "role_prompt": "Help.", "channel": "general"}),
        )
        .await
        .assert_status(201);
    }
    app.create_agent(&ada, "only-ada").await;
    for _ in 0..5 {
        assert_eq!(names(&app, &ada, "same").await, (json!("Ada's"), json!("Ada's")));
        assert_eq!(names(&app, &bob, "same").await, (json!("Bob's"), json!("Bob's")));
        let listed = app.get("/api/agents", &bob).await.assert_status(200).clone();
        assert_eq!(listed["agents"].as_array().unwrap().len(), 1, "{listed}");
        app.get("/api/agents/only-ada", &bob).await.assert_error(404, "agent_not_found");
    }
}

/// Generations are counted per workspace: another tenant's requests and its agents' events
/// leave this workspace's kept answers served (workspaces sharing a counter would not, so the
/// other tenant acts in one that does not share this one's), and the hits are counted.
async fn another_workspaces_writes_and_events_leave_kept_answers(app: TestApp) {
    let user = app.register("tenant@example.com").await;
    app.create_agent(&user, "first").await;
    let other = app.register("neighbour@example.com").await;
    let stripe_of = |id: &str| stripe(&WorkspaceId::parse(id).unwrap());
    let mine = stripe_of(&user.id);
    let mut theirs = other.id.clone();
    for n in 0.. {
        if stripe_of(&theirs) != mine {
            break;
        }
        let created =
            app.post("/api/workspaces", &other, json!({"name": format!("Team {n}")})).await;
        theirs = created.assert_status(201)["id"].as_str().unwrap().to_owned();
    }
    let agent = json!({"id": "next-door", "name": "Next door", "role_prompt": "Help.", "channel": "general"});
    app.request_in(&theirs, Method::POST, "/api/agents", &other.token, Some(agent))
        .await
        .assert_status(201);
    let hits =
        || async { scrape(&app, None).await["agentd_read_cache_answers_total{result=\"hit\"}"] };
    let hits_before = hits().await;
    let mut young = 0;
    for round in 0..20 {
        // This workspace's own write ends what the round before kept.
        app.post("/api/agents", &user, json!({})).await.assert_status(400);
        let began = Instant::now();
        let (before, _) = names(&app, &user, "first").await;
        let name = format!("Behind its back {round}");
        app.db.execute("UPDATE agents SET name = $1 WHERE id = 'first'", &[&name]).await;
        // The neighbour starts or stops its agent (a write and an activity entry's event),
        // in its own workspace.
        let (action, status) = if round % 2 == 0 { ("start", "active") } else { ("stop", "idle") };
        let path = format!("/api/agents/next-door/{action}");
        let view =
            || app.request_in(&theirs, Method::GET, "/api/agents/next-door", &other.token, None);
        view().await.assert_status(200);
        app.request_in(&theirs, Method::POST, &path, &other.token, None).await.assert_status(200);
        let kept = names(&app, &user, "first").await;
        // The neighbour reads its own write in its workspace at once.
        assert_eq!(view().await.assert_status(200)["status"], status, "round {round}");
        if began.elapsed() < MAX_AGE {
            young += 1;
            assert_eq!(kept, (before.clone(), before), "round {round}: the kept answers");
        }
        // Its own write still ends them.
        app.post("/api/agents", &user, json!({})).await.assert_status(400);
        assert_eq!(names(&app, &user, "first").await, (json!(name), json!(name)), "round {round}");
    }
    assert!(young > 0, "no round took less than {MAX_AGE:?}");
    assert!(hits().await >= hits_before + 2.0 * f64::from(young), "two hits a young round");
}

/// A write through another node (on SQLite: another process's pool on the same file) is not
/// announced to this one: a read that begins a second after the write's answer shows it.
async fn what_another_node_writes_is_seen_within_a_second(app: TestApp) {
    let user = app.register("nodes@example.com").await;
    app.create_agent(&user, "first").await;
    let other = app.another_node().await;
    let client = reqwest::Client::new();
    for round in 0..3 {
        let (before, _) = names(&app, &user, "first").await;
        let name = format!("Elsewhere {round}");
        let renamed = client
            .patch(format!("{}/api/agents/first", other.address))
            .bearer_auth(&user.token)
            .json(&json!({"name": name}))
            .send()
            .await
            .unwrap();
        assert_eq!(renamed.status(), 200);
        let written = Instant::now();
        loop {
            let began = Instant::now();
            let (shown, listed) = names(&app, &user, "first").await;
            if shown == json!(name) && listed == json!(name) {
                break;
            }
            assert!(shown == json!(name) || shown == before, "{shown}");
            assert!(
                began.duration_since(written) < Duration::from_secs(1),
                "a read begun {:?} after the write still says {shown} and {listed}",
                began.duration_since(written),
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    other.close().await;
}
