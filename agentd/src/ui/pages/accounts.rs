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
        Ok::<_, ApiError>(state.core.login(request.parse()?).await?)
    };
    match signed_in.await {
        Ok(session) => signed_in_response(&state, &headers, &session),
        Err(error) => refused("login.html", &csrf, &fields, &error),
    }
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
    match registered.await {
        Ok(session) => signed_in_response(&state, &headers, &session),
        Err(error) => refused("register.html", &csrf, &fields, &error),
    }
}

/// Sign-out is the API's logout: every session and token of the user stops working.
pub(crate) async fn logout(
    State(state): State<AppState>,
    viewer: Result<Viewer, session::SignInFirst>,
) -> Response {
    if let Ok(Viewer(who)) = viewer
        && let Err(error) = state.core.logout(&who).await
    {
        return crate::ui::render::error_page(&error.into());
    }
    let mut response = Redirect::to("/login").into_response();
    if let Ok(value) = HeaderValue::from_str(&session::sign_out_cookie()) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

fn signed_in_response(state: &AppState, headers: &HeaderMap, session: &Session) -> Response {
    let mut response = Redirect::to("/").into_response();
    for cookie in session::sign_in_cookies(state, headers, &session.access_token) {
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

fn refused(template: &'static str, csrf: &Csrf, fields: &Fields, error: &ApiError) -> Response {
    let status = error.status();
    form_page(template, csrf, fields, FormErrors::of(error)).with_status(status).into_response()
}

fn form_page(template: &'static str, csrf: &Csrf, fields: &Fields, errors: FormErrors) -> Page {
    let mut values = fields.values();
    values.remove("password");
    Page::new(template, context! { csrf => csrf.0, values, errors })
}
