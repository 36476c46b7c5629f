//! The OAuth2 code exchange of the fake Discord: `POST /oauth2/token`.

use super::*;

/// `POST /oauth2/token`: form-encoded only, client credentials in the form.
pub(super) async fn token_exchange(
    State(state): Shared,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form: HashMap<String, String> = url_decode(&String::from_utf8_lossy(&body));
    let mut s = state.lock().unwrap();
    s.requests.push(Recorded {
        method: "POST".into(),
        path: "/oauth2/token".into(),
        authorization: None,
        body: json!(form),
    });
    let form_encoded = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let invalid = |error: &str, description: &str| {
        (StatusCode::BAD_REQUEST, Json(json!({"error": error, "error_description": description})))
            .into_response()
    };
    if !form_encoded {
        return invalid("invalid_request", "form-encoded body required");
    }
    if form.get("client_id").map(String::as_str) != Some(CLIENT_ID)
        || form.get("client_secret").map(String::as_str) != Some(CLIENT_SECRET)
    {
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": "invalid_client"})))
            .into_response();
    }
    if form.get("grant_type").map(String::as_str) != Some("authorization_code")
        || form.get("redirect_uri").map(String::as_str) != Some(REDIRECT_URI)
    {
        return invalid("invalid_request", "bad grant_type or redirect_uri");
    }
    let Some(guild_id) = form.get("code").and_then(|code| s.codes.remove(code)) else {
        return invalid("invalid_grant", "Invalid \"code\" in request.");
    };
    let name = s.guilds.get(&guild_id).map(|g| g.name.clone()).unwrap_or_default();
    Json(json!({"access_token": "user-access-token", "token_type": "Bearer", "expires_in": 604800,
        "refresh_token": "refresh", "scope": "bot", "guild": {"id": guild_id, "name": name}}))
    .into_response()
}

fn url_decode(body: &str) -> HashMap<String, String> {
    let decode = |s: &str| {
        let bytes = s.replace('+', " ").into_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let escaped = (bytes[i] == b'%' && i + 2 < bytes.len())
                .then(|| {
                    u8::from_str_radix(&String::from_utf8_lossy(&bytes[i + 1..i + 3]), 16).ok()
                })
                .flatten();
            if let Some(b) = escaped {
                out.push(b);
                i += 3;
                continue;
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    body.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}
