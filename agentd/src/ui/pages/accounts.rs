//! Signing in, registering and signing out.

use axum::extract::State;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;

use agentcore::Session;
use agentcore::api::{LoginRequest, RegisterRequest};

use crate::AppState;
use crate::error::ApiError;
use crate::limits::SignIn;
use crate::ui::form::Fields;
use crate::ui::render::{FormErrors, Page};
use crate::ui::session::{self, Csrf, Viewer};

pub(crate) async fn login_page(csrf: Csrf) -> Page {
    form_page("login.html", &csrf, &Fields::default(), FormErrors::default())
}

pub(crate) async fn register_page(csrf: Csrf) -> Page {
    form_page("register.html", &csrf, &Fields::default(), FormErrors::default())
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
    answer(&state, &headers, "login.html", &csrf, &fields, signed_in.await)
}

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
    let mut response = Redirect::to("/login").into_response();
    if let Ok(value) = HeaderValue::from_str(&session::sign_out_cookie(&state, &headers)) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// Signed in: the session's cookies and on to the overview. Refused: the form again, with the
/// refusal's status and its errors beside their fields.
fn answer(
    state: &AppState,
    headers: &HeaderMap,
    template: &'static str,
    csrf: &Csrf,
    fields: &Fields,
    result: Result<Session, ApiError>,
) -> Response {
    let session = match result {
        Ok(session) => session,
        Err(error) => {
            return form_page(template, csrf, fields, FormErrors::of(&error))
                .with_status(error.status())
                .into_response();
        }
    };
    let mut response = Redirect::to("/").into_response();
    for cookie in session::sign_in_cookies(state, headers, &session.access_token) {
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

fn form_page(template: &'static str, csrf: &Csrf, fields: &Fields, errors: FormErrors) -> Page {
    let mut values = fields.values();
    values.remove("password");
    Page::new(template, context! { csrf => csrf.0, values, errors })
}
