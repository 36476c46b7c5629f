//! `POST /channels/{id}/messages`: a message posted as Discord takes it, with its limits, its
//! nonce handling (`enforce_nonce` answers the earlier message), per-channel rate limits with
//! the full 429 header set, and the failures a test asks for.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{Failure, FakeState, Posted, Shared, authenticate, channel_access, error};

pub(super) async fn create_message(
    State(state): Shared,
    headers: HeaderMap,
    Path(channel_id): Path<String>,
    body: Bytes,
) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(_) => return error(400, 50109, "The request body contains invalid JSON."),
    };
    let (response, hang) = {
        let mut s = state.lock().unwrap();
        let token = match authenticate(
            &mut s,
            &headers,
            "POST",
            format!("/channels/{channel_id}/messages"),
            body.clone(),
        ) {
            Ok(token) => token,
            Err(response) => return response,
        };
        if let Err(refused) = channel_access(&s, &token, &channel_id) {
            return refused;
        }
        if s.outage {
            return error(503, 0, "503: Service Unavailable");
        }
        if let Some(limited) = rate_limit(&mut s, &token, &channel_id) {
            return limited;
        }
        let failure = s.failures.pop_front();
        match failure {
            Some(Failure::ServerError) => return error(500, 0, "500: Internal Server Error"),
            Some(Failure::Unauthorized) => return error(401, 0, "401: Unauthorized"),
            Some(Failure::SharedRateLimit(wait)) => {
                *s.rate_limited.entry(channel_id.clone()).or_default() += 1;
                let body = json!({"message": "You are being rate limited.", "retry_after": wait.as_secs_f64(), "global": false});
                let mut response = (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
                let headers = response.headers_mut();
                headers.insert(
                    "retry-after",
                    HeaderValue::from_str(&wait.as_secs_f64().ceil().to_string()).unwrap(),
                );
                headers.insert("x-ratelimit-scope", HeaderValue::from_static("shared"));
                return response;
            }
            _ => {}
        }
        if let Err(invalid) = check_limits(&body) {
            return invalid;
        }
        let nonce = body["nonce"].as_str().map(str::to_owned);
        if nonce.as_ref().is_some_and(|n| n.len() > 25) {
            return error(400, 50035, "Invalid Form Body: nonce");
        }
        let enforce = body["enforce_nonce"].as_bool().unwrap_or(false);
        let key = nonce.clone().map(|n| (channel_id.clone(), n));
        let earlier = key.as_ref().filter(|_| enforce).and_then(|k| s.nonces.get(k).cloned());
        let message = match earlier {
            Some(message) => message,
            None => {
                s.next_id += 1;
                let id = s.next_id.to_string();
                let message = json!({"id": id, "channel_id": channel_id, "content": body["content"].as_str().unwrap_or(""),
                    "embeds": body.get("embeds").cloned().unwrap_or(json!([])), "nonce": nonce});
                s.messages.push(Posted {
                    id,
                    channel_id: channel_id.clone(),
                    body: body.clone(),
                    at: Instant::now(),
                });
                if let Some(key) = key {
                    s.nonces.insert(key, message.clone());
                }
                message
            }
        };
        let hang = match failure {
            Some(Failure::PostThenHang(duration)) => Some(Hang::For(duration)),
            _ => held(&mut s, &body).map(Hang::Until),
        };
        let mut response = Json(message).into_response();
        bucket_headers(&s, &token, &channel_id, response.headers_mut());
        (response, hang)
    };
    match hang {
        Some(Hang::For(duration)) => tokio::time::sleep(duration).await,
        Some(Hang::Until(gate)) => drop(gate.0.acquire().await),
        None => {}
    }
    response
}

/// How an answer is held back after the message is posted.
enum Hang {
    For(std::time::Duration),
    Until(super::Gate),
}

/// The gate to hold this message's answer at, if it is the one a test asked to hold.
fn held(s: &mut FakeState, body: &Value) -> Option<super::Gate> {
    let title = body["embeds"][0]["title"].as_str()?;
    let prefix = s.hold.as_deref()?;
    title.starts_with(prefix).then(|| {
        s.hold = None;
        s.held.clone()
    })
}

