//! A team in Chromium, with two people in two browser profiles (two WebDriver sessions): Ada
//! makes a team workspace with an agent and invites Bob as a viewer; Bob registers through the
//! invite's link, joins, sees the shared agent and is refused a change to it; Ada makes an API
//! key, which works, and revokes it.

use reqwest::Method;
use support::browser::Browser;

use crate::helpers::{TestDb, app_with, backend_tests};

backend_tests! { db;
    a_viewer_joins_through_an_invite_link_and_an_admin_manages_keys,
}

const PASSWORD: &str = "correct horse battery";

/// Registers in `browser` through the form it shows (the register page, or its `next` twin).
async fn register(browser: &Browser, name: &str, email: &str) {
    browser.fill("name", name).await;
    browser.fill("email", email).await;
    browser.fill("password", PASSWORD).await;
    browser.click("form[action='/register'] button[type=submit]").await;
}

async fn a_viewer_joins_through_an_invite_link_and_an_admin_manages_keys(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let Some(ada) = Browser::start().await else { return };
    let Some(bob) = Browser::start().await else { return };
    let at = |path: &str| format!("{}{path}", app.address);

    // Ada: an account, a team workspace (switched to), and an agent in it.
    ada.goto(&at("/register")).await;
    register(&ada, "Ada", "ada@example.com").await;
    ada.wait_for_path("/").await;
    ada.click("nav a[href='/team']").await;
    ada.wait_for_path("/team").await;
    ada.type_into("#new-workspace [name='name']", "Ops").await;
    ada.click("#new-workspace button[type=submit]").await;
    ada.until("the team page of Ops", || async { ada.text("#workspace-name").await == "Ops" })
        .await;
    assert_eq!(ada.text("#workspace-switcher option[selected]").await, "Ops");
    ada.click("nav a[href='/']").await;
    ada.wait_for_path("/").await;
    ada.fill("name", "Shared").await;
    ada.fill("id", "shared").await;
    ada.fill("channel", "ops").await;
    ada.fill("role_prompt", "Helps the team.").await;
    ada.click("form[action='/agents'] button[type=submit]").await;
    ada.wait_for_path("/agents/shared").await;

    // Ada invites Bob as a viewer; the link is shown once.
    ada.click("nav a[href='/team']").await;
    ada.wait_for_path("/team").await;
    ada.click("#invite-form select[name=role] option[value='viewer']").await;
    ada.type_into("#invite-form [name='email']", "bob@example.com").await;
    ada.click("#invite-form button[type=submit]").await;
    let link = ada.find("#invite-link").await.attr("href").await.unwrap().expect("a link");
    assert!(link.starts_with("/invite/"), "{link}");
    assert!(ada.text("#new-invite").await.contains("as viewer"));

    // Bob, in his own browser: from the link to registering, back to the invite, and in.
    bob.goto(&at(&link)).await;
    bob.click("#register-to-join").await;
    bob.wait_for_path("/register").await;
    register(&bob, "Bob", "bob@example.com").await;
    bob.wait_for_path(&link).await;
    bob.click("#join").await;
    bob.wait_for_path("/").await;
    bob.find("tr[data-agent='shared']").await;
    assert_eq!(bob.text("#workspace-switcher option[selected]").await, "Ops");

    // Bob reads the agent but cannot change it: the refusal is shown in the facade's words.
    bob.click("tr[data-agent='shared'] a").await;
    bob.wait_for_path("/agents/shared").await;
    bob.click("details summary").await;
    bob.type_into("form[action$='/settings'] [name='name']", "Bob's agent").await;
    bob.click("form[action$='/settings'] button[type=submit]").await;
    bob.until("the refusal shown", || async {
        bob.text("[role=alert]").await.contains("a viewer cannot change anything")
    })
    .await;
    bob.click("nav a[href='/team']").await;
    bob.wait_for_path("/team").await;
    assert_eq!(bob.text("#my-role").await, "viewer");
    assert_eq!(bob.text("#key-form").await, "", "no key form for a viewer");

    // Ada sees Bob as a viewer, makes a key (shown once, and working), and revokes it.
    ada.goto(&at("/team")).await;
    ada.until("Bob listed as a viewer", || async {
        ada.text("#members").await.contains("bob@example.com")
    })
    .await;
    ada.type_into("#key-form [name='name']", "ci").await;
    ada.click("#key-form button[type=submit]").await;
    let secret = ada.find("#key-secret").await.text().await.unwrap();
    assert!(secret.starts_with("agk_"), "{secret}");
    app.request(Method::GET, "/api/agents", Some(&secret), None).await.assert_status(200);
    ada.click("#keys a[href$='/revoke']").await;
    ada.click("#confirm-yes").await;
    ada.until("the key revoked", || async { ada.text("#keys").await.contains("revoked") }).await;
    assert_eq!(ada.text("#key-secret").await, "", "the secret is gone from the page");
    let refused = app.request(Method::GET, "/api/agents", Some(&secret), None).await;
    refused.assert_error(401, "unauthorized");
    let name = app.db.count("SELECT COUNT(*) FROM agents WHERE name = 'Shared'", &[]).await;
    assert_eq!(name, 1, "the agent is unchanged");
}
