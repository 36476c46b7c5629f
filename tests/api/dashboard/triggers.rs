//! The Triggers section of an agent's page over plain HTTP: a trigger made with the form shows
//! its secret once with a `curl` call that, run as shown, queues a task; disabling, rotating
//! and deleting (confirmed) go through the page's forms.

use serde_json::Value;

use super::Visitor;
use super::teams::{between, user_of};
use crate::helpers::{TestApp, backend_tests};

backend_tests! { app;
    a_trigger_made_on_the_agent_page_shows_its_secret_once_with_a_curl_call_that_works,
}

async fn a_trigger_made_on_the_agent_page_shows_its_secret_once_with_a_curl_call_that_works(
    app: TestApp,
) {
    let mut ada = Visitor::with_writer(&app, "triggers-page@example.com").await;
    let me = user_of(&app, &ada).await;

    // A refused form: the template's error beside its field, what was typed kept.
    let bad = ada.post("/agents/writer/triggers", &[("title", "{{unclosed"), ("name", "ci")]).await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("data-field=\"title\""), "{}", bad.body);
    assert!(bad.body.contains("value=\"{{unclosed\""), "{}", bad.body);
    let none = app.get("/api/triggers", &me).await;
    assert_eq!(none.assert_status(200)["triggers"], serde_json::json!([]));

    let fields =
        [("title", "Alert: {{alert.name}}"), ("name", "grafana <prod>"), ("priority", "5")];
    let made = ada.post("/agents/writer/triggers", &fields).await;
    assert_eq!(made.status, 200, "{}", made.body);
    assert_eq!(made.headers["hx-push-url"], "/agents/writer", "a reload shows the agent");
    let secret = between(&made, "<code id=\"trigger-secret\">", "</code>").to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert!(made.body.contains("grafana &lt;prod&gt;"), "escaped: {}", made.body);
    let trigger = app.get("/api/triggers?agent=writer", &me).await;
    let trigger: Value = trigger.assert_status(200)["triggers"][0].clone();
    assert_eq!((&trigger["priority"], &trigger["enabled"]), (&5.into(), &true.into()));
    let id = trigger["id"].as_str().unwrap().to_owned();
    let url = between(&made, "<code id=\"trigger-url\">", "</code>").to_owned();
    assert_eq!(url, trigger["url"].as_str().unwrap());
    let curl = unescape(between(&made, "<pre id=\"trigger-curl\"><code>", "</code>"));
    assert!(curl.contains(&secret) && curl.contains(&url), "{curl}");
    for header in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        assert!(curl.contains(&format!("-H \"{header}: ")), "{header} in {curl}");
    }
    let page = ada.get("/agents/writer").await;
    assert!(!page.body.contains(&secret), "the secret is shown once");
    assert!(page.body.contains(&format!("data-trigger=\"{id}\" data-enabled=\"true\"")));

    // The call as shown, run by a shell (to this server's address): one task queued.
    let call = curl.replace(&url, &format!("{}/hooks/{id}", app.address));
    if let Some(output) = run_shell(&call).await {
        assert!(output.contains("\"duplicate\":false"), "the call was accepted: {output}");
        let tasks = app.get("/api/agents/writer/backlog", &me).await;
        let tasks = tasks.assert_status(200)["tasks"].as_array().unwrap().clone();
        assert_eq!(tasks.len(), 1, "{tasks:?}");
        assert!(tasks[0]["title"].as_str().unwrap().starts_with("Alert:"), "{tasks:?}");
        let page = ada.get("/agents/writer").await;
        assert!(page.body.contains("<td data-label=\"Calls\">1</td>"), "{}", page.body);
    }

    // Disabled, enabled, rotated (the new secret once), deleted after asking.
    let here = format!("/agents/writer/triggers/{id}");
    let off = ada.post(&format!("{here}/disable"), &[]).await;
    assert_eq!((off.status, off.location.as_deref()), (303, Some("/agents/writer#triggers")));
    let shown = app.get(&format!("/api/triggers/{id}"), &me).await;
    assert_eq!(shown.assert_status(200)["enabled"], false);
    assert!(ada.get("/agents/writer").await.body.contains("data-enabled=\"false\""));
    ada.post(&format!("{here}/enable"), &[]).await;
    let shown = app.get(&format!("/api/triggers/{id}"), &me).await;
    assert_eq!(shown.assert_status(200)["enabled"], true);
    let rotated = ada.post(&format!("{here}/rotate"), &[]).await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let new_secret = between(&rotated, "<code id=\"trigger-secret\">", "</code>").to_owned();
    assert!(new_secret.starts_with("whsec_") && new_secret != secret, "{new_secret}");
    assert!(rotated.body.contains("The previous secret stays valid until"), "{}", rotated.body);

    let ask = ada.get(&format!("{here}/delete")).await;
    assert_eq!(ask.status, 200, "{}", ask.body);
    assert!(ask.body.contains(&format!("action=\"{here}/delete\"")), "{}", ask.body);
    app.get(&format!("/api/triggers/{id}"), &me).await.assert_status(200);
    let gone = ada.post(&format!("{here}/delete"), &[]).await;
    assert_eq!((gone.status, gone.location.as_deref()), (303, Some("/agents/writer#triggers")));
    app.get(&format!("/api/triggers/{id}"), &me).await.assert_error(404, "trigger_not_found");
}

/// The text of an HTML page's escaped value.
fn unescape(html: &str) -> String {
    html.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Runs `script` with bash, where `curl` and `openssl` are installed: its standard output
/// (`None`, with a notice, where they are not). Run apart from the test's runtime, which
/// serves the call.
async fn run_shell(script: &str) -> Option<String> {
    let found = |tool: &str| {
        std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !(found("curl") && found("openssl") && found("bash")) {
        eprintln!("curl, openssl or bash is not installed: the dashboard's curl call is not run");
        return None;
    }
    let output = tokio::process::Command::new("bash").args(["-c", script]).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    Some(stdout)
}