/// Counts the message against its channel's window; answers 429 as Discord does when full.
fn rate_limit(s: &mut FakeState, token: &str, channel_id: &str) -> Option<Response> {
    let (limit, window) = s.limit?;
    let now = Instant::now();
    let entry = s.windows.entry((token.to_owned(), channel_id.to_owned())).or_insert((now, 0));
    if now >= entry.0 + window {
        *entry = (now, 0);
    }
    if entry.1 < limit {
        entry.1 += 1;
        return None;
    }
    let retry_after = (entry.0 + window - now).as_secs_f64();
    *s.rate_limited.entry(channel_id.to_owned()).or_default() += 1;
    let mut response = (
        StatusCode::TOO_MANY_REQUESTS,
        Json(json!({"message": "You are being rate limited.", "retry_after": round_up(retry_after), "global": false})),
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert("retry-after", HeaderValue::from_str(&retry_after.ceil().to_string()).unwrap());
    headers.insert("x-ratelimit-scope", HeaderValue::from_static("user"));
    bucket_headers(s, token, channel_id, headers);
    Some(response)
}

fn bucket_headers(s: &FakeState, token: &str, channel_id: &str, headers: &mut HeaderMap) {
    let Some((limit, window)) = s.limit else { return };
    let Some((start, used)) = s.windows.get(&(token.to_owned(), channel_id.to_owned())) else {
        return;
    };
    let reset_after = (*start + window).saturating_duration_since(Instant::now()).as_secs_f64();
    let reset =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
            + reset_after;
    for (name, value) in [
        ("x-ratelimit-limit", limit.to_string()),
        ("x-ratelimit-remaining", limit.saturating_sub(*used).to_string()),
        ("x-ratelimit-reset", format!("{reset:.3}")),
        ("x-ratelimit-reset-after", format!("{:.3}", round_up(reset_after))),
        ("x-ratelimit-bucket", "80c17d2f203122d936070c88c8d10f33".to_owned()),
    ] {
        headers.insert(name, HeaderValue::from_str(&value).unwrap());
    }
}

fn round_up(seconds: f64) -> f64 {
    (seconds * 1000.0).ceil() / 1000.0
}

/// What the service must send with every message, on top of [`check_message`].
fn check_limits(body: &Value) -> Result<(), Response> {
    check_message(body)?;
    if body.get("allowed_mentions").is_none() {
        return Err(error(400, 50035, "the service must always send allowed_mentions"));
    }
    Ok(())
}

/// Discord's message limits: something to show; content 2,000; title 256; description 4,096;
/// at most 5 action rows of at most 5 buttons each, each with a style (1 to 4), a label of at
/// most 80 characters and a `custom_id` of 1 to 100, unique in the message.
pub(super) fn check_message(body: &Value) -> Result<(), Response> {
    let content = body["content"].as_str().unwrap_or("");
    let embeds = body["embeds"].as_array().cloned().unwrap_or_default();
    let rows = body["components"].as_array().cloned().unwrap_or_default();
    if content.is_empty() && embeds.is_empty() && rows.is_empty() {
        return Err(error(400, 50006, "Cannot send an empty message"));
    }
    let bad_row = |row: &Value| {
        row["type"] != 1 || row["components"].as_array().is_none_or(|c| c.is_empty() || c.len() > 5)
    };
    let chars = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
    let buttons: Vec<&Value> =
        rows.iter().filter_map(|r| r["components"].as_array()).flatten().collect();
    let bad_button = |b: &&Value| {
        b["type"] != 2
            || !(1..=4).contains(&b["style"].as_u64().unwrap_or(0))
            || chars(&b["label"]) > 80
            || !(1..=100).contains(&chars(&b["custom_id"]))
    };
    let mut ids: Vec<&str> = buttons.iter().filter_map(|b| b["custom_id"].as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    if rows.len() > 5
        || rows.iter().any(bad_row)
        || buttons.iter().any(bad_button)
        || ids.len() != buttons.len()
    {
        return Err(error(400, 50035, "Invalid Form Body"));
    }
    let too_long = content.chars().count() > 2000
        || embeds.len() > 10
        || embeds.iter().any(|e| chars(&e["title"]) > 256 || chars(&e["description"]) > 4096)
        || embeds.iter().map(|e| chars(&e["title"]) + chars(&e["description"])).sum::<usize>()
            > 6000;
    if too_long {
        return Err(error(400, 50035, "Invalid Form Body"));
    }
    Ok(())
}
