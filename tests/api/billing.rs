//! Plans: the agent limit of each plan, enforced where agents are created, `GET /api/billing`,
//! and Stripe's webhook moving users between plans.

use agentcore::stripe::sign;
use serde_json::json;

use crate::helpers::{TestApp, backend_tests};
use crate::stripe_events::{
    OLD_SECRET, PRICE_PRO, SECRET, Sub, checkout, fixture_path, now, subscription,
};

backend_tests! { app;
    a_new_user_is_on_free_and_its_fourth_agent_is_refused,
    twenty_concurrent_creations_on_free_create_exactly_three,
    the_webhook_checks_the_signature_before_anything_else,
    subscription_events_move_the_plan_by_status,
    each_event_is_applied_once,
    events_out_of_order_end_in_the_right_plan,
    a_subscription_before_its_checkout_waits_for_the_link,
    checkout_prefers_the_reference_then_metadata_then_email,
    a_downgrade_keeps_every_agent_and_refuses_new_ones,
}

async fn a_new_user_is_on_free_and_its_fourth_agent_is_refused(app: TestApp) {
    let user = app.register("free@example.com").await;
    let billing = app.get("/api/billing", &user).await.assert_status(200).clone();
    assert_eq!(
        billing,
        json!({"plan": "free", "agent_limit": 3, "agents_used": 0, "subscription_status": null})
    );
    for id in ["one", "two", "three"] {
        app.create_agent(&user, id).await;
    }
    let body = json!({"id": "four", "name": "Four", "role_prompt": "Work.", "channel": "c"});
    let refused = app.post("/api/agents", &user, body.clone()).await;
    refused.assert_error(402, "plan_limit_reached");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("free") && message.contains('3'), "{message}");
    app.get("/api/agents/four", &user).await.assert_error(404, "agent_not_found");
    assert_eq!(app.get("/api/billing", &user).await.assert_status(200)["agents_used"], 3);

    // Deleting one makes room again; other users have their own allowance.
    app.delete("/api/agents/one", &user).await.assert_status(200);
    app.post("/api/agents", &user, body.clone()).await.assert_status(201);
    let other = app.register("other@example.com").await;
    app.post("/api/agents", &other, body).await.assert_status(201);
    app.request(reqwest::Method::GET, "/api/billing", None, None)
        .await
        .assert_error(401, "unauthorized");
}

async fn twenty_concurrent_creations_on_free_create_exactly_three(app: TestApp) {
    let user = app.register("race@example.com").await;
    let creations = (0..20).map(|n| {
        let body = json!({"id": format!("agent-{n}"), "name": "Racer", "role_prompt": "Race.", "channel": "c"});
        let (app, user) = (&app, &user);
        async move { app.post("/api/agents", user, body).await }
    });
    let replies = futures::future::join_all(creations).await;
    let created = replies.iter().filter(|r| r.status.as_u16() == 201).count();
    let refused = replies.iter().filter(|r| r.status.as_u16() == 402).count();
    assert_eq!((created, refused), (3, 17));
    let list = app.get("/api/agents", &user).await.assert_status(200).clone();
    assert_eq!(list["agents"].as_array().unwrap().len(), 3);
}

