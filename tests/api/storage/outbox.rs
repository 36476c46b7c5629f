//! The outbox's storage: lanes, leases on posts, delivery records and pruning, on both
//! backends.

use super::*;
use agentcore::discord::MessageBody;
use agentcore::domain::chat::{Connection, ConnectionKind, Mapping, NewPost, OutboxLane};
use agentcore::store::{ConnectionRecord, Finished, Prunable};

/// An owner with agent `a` mapped to channel 71 of guild 7, and `count` status posts queued.
fn lane(owner: &WorkspaceId) -> OutboxLane {
    OutboxLane { owner_id: owner.as_str().to_owned(), channel_id: "71".into() }
}

async fn queued(s: &std::sync::Arc<dyn agentcore::store::Store>, count: usize) -> WorkspaceId {
    queued_for(s, "outbox@example.com", count).await
}

/// [`queued`] for the user `email`.
async fn queued_for(
    s: &std::sync::Arc<dyn agentcore::store::Store>,
    email: &str,
    count: usize,
) -> WorkspaceId {
    let owner = user(email);
    s.insert_user(&owner).await.unwrap();
    s.insert_agent(
        &owner.ws(),
        &new_agent("a", None),
        agentcore::domain::now(),
        &created(),
        unlimited(),
    )
    .await
    .unwrap();
    let connection = Connection {
        id: format!("c1-{email}"),
        guild_id: "7".into(),
        guild_name: "G".into(),
        kind: ConnectionKind::Oauth,
        connected_at: agentcore::domain::now(),
        channel_count: 1,
        application_id: None,
        public_key: None,
        allowed_role_ids: Vec::new(),
    };
    let owner_id = owner.id.as_str().to_owned();
    s.upsert_connection(
        &owner.ws(),
        &ConnectionRecord { connection, sealed_token: None, owner_id },
    )
    .await
    .unwrap();
    let mapping = Mapping {
        id: format!("m1-{email}"),
        agent_id: id("a"),
        guild_id: "7".into(),
        channel_id: "71".into(),
        channel_name: "c".into(),
        created_at: agentcore::domain::now(),
    };
    s.upsert_mapping(&owner.ws(), &mapping).await.unwrap();
    for i in 0..count {
        s.update_agent(&owner.ws(), &id("a"), &|current| {
            Ok(Some(AgentChange {
                agent: Agent {
                    summary: AgentSummary { name: format!("n{i}"), ..current.summary.clone() },
                    ..current.clone()
                },
                activity: vec![],
                post: Some(NewPost::new(MessageBody::new(Some(format!("post {i}")), None))),
            }))
        })
        .await
        .unwrap();
    }
    owner.ws()
}

backend_tests! { store;
    every_lane_with_a_waiting_post_is_read_once_across_owners_and_channels,
    only_the_oldest_post_of_a_channel_can_be_claimed_and_only_once,
    a_post_lease_is_judged_and_renewed_by_the_database_clock,
    a_dropped_post_logs_for_its_agent_and_removing_the_connection_clears_the_channel,
}

/// The lanes are what waits, owner by owner and channel by channel (PostgreSQL steps through
/// its index from one lane to the next): two owners, several channels each, a channel whose
/// posts were all delivered, and lanes of many posts.
async fn every_lane_with_a_waiting_post_is_read_once_across_owners_and_channels(store: TestStore) {
    let s = &store.store;
    let first = queued_for(s, "first@example.com", 3).await;
    let second = queued_for(s, "second@example.com", 1).await;
    // More lanes beside each owner's channel 71, made from a post of that owner.
    let copy = "INSERT INTO outbox (owner_id, agent_id, guild_id, channel_id, nonce, payload, \
        attempts, next_attempt_at, created_at, delivered_at) \
        SELECT owner_id, agent_id, guild_id, $2, $3, payload, 0, next_attempt_at, created_at, \
        CASE WHEN $4 = 'delivered' THEN created_at END \
        FROM outbox WHERE owner_id = $1 AND channel_id = '71' LIMIT 1";
    let lanes = [
        (&first, "72", "waiting"),
        (&first, "72", "waiting"),
        (&first, "73", "waiting"),
        (&first, "74", "delivered"),
        (&second, "70", "waiting"),
        (&second, "75", "delivered"),
        (&second, "75", "delivered"),
    ];
    for (n, (owner, channel, state)) in lanes.iter().enumerate() {
        let nonce = format!("extra-{n}");
        store.db.execute(copy, &[owner.as_str(), channel, &nonce, state]).await;
    }
    let mut read: Vec<(String, String)> =
        s.outbox_lanes().await.unwrap().into_iter().map(|l| (l.owner_id, l.channel_id)).collect();
    read.sort();
    let mut expected: Vec<(String, String)> =
        [(&first, "71"), (&first, "72"), (&first, "73"), (&second, "70"), (&second, "71")]
            .iter()
            .map(|(owner, channel)| (owner.as_str().to_owned(), (*channel).to_owned()))
            .collect();
    expected.sort();
    assert_eq!(read, expected);
}

