//! Signing in, registering and signing out. Both forms can carry `next`, an invite's page
//! (`/invite/<token>`) to go back to once signed in, so a person can join through a link before
//! having an account; no other place is taken, so a link cannot send anyone elsewhere.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;
use serde::Deserialize;

use agentcore::Session;
use agentcore::api::{LoginRequest, RegisterRequest};
use agentcore::domain::user::Password;

use crate::AppState;
use crate::error::ApiError;
use crate::limits::SignIn;
use crate::ui::form::Fields;
use crate::ui::render::{FormErrors, Page};
use crate::ui::session::{self, Csrf, Viewer};

/// Where to go once signed in (`?next=`).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Next {
    next: Option<String>,
}

pub(crate) async fn login_page(csrf: Csrf, Query(next): Query<Next>) -> Page {
    let next = next.next.as_deref().and_then(invite_path);
    form_page("login.html", &csrf, &Fields::default(), next, FormErrors::default())
}

pub(crate) async fn register_page(csrf: Csrf, Query(next): Query<Next>) -> Page {
    let next = next.next.as_deref().and_then(invite_path);
    form_page("register.html", &csrf, &Fields::default(), next, FormErrors::default())
}

pub(crate) async fn login(
    State(state): State<AppState>,
    limit: Result<SignIn, ApiError>,
    headers: HeaderMap,
    csrf: Csrf,
    fields: Fields,
) -> Response {
    let request = LoginRequest { email: fields.get("email"), password: fields.get("password") };
    let signed_in = async {
        limit?;
        let credentials = request.parse()?;
        state.http.limits.account(&credentials.email)?;
        Ok::<_, ApiError>(state.core.login(credentials).await?)
    };
    match signed_in.await {
        // The API's words for a refused token ("log in again") mean nothing on the sign-in
        // form itself: say what went wrong, without saying which of the two it was.
        Err(error @ ApiError::Core(agentcore::Error::Unauthorized)) => {
            let next = fields.get("next").as_deref().and_then(invite_path);
            let errors =
                FormErrors { message: Some(WRONG_PASSWORD.into()), ..FormErrors::default() };
            form_page("login.html", &csrf, &fields, next, errors)
                .with_status(error.status())
                .into_response()
        }
        result => answer(&state, &headers, "login.html", &csrf, &fields, result),
    }
}

/// What a refused sign-in says.
const WRONG_PASSWORD: &str = "The e-mail address or the password is wrong. Check both and try \
                              again.";

pub(crate) async fn register(
    State(state): State<AppState>,
    limit: Result<SignIn, ApiError>,
    headers: HeaderMap,
    csrf: Csrf,
    fields: Fields,
) -> Response {
    let request = RegisterRequest {
        email: fields.get("email"),
        password: fields.get("password"),
        name: fields.get("name"),
    };
    let registered = async {
        limit?;
        Ok::<_, ApiError>(state.core.register(request.parse()?).await?)
    };
    answer(&state, &headers, "register.html", &csrf, &fields, registered.await)
}

/// Sign-out is the API's logout: every session and token of the user stops working.
pub(crate) async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    viewer: Result<Viewer, session::SignInFirst>,
) -> Response {
    if let Ok(Viewer(who)) = viewer
        && let Err(error) = state.core.logout(&who).await
    {
        return crate::ui::render::error_page(&error.into());
    }
    let response = Redirect::to("/login").into_response();
    session::with_cookies(response, session::sign_out_cookies(&state, &headers))
}

/// Signed in: the session's cookies and on to the overview (or the invite in `next`). Refused:
/// the form again, with the refusal's status and its errors beside their fields.
fn answer(
    state: &AppState,
    headers: &HeaderMap,
    template: &'static str,
    csrf: &Csrf,
    fields: &Fields,
    result: Result<Session, ApiError>,
) -> Response {
    let next = fields.get("next").as_deref().and_then(invite_path);
    let session = match result {
        Ok(session) => session,
        Err(error) => {
            return form_page(template, csrf, fields, next, FormErrors::of(&error))
                .with_status(error.status())
                .into_response();
        }
    };
    let response = Redirect::to(next.as_deref().unwrap_or("/")).into_response();
    session::with_cookies(response, session::sign_in_cookies(state, headers, &session.access_token))
}

fn form_page(
    template: &'static str,
    csrf: &Csrf,
    fields: &Fields,
    next: Option<String>,
    errors: FormErrors,
) -> Page {
    let mut values = fields.values();
    values.remove("password");
    values.remove("next");
    // The rule a new password must meet, stated before a first try: the domain's own bounds.
    let password = context! { min => Password::MIN_CHARS, max => Password::MAX_CHARS };
    Page::new(template, context! { csrf => csrf.0, values, next, errors, password })
}

/// `path` when it is an invite's page on this dashboard (`/invite/` and up to 128 letters and
/// digits, which every token is): nothing else is a place to be sent after signing in.
pub(super) fn invite_path(path: &str) -> Option<String> {
    let token = path.strip_prefix("/invite/")?;
    let shaped =
        (1..=128).contains(&token.len()) && token.bytes().all(|b| b.is_ascii_alphanumeric());
    shaped.then(|| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::invite_path;

    #[test]
    fn only_an_invites_page_is_a_place_to_go_next() {
        let token = "0f".repeat(32);
        assert_eq!(invite_path(&format!("/invite/{token}")), Some(format!("/invite/{token}")));
        for elsewhere in [
            "/",
            "/agents",
            "//evil.example/invite/abc",
            "https://evil.example/invite/abc",
            "/invite/",
            "/invite/../agents",
            "/invite/abc/../../x",
            "/invite/abc?x=1",
            "/invite/abc\\evil",
        ] {
            assert_eq!(invite_path(elsewhere), None, "{elsewhere}");
        }
        assert_eq!(invite_path(&format!("/invite/{}", "a".repeat(129))), None);
    }
}
