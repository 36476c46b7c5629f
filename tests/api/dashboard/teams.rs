//! Workspaces in the dashboard over plain HTTP: the header's switcher and the cookie it sets,
//! the team page's members, invites and API keys (a link and a secret shown once), joining
//! through an invite's link before having an account, and what a viewer is refused.

use reqwest::Method;
use serde_json::json;

use super::{Page, Visitor};
use crate::helpers::{TestApp, User, backend_tests};
use crate::teams::{in_ws, join};

backend_tests! { app;
    the_switcher_sets_the_cookie_only_for_a_members_workspace,
    the_team_page_lists_members_and_shows_an_invite_link_once,
    a_key_is_shown_once_and_revoked,
    a_new_user_registers_through_an_invite_link_and_joins,
    a_viewer_reads_the_team_and_is_refused_changes,
}

const COOKIE: &str = "agentd_workspace";

/// The signed-in visitor as an API user, with their id.
pub(super) async fn user_of(app: &TestApp, visitor: &Visitor) -> User {
    let session = visitor.api_user();
    let me = app.get("/auth/me", &session).await;
    User { id: me.assert_status(200)["id"].as_str().unwrap().to_owned(), token: session.token }
}

/// A team workspace made with the team page's form, which switches to it: its id.
pub(super) async fn new_team(visitor: &mut Visitor, name: &str) -> String {
    let made = visitor.post("/workspaces", &[("name", name)]).await;
    assert_eq!((made.status, made.location.as_deref()), (303, Some("/team")), "{}", made.body);
    visitor.get("/team").await;
    visitor.cookies[COOKIE].clone()
}

/// The `Set-Cookie` value of the workspace cookie in `page`, if it sets one.
fn workspace_cookie(page: &Page, name: &str) -> Option<String> {
    page.headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|v| v.starts_with(&format!("{name}=")))
}

/// The text of `page` between `start` and the next `end`.
pub(super) fn between<'a>(page: &'a Page, start: &str, end: &str) -> &'a str {
    let from = page.body.split(start).nth(1).unwrap_or_else(|| panic!("no {start}: {}", page.body));
    from.split(end).next().unwrap()
}

async fn the_switcher_sets_the_cookie_only_for_a_members_workspace(app: TestApp) {
    let mut ada = Visitor::new(&app);
    ada.register("ada@example.com").await;
    let me = user_of(&app, &ada).await;
    let overview = ada.get("/").await;
    assert!(
        overview.body.contains(&format!("<option value=\"{}\" selected", me.id)),
        "the personal workspace is the current one: {}",
        overview.body
    );

    // A new workspace: the dashboard acts in it from then on.
    let made = ada.post("/workspaces", &[("name", "Ops")]).await;
    let set = workspace_cookie(&made, COOKIE).expect("the workspace cookie is set");
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(set.contains(attribute), "{attribute} in {set}");
    }
    let ops = ada.cookies[COOKIE].clone();
    let team = ada.get("/team").await;
    assert_eq!(team.status, 200, "{}", team.body);
    assert!(team.body.contains(&format!("<option value=\"{ops}\" selected")), "{}", team.body);
    assert!(team.body.contains("<h1 id=\"workspace-name\">Ops"), "{}", team.body);
    let agent =
        [("name", "Shared"), ("id", "shared"), ("channel", "ops"), ("role_prompt", "Helps.")];
    assert_eq!(ada.post("/agents", &agent).await.status, 303);
    let listed = in_ws(&app, &ops, &me, Method::GET, "/api/agents", None).await;
    assert_eq!(listed.assert_status(200)["agents"][0]["id"], "shared", "made in Ops");
    let personal = app.get("/api/agents", &me).await;
    assert_eq!(personal.assert_status(200)["agents"], json!([]));

    // Someone else's workspace, or no workspace at all: not found, and nothing is set.
    let eve = app.register("eve@example.com").await;
    let eves = crate::teams::team(&app, &eve, "Eve's").await;
    for other in [eves.as_str(), eve.id.as_str(), "not-a-workspace", ""] {
        let refused = ada.post("/workspace", &[("workspace", other), ("back", "/")]).await;
        assert_eq!(refused.status, 404, "{other}: {}", refused.body);
        assert!(refused.body.contains("workspace_not_found"), "{}", refused.body);
        assert_eq!(workspace_cookie(&refused, COOKIE), None, "{other}");
        assert_eq!(ada.cookies[COOKIE], ops);
    }

    // Back to the personal one (the cookie goes), to the page it came from when that is one of
    // the dashboard's sections, else to the overview.
    let home = ada.post("/workspace", &[("workspace", me.id.as_str()), ("back", "/usage")]).await;
    assert_eq!((home.status, home.location.as_deref()), (303, Some("/usage")));
    assert!(!ada.cookies.contains_key(COOKIE), "the personal workspace needs no cookie");
    assert!(ada.get("/agents/shared").await.body.contains("agent_not_found"));
    for back in ["/agents/shared", "//evil.example", "https://evil.example/"] {
        let there = ada.post("/workspace", &[("workspace", ops.as_str()), ("back", back)]).await;
        assert_eq!((there.status, there.location.as_deref()), (303, Some("/")), "{back}");
    }
    assert_eq!(ada.cookies[COOKIE], ops);
    assert_eq!(ada.get("/agents/shared").await.status, 200);

    // Over https the cookie is the host's own, and secure.
    let https = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/workspace", app.address))
        .header("cookie", format!("__Host-agentd_session={}", me.token))
        .header("x-forwarded-proto", "https")
        .form(&[("csrf", ada.csrf.clone().unwrap()), ("workspace", ops.clone())])
        .send()
        .await
        .unwrap();
    assert_eq!(https.status(), 303);
    let set = https.headers()["set-cookie"].to_str().unwrap();
    assert!(set.starts_with(&format!("__Host-{COOKIE}={ops}")), "{set}");
    assert!(set.contains("Secure") && set.contains("HttpOnly"), "{set}");
}