async fn the_webhook_checks_the_signature_before_anything_else(app: TestApp) {
    let user = app.register("sig@example.com").await;
    let event = checkout("evt_sig_1", "cus_sig", Some(&user.id), None, None);
    let body = serde_json::to_vec(&event).unwrap();
    let t = now();
    let good = sign(SECRET, t, &body);
    let (_, right) = good.split_once(",v1=").unwrap();
    let mut changed = body.clone();
    let at = changed.iter().position(|b| *b == b'c').unwrap();
    changed[at] = b'd';
    let vector: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture_path("signature-vector.json")).unwrap(),
    )
    .unwrap();
    let vector_body =
        std::fs::read(fixture_path(vector["payload_file"].as_str().unwrap())).unwrap();
    let refused: Vec<(&str, Vec<u8>, Option<String>)> = vec![
        ("no header", body.clone(), None),
        ("a changed byte", changed, Some(good.clone())),
        ("a wrong secret", body.clone(), Some(sign("whsec_someone_else", t, &body))),
        ("an old timestamp", body.clone(), Some(sign(SECRET, t - 301, &body))),
        ("a far-future timestamp", body.clone(), Some(sign(SECRET, t + 301, &body))),
        ("only v0", body.clone(), Some(good.replace("v1=", "v0="))),
        ("garbage", body.clone(), Some("not a signature".into())),
        // Valid for its own secret and time, which is long past (and not our secret).
        (
            "the fixture vector",
            vector_body,
            Some(vector["stripe_signature_header"].as_str().unwrap().into()),
        ),
    ];
    for (case, body, header) in refused {
        let reply = app.webhook(&body, header.as_deref()).await;
        assert_eq!(reply.status.as_u16(), 400, "{case}: {}", reply.body);
        reply.assert_error(400, "invalid_signature");
    }
    assert_eq!(app.db.count("SELECT COUNT(*) FROM billing_events", &[]).await, 0);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM workspaces WHERE stripe_customer_id IS NOT NULL", &[])
            .await,
        0
    );

    // A rotation: a wrong v1 beside the right one passes; so does the secret being retired.
    let rotation = format!("t={t},v1={},v1={right}", "0".repeat(64));
    let reply = app.webhook(&body, Some(&rotation)).await;
    assert_eq!(
        reply.assert_status(200),
        &json!({"received": true, "event_id": "evt_sig_1", "handled": true})
    );
    let other =
        serde_json::to_vec(&checkout("evt_sig_2", "cus_sig", Some(&user.id), None, None)).unwrap();
    app.webhook(&other, Some(&sign(OLD_SECRET, t, &other))).await.assert_status(200);

    // Signed but not an event: a clear 400, nothing recorded.
    let junk = b"{\"not\": \"an event\"}";
    app.webhook(junk, Some(&sign(SECRET, t, junk))).await.assert_error(400, "validation_failed");
    // Types the service does not act on are acknowledged.
    let plan_created = std::fs::read(fixture_path("event.json")).unwrap();
    let reply = app.webhook(&plan_created, Some(&sign(SECRET, t, &plan_created))).await;
    assert_eq!(
        reply.assert_status(200),
        &json!({"received": true, "event_id": "evt_1Pgc76B7WZ01zgkWwyRHS12y", "handled": false})
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM billing_events", &[]).await, 2);
}

async fn subscription_events_move_the_plan_by_status(app: TestApp) {
    let user = app.register("buyer@example.com").await;
    app.deliver(&checkout("evt_c1", "cus_1", Some(&user.id), None, None)).await;
    assert_eq!(
        app.plan_of(&user).await,
        ("free".into(), 3, json!(null)),
        "a checkout alone grants nothing"
    );
    let t = now();
    let sub = |status, price| Sub { id: "sub_1", customer: "cus_1", status, price, user_id: None };
    let steps = [
        ("created", "active", PRICE_PRO, ("pro", 25, "active")),
        ("updated", "past_due", PRICE_PRO, ("pro", 25, "past_due")),
        ("updated", "unpaid", PRICE_PRO, ("free", 3, "unpaid")),
        ("updated", "trialing", "lookup:starter_monthly", ("starter", 10, "trialing")),
        ("updated", "active", "lookup:team_monthly", ("team", 100, "active")),
        ("updated", "canceled", "lookup:team_monthly", ("free", 3, "canceled")),
    ];
    for (n, (kind, status, price, (plan, limit, shown))) in steps.into_iter().enumerate() {
        let event = subscription(kind, &format!("evt_s{n}"), t + n as i64, &sub(status, price));
        let receipt = app.deliver(&event).await;
        assert_eq!(receipt["handled"], true);
        assert_eq!(
            app.plan_of(&user).await,
            (plan.into(), limit, json!(shown)),
            "after {kind} {status}"
        );
    }

    // A second subscription, then its deletion: back to free.
    let sub2 =
        Sub { id: "sub_2", customer: "cus_1", status: "active", price: PRICE_PRO, user_id: None };
    app.deliver(&subscription("created", "evt_s2_1", t + 10, &sub2)).await;
    assert_eq!(app.plan_of(&user).await, ("pro".into(), 25, json!("active")));
    app.deliver(&subscription("deleted", "evt_s2_2", t + 11, &Sub { status: "canceled", ..sub2 }))
        .await;
    assert_eq!(app.plan_of(&user).await, ("free".into(), 3, json!("canceled")));
}

