//! Webhook deliveries' storage on both backends: two nodes fanning out the same events make
//! each delivery once, and a leased delivery is one node's until it writes its attempt.

use super::*;
use agentcore::domain::event::EventType;
use agentcore::domain::webhook::{AttemptOutcome, WebhookId};
use agentcore::store::{AttemptWrite, NewDelivery, Recorded, WebhookRecord};

use crate::helpers::Backend;

backend_tests! { store;
    two_nodes_fan_out_an_event_once_and_one_holds_each_attempt,
}

fn endpoint(id: &str) -> WebhookRecord {
    let at = agentcore::domain::now();
    WebhookRecord {
        id: id.to_owned(),
        url: "https://93.184.215.14/hooks".into(),
        events: r#"["task.added"]"#.into(),
        description: String::new(),
        enabled: true,
        disabled_reason: None,
        failure_run: 0,
        secret: "sealed".into(),
        previous_secret: None,
        previous_until: None,
        after_seq: 0,
        created_at: at,
        updated_at: at,
        secret_rotated_at: None,
    }
}

async fn two_nodes_fan_out_an_event_once_and_one_holds_each_attempt(store: TestStore) {
    let s = &store.store;
    let owner = user("fanout@example.com");
    s.insert_user(&owner).await.unwrap();
    let hook = "0190b6c2-0000-7000-8000-00000000000a";
    s.insert_webhook(&owner.ws(), &endpoint(hook), 20).await.unwrap();
    // Writes the owner's first events (the agent's creation), after the endpoint's.
    s.insert_agent(
        &owner.ws(),
        &new_agent("a", None),
        agentcore::domain::now(),
        &created(),
        unlimited(),
    )
    .await
    .unwrap();
    // PostgreSQL numbers events after their commit (a node does right after it wrote them).
    let numbered = s.number_events(None).await.unwrap();
    if store.db.backend == Backend::Postgres {
        assert_eq!(numbered, [owner.ws()]);
    }
    let due = s.fanout_due(100).await.unwrap();
    assert_eq!(due, vec![(owner.ws(), 0)]);
    let latest = s.event_bounds(&owner.ws()).await.unwrap().latest;
    let message = NewDelivery {
        event_seq: latest,
        event_type: EventType::TaskAdded,
        message_id: "msg_1".into(),
        body: "{}".into(),
    };
    let other = NewDelivery { message_id: "msg_2".into(), ..message.clone() };
    let ws = owner.ws();
    let (first, second) = tokio::join!(
        s.fan_out(&ws, 0, latest, std::slice::from_ref(&message)),
        s.fan_out(&ws, 0, latest, std::slice::from_ref(&other)),
    );
    assert_eq!([first.unwrap(), second.unwrap()].iter().filter(|moved| **moved).count(), 1);
    // A late node with the same event under a cursor it read before: nothing.
    assert!(!s.fan_out(&owner.ws(), 0, latest, &[message]).await.unwrap());
    assert!(s.fanout_due(100).await.unwrap().is_empty());
    let id = WebhookId::parse(hook).unwrap();
    let made = s.deliveries(&owner.ws(), &id, None, 10).await.unwrap();
    assert_eq!(made.len(), 1, "one delivery for the event");

    let lease = StdDuration::from_secs(30);
    let claimed = s.claim_deliveries("node-a", lease, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(s.claim_deliveries("node-b", lease, 10).await.unwrap().is_empty(), "leased");
    let outcome = AttemptOutcome {
        status: Some(500),
        error: None,
        duration_ms: 3,
        response: Some("down".into()),
    };
    let write = AttemptWrite {
        outcome: &outcome,
        retry_in: Some(StdDuration::ZERO),
        disable_after: 0,
        reason: "",
    };
    let theirs = s.record_attempt(&claimed[0], "node-b", &write).await.unwrap();
    assert_eq!(theirs, Recorded::LeaseLost, "only the holder writes the attempt");
    let ours = s.record_attempt(&claimed[0], "node-a", &write).await.unwrap();
    assert_eq!(ours, Recorded::Written { disabled: false });
    let again = s.claim_deliveries("node-b", lease, 10).await.unwrap();
    assert_eq!((again.len(), again[0].attempts), (1, 1), "released for its next attempt");
    let listed = s.deliveries(&owner.ws(), &id, None, 10).await.unwrap();
    assert_eq!(listed[0].responses.len(), 1);
    assert_eq!(listed[0].responses[0].status, Some(500));
}