async fn the_team_page_lists_members_and_shows_an_invite_link_once(app: TestApp) {
    let mut ada = Visitor::new(&app);
    ada.register("ada@example.com").await;
    let ops = new_team(&mut ada, "Ops").await;
    let me = user_of(&app, &ada).await;
    let bob = app.register("bob@example.com").await;
    join(&app, &ops, &me, &bob, "member").await;

    let team = ada.get("/team").await;
    assert!(team.body.contains(&format!("data-member=\"{}\" data-role=\"owner\"", me.id)));
    assert!(team.body.contains(&format!("data-member=\"{}\" data-role=\"member\"", bob.id)));
    assert!(team.body.contains("bob@example.com"), "{}", team.body);

    // The link is on the page that answers the form, and never again.
    let made = ada
        .post(
            "/team/invites",
            &[("role", "viewer"), ("email", "carol@example.com"), ("expires_in_hours", "24")],
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.body);
    assert_eq!(made.headers["hx-push-url"], "/team", "a reload shows the team page");
    let token = between(&made, "id=\"invite-link\" href=\"/invite/", "\"").to_owned();
    assert_eq!(token.len(), 64, "{token}");
    assert!(between(&made, "id=\"invite-link\"", "</a>").contains(&format!("/invite/{token}")));
    let again = ada.get("/team").await;
    assert!(!again.body.contains(&token), "the link is shown once");
    assert!(again.body.contains("carol@example.com"), "the invite is listed: {}", again.body);

    // The link is the invite: Carol joins with it, as a viewer.
    let carol = app.register("carol@example.com").await;
    let joined = app.post_empty(&format!("/api/invites/{token}/accept"), &carol).await;
    assert_eq!(joined.assert_status(200)["role"], "viewer");
    let team = ada.get("/team").await;
    assert!(team.body.contains(&format!("data-member=\"{}\" data-role=\"viewer\"", carol.id)));

    // A second invite, withdrawn: its link no longer works.
    let made = ada.post("/team/invites", &[("role", "member")]).await;
    let withdrawn = between(&made, "id=\"invite-link\" href=\"/invite/", "\"").to_owned();
    let invites = in_ws(&app, &ops, &me, Method::GET, "/api/workspace/invites", None).await;
    let id = invites.assert_status(200)["invites"][0]["id"].as_str().unwrap().to_owned();
    assert!(ada.get("/team").await.body.contains(&format!("/team/invites/{id}/withdraw")));
    let gone = ada.post(&format!("/team/invites/{id}/withdraw"), &[]).await;
    assert_eq!((gone.status, gone.location.as_deref()), (303, Some("/team")));
    let dave = app.register("dave@example.com").await;
    app.post_empty(&format!("/api/invites/{withdrawn}/accept"), &dave)
        .await
        .assert_error(404, "invite_not_found");
    assert!(ada.get("/team").await.body.contains("No invite waits for an answer."));

    // Roles change and members go through the page's forms.
    let promoted = ada.post(&format!("/team/members/{}/role", bob.id), &[("role", "admin")]).await;
    assert_eq!((promoted.status, promoted.location.as_deref()), (303, Some("/team")));
    let removed = ada.post(&format!("/team/members/{}/remove", carol.id), &[]).await;
    assert_eq!(removed.status, 303);
    let members = in_ws(&app, &ops, &me, Method::GET, "/api/workspace/members", None).await;
    let roles: Vec<&str> = members.assert_status(200)["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["owner", "admin"]);

    // A refused invite shows the API's error beside its field and keeps what was typed.
    let bad = ada.post("/team/invites", &[("role", "viewer"), ("expires_in_hours", "999")]).await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("data-field=\"expires_in_hours\""), "{}", bad.body);
    assert!(bad.body.contains("value=\"999\""), "{}", bad.body);
}

