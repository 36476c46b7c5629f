//! The shared rate limits' store: one count and one fair queue per scope, whoever looks, and
//! the provider's block for every caller.

use super::*;
use agentcore::domain::ratelimit::{RateLimit, Why};
use agentcore::store::{Slot, SlotAsk};

backend_tests! { store;
    a_freed_slot_goes_to_the_agent_waiting_longest_not_to_whoever_looks_first,
    an_agent_just_served_waits_behind_one_not_yet_served_though_it_queued_first,
    a_wait_that_lapsed_within_a_window_keeps_its_place,
    the_provider_s_block_holds_every_caller_of_its_scope_until_it_ends,
}

fn ask<'a>(agent: &'a str, scopes: &'a [(String, RateLimit)], window: StdDuration) -> SlotAsk<'a> {
    SlotAsk { owner: "workspace", agent, scopes, tokens: 100, window }
}

async fn a_freed_slot_goes_to_the_agent_waiting_longest_not_to_whoever_looks_first(s: TestStore) {
    let scopes = [("openai".to_owned(), RateLimit { requests: Some(1), tokens: None })];
    let window = StdDuration::from_millis(500);
    let store = &s.store;
    assert!(matches!(store.take_slot(ask("a", &scopes, window)).await.unwrap(), Slot::Granted(_)));
    let b = store.take_slot(ask("b", &scopes, window)).await.unwrap();
    assert!(
        matches!(&b, Slot::Wait { why: Why::Requests { grant: 0 }, wait, .. }
            if *wait <= window + window / 50),
        "{b:?}"
    );
    let c = store.take_slot(ask("c", &scopes, window)).await.unwrap();
    assert!(matches!(c, Slot::Wait { .. }), "{c:?}");
    // Once a's slot is free, c (which looks first, every time) still waits: b came before it.
    crate::helpers::eventually(StdDuration::from_secs(10), "b gets the freed slot", || async {
        let c = store.take_slot(ask("c", &scopes, window)).await.unwrap();
        assert!(matches!(c, Slot::Wait { .. }), "c went before b: {c:?}");
        matches!(store.take_slot(ask("b", &scopes, window)).await.unwrap(), Slot::Granted(_))
    })
    .await;
    let grants = s.db.count("SELECT COUNT(*) FROM rate_grants WHERE agent_id = $1", &["b"]).await;
    assert_eq!(grants, 1);
    let waiting = "SELECT COUNT(*) FROM rate_tickets WHERE back_by IS NOT NULL";
    assert_eq!(s.db.count(waiting, &[]).await, 1, "only c still waits");
}

/// The start of a run of many agents: the first served asks again before the others have
/// asked at all. Its ticket is the oldest, but the slot goes to the one not yet served.
async fn an_agent_just_served_waits_behind_one_not_yet_served_though_it_queued_first(s: TestStore) {
    let scopes = [("openai".to_owned(), RateLimit { requests: Some(1), tokens: None })];
    let window = StdDuration::from_millis(500);
    let store = &s.store;
    assert!(matches!(store.take_slot(ask("a", &scopes, window)).await.unwrap(), Slot::Granted(_)));
    let again = store.take_slot(ask("a", &scopes, window)).await.unwrap();
    assert!(matches!(again, Slot::Wait { .. }), "{again:?}");
    let b = store.take_slot(ask("b", &scopes, window)).await.unwrap();
    assert!(matches!(b, Slot::Wait { .. }), "{b:?}");
    crate::helpers::eventually(StdDuration::from_secs(10), "b gets the freed slot", || async {
        let a = store.take_slot(ask("a", &scopes, window)).await.unwrap();
        assert!(matches!(a, Slot::Wait { .. }), "a was served twice before b once: {a:?}");
        matches!(store.take_slot(ask("b", &scopes, window)).await.unwrap(), Slot::Granted(_))
    })
    .await;
    // Then a, which has waited since before b was served, is next.
    crate::helpers::eventually(StdDuration::from_secs(10), "a gets the next slot", || async {
        let b = store.take_slot(ask("b", &scopes, window)).await.unwrap();
        assert!(matches!(b, Slot::Wait { .. }), "b was served twice before a's second: {b:?}");
        matches!(store.take_slot(ask("a", &scopes, window)).await.unwrap(), Slot::Granted(_))
    })
    .await;
}

async fn the_provider_s_block_holds_every_caller_of_its_scope_until_it_ends(s: TestStore) {
    let unlimited = RateLimit::default();
    let openai = [("openai".to_owned(), unlimited)];
    let anthropic = [("anthropic".to_owned(), unlimited)];
    let window = StdDuration::from_secs(60);
    let store = &s.store;
    store.block_scopes(&["openai".to_owned()], StdDuration::from_secs(30)).await.unwrap();
    store.block_scopes(&["openai".to_owned()], StdDuration::from_secs(5)).await.unwrap();
    for agent in ["a", "b"] {
        let slot = store.take_slot(ask(agent, &openai, window)).await.unwrap();
        let Slot::Wait { wait, why: Why::Provider(_), scope } = slot else {
            panic!("{agent} was not held back: {slot:?}");
        };
        assert_eq!(scope, "openai");
        assert!(wait > StdDuration::from_secs(25), "the longer block stays: {wait:?}");
    }
    let other = store.take_slot(ask("a", &anthropic, window)).await.unwrap();
    assert!(matches!(other, Slot::Granted(_)), "another provider is not held back: {other:?}");
    store.block_scopes(&["anthropic".to_owned()], StdDuration::ZERO).await.unwrap();
    let after = store.take_slot(ask("b", &anthropic, window)).await.unwrap();
    assert!(matches!(after, Slot::Granted(_)), "a block that ended holds nobody: {after:?}");
}

/// A waiter that looks again a little after its ticket's grace (it waited for its node's call
/// permit, say) keeps its place before an agent that queued meanwhile.
async fn a_wait_that_lapsed_within_a_window_keeps_its_place(s: TestStore) {
    let scopes = [("openai".to_owned(), RateLimit { requests: Some(1), tokens: None })];
    let window = StdDuration::from_secs(1);
    let store = &s.store;
    let take = |agent| store.take_slot(ask(agent, &scopes, window));
    assert!(matches!(take("x").await.unwrap(), Slot::Granted(_)));
    let a = take("a").await.unwrap();
    assert!(matches!(a, Slot::Wait { .. }), "{a:?}");
    // The database's clock, as the store's: a ticket lapses by it.
    let now = match s.db.backend {
        crate::helpers::Backend::Sqlite => "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')",
        crate::helpers::Backend::Postgres => "clock_timestamp()",
    };
    let lapsed =
        format!("SELECT COUNT(*) FROM rate_tickets WHERE agent_id = 'a' AND back_by < {now}");
    crate::helpers::eventually(StdDuration::from_secs(10), "a's ticket lapses", || async {
        s.db.count(&lapsed, &[]).await == 1
    })
    .await;
    // Meanwhile x's slot came free and x takes it again; b queues behind it.
    assert!(matches!(take("x").await.unwrap(), Slot::Granted(_)), "a's lapsed ticket holds none");
    let b = take("b").await.unwrap();
    assert!(matches!(b, Slot::Wait { .. }), "{b:?}");
    // a looks again: it had queued before b, and its wait lapsed less than a window ago.
    crate::helpers::eventually(StdDuration::from_secs(10), "a gets the freed slot", || async {
        let b = take("b").await.unwrap();
        assert!(matches!(b, Slot::Wait { .. }), "b went before a: {b:?}");
        matches!(take("a").await.unwrap(), Slot::Granted(_))
    })
    .await;
}