async fn each_event_is_applied_once(app: TestApp) {
    let user = app.register("twice@example.com").await;
    app.deliver(&checkout("evt_link", "cus_2", Some(&user.id), None, None)).await;
    let t = now();
    let pro = subscription(
        "updated",
        "evt_pro",
        t,
        &Sub { id: "sub_3", customer: "cus_2", status: "active", price: PRICE_PRO, user_id: None },
    );
    let starter = subscription(
        "updated",
        "evt_starter",
        t,
        &Sub {
            id: "sub_3",
            customer: "cus_2",
            status: "active",
            price: "lookup:starter_monthly",
            user_id: None,
        },
    );
    app.deliver(&pro).await;
    app.deliver(&starter).await;
    assert_eq!(app.plan_of(&user).await.0, "starter");
    // The same second as the last applied event: only the event id keeps it from applying again.
    let repeat = app.deliver(&pro).await;
    assert_eq!(repeat, json!({"received": true, "event_id": "evt_pro", "handled": true}));
    assert_eq!(app.plan_of(&user).await.0, "starter");

    // Ten concurrent deliveries of one new event: recorded and applied once.
    let team = subscription(
        "updated",
        "evt_team",
        t + 1,
        &Sub {
            id: "sub_3",
            customer: "cus_2",
            status: "active",
            price: "lookup:team_monthly",
            user_id: None,
        },
    );
    let deliveries = (0..10).map(|_| app.deliver(&team));
    for receipt in futures::future::join_all(deliveries).await {
        assert_eq!(receipt["event_id"], "evt_team");
    }
    assert_eq!(app.plan_of(&user).await.0, "team");
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM billing_events WHERE id = $1", &["evt_team"]).await,
        1
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM billing_events", &[]).await, 4);
}

async fn events_out_of_order_end_in_the_right_plan(app: TestApp) {
    let user = app.register("order@example.com").await;
    app.deliver(&checkout("evt_link", "cus_3", Some(&user.id), None, None)).await;
    let t = now();
    let sub = |status, price| Sub { id: "sub_4", customer: "cus_3", status, price, user_id: None };
    // Updated (to pro) arrives before created (starter): created is older and ignored.
    app.deliver(&subscription("updated", "evt_u", t - 10, &sub("active", PRICE_PRO))).await;
    app.deliver(&subscription(
        "created",
        "evt_c",
        t - 20,
        &sub("active", "lookup:starter_monthly"),
    ))
    .await;
    assert_eq!(app.plan_of(&user).await, ("pro".into(), 25, json!("active")));
    // Deleted arrives before an update made earlier: the subscription stays over.
    app.deliver(&subscription("deleted", "evt_d", t, &sub("canceled", PRICE_PRO))).await;
    app.deliver(&subscription("updated", "evt_late", t - 5, &sub("active", "lookup:team_monthly")))
        .await;
    assert_eq!(app.plan_of(&user).await, ("free".into(), 3, json!("canceled")));
}

async fn a_subscription_before_its_checkout_waits_for_the_link(app: TestApp) {
    let user = app.register("Early.Bird@Example.com").await;
    let other = app.register("bystander@example.com").await;
    let sub =
        Sub { id: "sub_5", customer: "cus_new", status: "active", price: PRICE_PRO, user_id: None };
    let receipt = app.deliver(&subscription("created", "evt_early", now(), &sub)).await;
    assert_eq!(receipt["handled"], true);
    assert_eq!(app.plan_of(&user).await.0, "free", "not linked yet");
    // The checkout names no user id this service knows (the fixture's own reference), so the
    // buyer's e-mail links it, whatever its case.
    app.deliver(&checkout(
        "evt_late_link",
        "cus_new",
        Some("guild_123456789012345678"),
        None,
        Some("early.bird@example.COM"),
    ))
    .await;
    assert_eq!(app.plan_of(&user).await, ("pro".into(), 25, json!("active")));
    assert_eq!(app.plan_of(&other).await.0, "free");
}