async fn a_key_is_shown_once_and_revoked(app: TestApp) {
    let mut ada = Visitor::new(&app);
    ada.register("ada@example.com").await;
    let ops = new_team(&mut ada, "Ops").await;
    let me = user_of(&app, &ada).await;

    let made = ada.post("/team/keys", &[("name", "ci"), ("role", "member")]).await;
    assert_eq!(made.status, 200, "{}", made.body);
    let secret = between(&made, "<code id=\"key-secret\">", "</code>").to_owned();
    assert!(secret.starts_with("agk_"), "{secret}");
    let id = secret.split('_').nth(1).unwrap().to_owned();
    let agents = app.request(Method::GET, "/api/agents", Some(&secret), None).await;
    agents.assert_status(200);
    let team = ada.get("/team").await;
    assert!(!team.body.contains(&secret), "the secret is shown once");
    assert!(
        team.body.contains(&format!("data-key=\"{id}\" data-usable=\"true\"")),
        "{}",
        team.body
    );

    let revoked = ada.post(&format!("/team/keys/{id}/revoke"), &[]).await;
    assert_eq!((revoked.status, revoked.location.as_deref()), (303, Some("/team")));
    let refused = app.request(Method::GET, "/api/agents", Some(&secret), None).await;
    refused.assert_error(401, "unauthorized");
    let team = ada.get("/team").await;
    assert!(team.body.contains(&format!("data-key=\"{id}\" data-usable=\"false\"")));
    assert!(!team.body.contains(&format!("/team/keys/{id}/revoke")), "nothing left to revoke");

    // An expiry is a date (its first moment, UTC); one that is no date, or past, is refused.
    for (expiry, problem) in [("soon", "is not a date"), ("2000-01-01", "in the future")] {
        let fields = [("name", "late"), ("role", "viewer"), ("expires_at", expiry)];
        let bad = ada.post("/team/keys", &fields).await;
        assert_eq!(bad.status, 400, "{expiry}: {}", bad.body);
        let error = between(&bad, "data-field=\"expires_at\">", "<");
        assert!(error.contains(problem), "{expiry}: {error}");
    }
    let fields = [("name", "y3k"), ("role", "viewer"), ("expires_at", "2999-01-31")];
    assert_eq!(ada.post("/team/keys", &fields).await.status, 200);
    let keys = in_ws(&app, &ops, &me, Method::GET, "/api/workspace/keys", None).await;
    let y3k = keys.assert_status(200)["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "y3k")
        .cloned()
        .unwrap();
    assert_eq!(y3k["expires_at"], "2999-01-31T00:00:00Z");
}

async fn a_new_user_registers_through_an_invite_link_and_joins(app: TestApp) {
    let mut ada = Visitor::new(&app);
    ada.register("ada@example.com").await;
    let ops = new_team(&mut ada, "Ops").await;
    let made = ada.post("/team/invites", &[("role", "member")]).await;
    let link = format!("/invite/{}", between(&made, "id=\"invite-link\" href=\"/invite/", "\""));

    // Not signed in: the invite's page leads to registering, which comes back to it.
    let mut bob = Visitor::new(&app);
    let page = bob.get(&link).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let next = format!("next={link}");
    assert!(page.body.contains(&format!("href=\"/register?{next}\"")), "{}", page.body);
    assert!(page.body.contains(&format!("href=\"/login?{next}\"")), "{}", page.body);
    let form = bob.get(&format!("/register?{next}")).await;
    assert!(form.body.contains(&format!("name=\"next\" value=\"{link}\"")), "{}", form.body);
    assert!(form.body.contains(&format!("href=\"/login?{next}\"")), "{}", form.body);
    let registered = bob
        .post(
            "/register",
            &[
                ("name", "Bob"),
                ("email", "bob@example.com"),
                ("password", "correct horse battery"),
                ("next", link.as_str()),
            ],
        )
        .await;
    assert_eq!((registered.status, registered.location.as_deref()), (303, Some(link.as_str())));
    let page = bob.get(&link).await;
    assert!(page.body.contains(&format!("<form method=\"post\" action=\"{link}\">")));
    let joined = bob.post(&link, &[]).await;
    assert_eq!((joined.status, joined.location.as_deref()), (303, Some("/")), "{}", joined.body);
    assert_eq!(bob.cookies[COOKIE], ops, "the dashboard acts in the workspace joined");
    assert!(bob.get("/").await.body.contains(&format!("<option value=\"{ops}\" selected")));
    let used = bob.post(&link, &[]).await;
    assert_eq!(used.status, 404, "{}", used.body);
    assert!(used.body.contains("invite_not_found"), "used up: {}", used.body);

    // Signing in elsewhere with a `next` that is not an invite's page goes to the overview;
    // joining without a session asks for one first.
    let mut eve = Visitor::new(&app);
    eve.get("/login").await;
    for next in ["//evil.example/invite/abc", "/agents", "https://evil.example"] {
        let signed = eve
            .post(
                "/login",
                &[
                    ("email", "bob@example.com"),
                    ("password", "correct horse battery"),
                    ("next", next),
                ],
            )
            .await;
        assert_eq!((signed.status, signed.location.as_deref()), (303, Some("/")), "{next}");
        eve.cookies.remove("agentd_session");
        eve.get("/login").await;
    }
    let mut stranger = Visitor::new(&app);
    stranger.get("/login").await;
    let asked = stranger.post(&link, &[]).await;
    assert_eq!((asked.status, asked.location), (303, Some(format!("/login?next={link}"))));
    let unknown = stranger.get("/invite/not..a-token").await;
    assert_eq!(unknown.status, 404);

    // Leaving takes the dashboard back to the personal workspace.
    let bob_user = user_of(&app, &bob).await;
    let left = bob.post(&format!("/team/members/{}/remove", bob_user.id), &[]).await;
    assert_eq!((left.status, left.location.as_deref()), (303, Some("/")), "{}", left.body);
    assert!(!bob.cookies.contains_key(COOKIE));
    let me = user_of(&app, &ada).await;
    let members = in_ws(&app, &ops, &me, Method::GET, "/api/workspace/members", None).await;
    assert_eq!(members.assert_status(200)["members"].as_array().unwrap().len(), 1);
}

async fn a_viewer_reads_the_team_and_is_refused_changes(app: TestApp) {
    let mut ada = Visitor::new(&app);
    ada.register("ada@example.com").await;
    let ops = new_team(&mut ada, "Ops").await;
    let agent =
        [("name", "Shared"), ("id", "shared"), ("channel", "ops"), ("role_prompt", "Helps.")];
    assert_eq!(ada.post("/agents", &agent).await.status, 303);
    let mut bob = Visitor::new(&app);
    bob.register("bob@example.com").await;
    join(&app, &ops, &user_of(&app, &ada).await, &user_of(&app, &bob).await, "viewer").await;
    let switched = bob.post("/workspace", &[("workspace", ops.as_str()), ("back", "/")]).await;
    assert_eq!(switched.status, 303, "{}", switched.body);

    let shared = bob.get("/agents/shared").await;
    assert_eq!(shared.status, 200, "{}", shared.body);
    let team = bob.get("/team").await;
    assert_eq!(team.status, 200, "{}", team.body);
    assert!(team.body.contains("ada@example.com"), "a viewer reads the members");
    assert!(team.body.contains("<strong id=\"my-role\">viewer</strong>"), "{}", team.body);
    for form in
        ["action=\"/team/name\"", "action=\"/team/invites\"", "action=\"/team/keys\"", "/role\""]
    {
        assert!(!team.body.contains(form), "no {form} for a viewer");
    }
    assert!(!team.body.contains("id=\"keys\""), "keys are the admins' to read");
    assert_eq!(team.body.matches("/remove\"").count(), 1, "only their own Leave button");

    // Changes are refused in the facade's words.
    let rename = [("name", "Bob's now"), ("role_prompt", "Helps."), ("channel", "ops")];
    for (path, fields, words) in [
        ("/agents/shared/settings", &rename[..], "a viewer cannot change anything"),
        ("/team/name", &[("name", "Bob's now")][..], "only an owner or an admin"),
        ("/team/invites", &[("role", "viewer")][..], "only an owner or an admin"),
        ("/team/keys", &[("name", "mine"), ("role", "viewer")][..], "only an owner or an admin"),
    ] {
        let refused = bob.post(path, fields).await;
        assert_eq!(refused.status, 403, "{path}: {}", refused.body);
        assert!(refused.body.contains(words), "{path}: {}", refused.body);
    }
    let me = user_of(&app, &ada).await;
    let agent = in_ws(&app, &ops, &me, Method::GET, "/api/agents/shared", None).await;
    assert_eq!(agent.assert_status(200)["name"], "Shared");
    let workspace = in_ws(&app, &ops, &me, Method::GET, "/api/workspace", None).await;
    assert_eq!(workspace.assert_status(200)["name"], "Ops");
    let keys = in_ws(&app, &ops, &me, Method::GET, "/api/workspace/keys", None).await;
    assert_eq!(keys.assert_status(200)["keys"], json!([]));
}
