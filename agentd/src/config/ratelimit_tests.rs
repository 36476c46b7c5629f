//! The shared rate limits' settings: per provider or model, from the file or the environment,
//! within their bounds.

use std::time::Duration;

use agentcore::domain::ratelimit::RateLimit;

use super::Flags;
use super::tests::{File, load};

#[test]
fn rate_limits_are_read_per_provider_and_model_from_the_file_or_the_environment() {
    let defaults = load(Flags::default(), &[]).unwrap().models.rate_limits;
    assert!(defaults.limits.is_empty(), "no limit unless set");
    assert_eq!(defaults.window, Duration::from_secs(60));
    let file = File::new(
        "rate_limits.toml",
        r#"
        [models]
        rate_limit_window_seconds = 2
        [models.rate_limits]
        openai = "500/200000"
        "anthropic:claude-haiku-4-5" = "50/-"
        "#,
    );
    let config = load(file.flags(), &[]).unwrap().models.rate_limits;
    assert_eq!(config.window, Duration::from_secs(2));
    assert_eq!(config.limits["openai"], RateLimit { requests: Some(500), tokens: Some(200_000) });
    assert_eq!(config.limits["anthropic:claude-haiku-4-5"].requests, Some(50));
    let env = [("AGENTD_MODELS__RATE_LIMITS", "openai=-/90000, openai:gpt-4o=10/-")];
    let config = load(file.flags(), &env).unwrap().models.rate_limits;
    assert_eq!(config.limits["openai"], RateLimit { requests: None, tokens: Some(90_000) });
    assert_eq!(config.limits["openai:gpt-4o"].requests, Some(10));
    assert!(!config.limits.contains_key("anthropic:claude-haiku-4-5"), "the environment wins");
}

#[test]
fn rate_limits_out_of_bounds_are_refused_by_their_setting() {
    let refused = |vars: &[(&str, &str)]| load(Flags::default(), vars).unwrap_err().to_string();
    let zero = refused(&[("AGENTD_MODELS__RATE_LIMITS", "openai=0/-")]);
    assert!(zero.contains("models.rate_limits.\"openai\": requests"), "{zero}");
    let shape = refused(&[("AGENTD_MODELS__RATE_LIMITS", "openai")]);
    assert!(shape.contains("<requests>/<tokens>"), "{shape}");
    let window = refused(&[("AGENTD_MODELS__RATE_LIMIT_WINDOW_SECONDS", "7200")]);
    assert!(window.contains("models.rate_limit_window_seconds"), "{window}");
}