async fn only_the_oldest_post_of_a_channel_can_be_claimed_and_only_once(store: TestStore) {
    let s = &store.store;
    let owner = queued(s, 2).await;
    let lane = &lane(&owner);
    assert_eq!(s.outbox_lanes().await.unwrap(), std::slice::from_ref(lane));
    let lease = StdDuration::from_secs(30);
    let first = s.claim_post(lane, "node-a", lease).await.unwrap().unwrap();
    assert_eq!(first.body.content.as_deref(), Some("post 0"));
    assert!(s.claim_post(lane, "node-b", lease).await.unwrap().is_none(), "the head is leased");
    let due = s.next_post_due(lane).await.unwrap().unwrap();
    assert!(due > StdDuration::from_secs(28) && due <= lease, "{due:?}: the lease's end");

    let retry = StdDuration::from_secs(5);
    s.retry_post(first.id, "node-b", retry, "not the holder").await.unwrap();
    assert!(
        s.next_post_due(lane).await.unwrap().unwrap() > StdDuration::from_secs(28),
        "only the holder can release"
    );
    s.retry_post(first.id, "node-a", retry, "500").await.unwrap();
    assert!(
        s.claim_post(lane, "node-b", lease).await.unwrap().is_none(),
        "the head waits for its retry"
    );
    let due = s.next_post_due(lane).await.unwrap().unwrap();
    assert!(due > StdDuration::from_secs(3) && due <= retry, "{due:?}: the retry's time");
    store.db.travel(6).await;
    assert_eq!(s.next_post_due(lane).await.unwrap(), Some(StdDuration::ZERO));
    let again = s.claim_post(lane, "node-b", lease).await.unwrap().unwrap();
    assert_eq!((again.id, again.attempts), (first.id, 1));

    let delivered = s.finish_post(again.id, "node-b", "999").await.unwrap();
    assert_eq!(delivered, Finished::Delivered);
    let second = s.claim_post(lane, "node-a", lease).await.unwrap().unwrap();
    assert_eq!(second.body.content.as_deref(), Some("post 1"));
    assert_eq!(
        store.db.count("SELECT COUNT(*) FROM outbox WHERE message_id = '999'", &[]).await,
        1
    );

    assert_eq!(
        s.finish_post(second.id, "node-b", "1000").await.unwrap(),
        Finished::NotHeld,
        "only the holder records delivery"
    );
    // Rewritten since it was queued (an approval decided meanwhile): the delivery is
    // recorded and answers what the post says now, for an edit.
    let mut now = second.body.clone();
    now.content = Some("decided".to_owned());
    let rewritten = serde_json::to_string(&now).unwrap();
    let rewrite =
        format!("UPDATE outbox SET payload = $1, rewritten = TRUE WHERE id = {}", second.id);
    store.db.execute(&rewrite, &[&rewritten]).await;
    let recorded = s.finish_post(second.id, "node-a", "1000").await.unwrap();
    assert_eq!(recorded, Finished::Rewritten(now));
    assert!(s.outbox_lanes().await.unwrap().is_empty());
    assert_eq!(s.next_post_due(lane).await.unwrap(), None);
    // Pruned a bounded batch at a time.
    let later = agentcore::domain::now() + Duration::seconds(1);
    for expected in [1, 1, 0] {
        assert_eq!(s.prune(Prunable::DeliveredPosts, later, 1).await.unwrap(), expected);
    }
}

async fn a_post_lease_is_judged_and_renewed_by_the_database_clock(store: TestStore) {
    let s = &store.store;
    let owner = queued(s, 1).await;
    let lane = &lane(&owner);
    let post = s.claim_post(lane, "node-a", StdDuration::from_secs(10)).await.unwrap().unwrap();
    store.db.travel(8).await;
    // Still 2 s to go by the database's clock: nobody takes it over.
    assert!(s.claim_post(lane, "node-b", StdDuration::from_secs(10)).await.unwrap().is_none());
    assert!(s.renew_post_lease(post.id, "node-a", StdDuration::from_secs(10)).await.unwrap());
    assert!(
        !s.renew_post_lease(post.id, "node-b", StdDuration::from_secs(10)).await.unwrap(),
        "only the holder renews"
    );
    store.db.travel(8).await;
    assert!(
        s.claim_post(lane, "node-b", StdDuration::from_secs(10)).await.unwrap().is_none(),
        "renewed: 2 s to go again"
    );
    store.db.travel(3).await;
    let taken = s.claim_post(lane, "node-b", StdDuration::from_secs(10)).await.unwrap().unwrap();
    assert_eq!(taken.id, post.id, "past its lease, another node takes it");
}

async fn a_dropped_post_logs_for_its_agent_and_removing_the_connection_clears_the_channel(
    store: TestStore,
) {
    let s = &store.store;
    let owner = queued(s, 2).await;
    let post = s.claim_post(&lane(&owner), "n", StdDuration::from_secs(30)).await.unwrap().unwrap();
    s.drop_post(&post, "n", &NewActivity::new(Action::PostFailed, "gone")).await.unwrap();
    let log = s.activity(&owner, &id("a"), &ActivityQuery::default()).await.unwrap();
    assert_eq!(log[0].action, Action::PostFailed);
    assert_eq!(store.db.count("SELECT COUNT(*) FROM outbox", &[]).await, 1);
    s.delete_connection(&owner, "7").await.unwrap();
    assert_eq!(store.db.count("SELECT COUNT(*) FROM outbox", &[]).await, 0);
    assert_eq!(store.db.count("SELECT COUNT(*) FROM chat_mappings", &[]).await, 0);
}
