//! The web dashboard: in a real browser (Chromium over WebDriver) for what a person does, and
//! over plain HTTP for what a browser would never let a page do (a form without its CSRF
//! token, another user's URL, a revoked cookie).

mod browser;
mod confirm;
mod confirm_browser;
mod errors;
mod forms;
mod http;
mod lists;
mod live;
mod live_browser;
mod models;
mod prg;
mod teams;
mod teams_browser;
mod triggers;
mod webhooks;
mod zones;

use std::collections::HashMap;

use crate::helpers::{TestApp, User};

/// A dashboard client without a browser: keeps cookies, does not follow redirects.
pub(super) struct Visitor {
    client: reqwest::Client,
    base: String,
    pub(super) cookies: HashMap<String, String>,
    /// The CSRF token the last page carried in its forms.
    pub(super) csrf: Option<String>,
}

pub(super) struct Page {
    pub(super) status: u16,
    pub(super) location: Option<String>,
    pub(super) headers: reqwest::header::HeaderMap,
    pub(super) body: String,
}

impl Visitor {
    pub(super) fn new(app: &TestApp) -> Self {
        let client =
            reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        Self { client, base: app.address.clone(), cookies: HashMap::new(), csrf: None }
    }

    fn cookie_header(&self) -> String {
        self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")
    }

    async fn keep(&mut self, response: reqwest::Response) -> Page {
        for value in response.headers().get_all(reqwest::header::SET_COOKIE) {
            let pair = value.to_str().unwrap().split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let location = headers.get("location").map(|l| l.to_str().unwrap().to_owned());
        let body = response.text().await.unwrap();
        if let Some(token) = body.split("name=\"csrf\" value=\"").nth(1) {
            self.csrf = token.split('"').next().map(str::to_owned);
        }
        Page { status, location, headers, body }
    }

    pub(super) async fn get(&mut self, path: &str) -> Page {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .header("cookie", self.cookie_header())
            .send()
            .await
            .unwrap();
        self.keep(response).await
    }

    /// [`Visitor::get`] with `If-None-Match: tag`.
    pub(super) async fn get_unless(&mut self, path: &str, tag: &str) -> Page {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .header("cookie", self.cookie_header())
            .header("if-none-match", tag)
            .send()
            .await
            .unwrap();
        self.keep(response).await
    }

    /// Posts `fields` as a form; the CSRF token is added unless `fields` names `csrf` itself.
    pub(super) async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let mut form: Vec<(String, String)> =
            fields.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        if !fields.iter().any(|(k, _)| *k == "csrf")
            && let Some(token) = self.csrf.as_ref().or(self.cookies.get("agentd_csrf"))
        {
            form.push(("csrf".into(), token.clone()));
        }
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .header("cookie", self.cookie_header())
            .form(&form)
            .send()
            .await
            .unwrap();
        self.keep(response).await
    }

    /// The signed-in session as an API user (the cookie holds the API's own token).
    pub(super) fn api_user(&self) -> User {
        User { id: String::new(), token: self.cookies["agentd_session"].clone() }
    }

    /// Registers, then creates agent `writer` through the overview's form.
    pub(super) async fn with_writer(app: &TestApp, email: &str) -> Self {
        let mut visitor = Self::new(app);
        visitor.register(email).await;
        let created = visitor
            .post(
                "/agents",
                &[
                    ("name", "Writer"),
                    ("id", "writer"),
                    ("channel", "writing"),
                    ("role_prompt", "Writes."),
                ],
            )
            .await;
        assert_eq!(created.location.as_deref(), Some("/agents/writer"), "{}", created.body);
        visitor
    }

    /// Registers through the dashboard's form and is then signed in.
    pub(super) async fn register(&mut self, email: &str) {
        self.get("/register").await;
        let page = self
            .post(
                "/register",
                &[("name", "Dana"), ("email", email), ("password", "correct horse battery")],
            )
            .await;
        assert_eq!((page.status, page.location.as_deref()), (303, Some("/")), "{}", page.body);
        // Signed in, forms carry the session's own token.
        self.get("/").await;
    }
}