async fn checkout_prefers_the_reference_then_metadata_then_email(app: TestApp) {
    let a = app.register("a@example.com").await;
    let b = app.register("b@example.com").await;
    let c = app.register("c@example.com").await;
    let t = now();
    let cases = [
        ("cus_a", Some(a.id.as_str()), Some(b.id.as_str()), Some("c@example.com"), &a),
        ("cus_b", None, Some(b.id.as_str()), Some("c@example.com"), &b),
        ("cus_c", Some("not-a-user"), None, Some("c@example.com"), &c),
    ];
    for (n, (customer, reference, metadata, email, owner)) in cases.into_iter().enumerate() {
        app.deliver(&checkout(&format!("evt_l{n}"), customer, reference, metadata, email)).await;
        let sub = Sub {
            id: &format!("sub_l{n}"),
            customer,
            status: "active",
            price: PRICE_PRO,
            user_id: None,
        };
        app.deliver(&subscription("created", &format!("evt_ls{n}"), t, &sub)).await;
        let linked = app
            .db
            .count(
                "SELECT COUNT(*) FROM workspaces WHERE id = $1 AND stripe_customer_id = $2",
                &[&owner.id, customer],
            )
            .await;
        assert_eq!(linked, 1, "{customer} belongs to the expected user");
    }
    // A checkout matching nobody links nothing and is still acknowledged.
    let receipt =
        app.deliver(&checkout("evt_nobody", "cus_x", None, None, Some("nobody@example.com"))).await;
    assert_eq!(receipt["handled"], true);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM workspaces WHERE stripe_customer_id = 'cus_x'", &[])
            .await,
        0
    );
    // metadata.user_id on the subscription itself links a customer no checkout named.
    let d = app.register("d@example.com").await;
    let sub = Sub {
        id: "sub_meta",
        customer: "cus_meta",
        status: "active",
        price: "lookup:team_monthly",
        user_id: Some(&d.id),
    };
    app.deliver(&subscription("created", "evt_meta", t, &sub)).await;
    assert_eq!(app.plan_of(&d).await.0, "team");
}

async fn a_downgrade_keeps_every_agent_and_refuses_new_ones(app: TestApp) {
    let user = app.register("down@example.com").await;
    app.deliver(&checkout("evt_link", "cus_4", Some(&user.id), None, None)).await;
    let sub = Sub {
        id: "sub_6",
        customer: "cus_4",
        status: "active",
        price: "lookup:team_monthly",
        user_id: None,
    };
    app.deliver(&subscription("created", "evt_up", now(), &sub)).await;
    for n in 0..5 {
        app.create_agent(&user, &format!("agent-{n}")).await;
    }
    app.deliver(&subscription(
        "deleted",
        "evt_down",
        now() + 1,
        &Sub { status: "canceled", ..sub },
    ))
    .await;
    let billing = app.get("/api/billing", &user).await.assert_status(200).clone();
    assert_eq!(
        billing,
        json!({"plan": "free", "agent_limit": 3, "agents_used": 5, "subscription_status": "canceled"})
    );
    let list = app.get("/api/agents", &user).await.assert_status(200).clone();
    assert_eq!(list["agents"].as_array().unwrap().len(), 5, "billing never deletes agents");
    let body = json!({"id": "sixth", "name": "Six", "role_prompt": "Work.", "channel": "c"});
    app.post("/api/agents", &user, body).await.assert_error(402, "plan_limit_reached");
    app.get("/api/agents/agent-4", &user).await.assert_status(200);
}

backend_tests! { app_without_webhook_secret;
    without_a_secret_the_webhook_is_not_configured,
}

async fn without_a_secret_the_webhook_is_not_configured(app: TestApp) {
    let body = serde_json::to_vec(&checkout("evt_off", "cus_off", None, None, None)).unwrap();
    let reply = app.webhook(&body, Some(&sign(SECRET, now(), &body))).await;
    reply.assert_error(503, "not_configured");
    assert!(reply.body["error"]["message"].as_str().unwrap().contains("billing.webhook_secrets"));
}
