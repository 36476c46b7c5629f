//! `models.fallbacks` and `models.health`: read from the file or the environment, bounded, and
//! checked against the providers when the core is built.

use std::time::Duration;

use super::Flags;
use super::tests::{File, load};

#[test]
fn fallback_chains_come_from_the_file_or_the_environment() {
    let file = File::new(
        "fallbacks.toml",
        r#"
        [models.fallbacks]
        "anthropic:claude-sonnet-4-5" = ["openai:gpt-4o", "ollama:llama3.1"]
        "openai:gpt-4o" = []
        [models.health]
        failures_to_cool_down = 5
        cooldown_seconds = 10
        "#,
    );
    let config = load(file.flags(), &[]).unwrap();
    let chains = &config.models.fallbacks;
    assert_eq!(chains["anthropic:claude-sonnet-4-5"], ["openai:gpt-4o", "ollama:llama3.1"]);
    assert!(chains["openai:gpt-4o"].is_empty(), "an empty chain: no fallback");
    assert_eq!(config.models.health.failures_to_cool_down, 5);
    assert_eq!(config.models.health.cooldown, Duration::from_secs(10));
    assert_eq!(config.models.health.max_cooldown, Duration::from_secs(600), "the default");

    let env = [("AGENTD_MODELS__FALLBACKS", "openai:a=openai:b|openai:c, openai:d=")];
    let config = load(Flags::default(), &env).unwrap();
    assert_eq!(config.models.fallbacks["openai:a"], ["openai:b", "openai:c"]);
    assert!(config.models.fallbacks["openai:d"].is_empty());
    assert!(load(Flags::default(), &[]).unwrap().models.fallbacks.is_empty());
}

#[test]
fn bad_chains_and_health_settings_are_refused_by_their_setting() {
    for (name, value, says) in [
        ("AGENTD_MODELS__FALLBACKS", "openai:a", "models.fallbacks: 'openai:a' is not"),
        ("AGENTD_MODELS__FALLBACKS", "openai:a=echo", "'echo' cannot be a fallback"),
        ("AGENTD_MODELS__FALLBACKS", "openai:a=b:1|b:2|b:3|b:4", "at most 3"),
        ("AGENTD_MODELS__HEALTH__FAILURES_TO_COOL_DOWN", "0", "failures_to_cool_down"),
        ("AGENTD_MODELS__HEALTH__FAILURES_TO_COOL_DOWN", "101", "from 1 to 100"),
        ("AGENTD_MODELS__HEALTH__COOLDOWN_SECONDS", "0", "cooldown_seconds"),
        ("AGENTD_MODELS__HEALTH__MAX_COOLDOWN_SECONDS", "5", "at least"),
        ("AGENTD_MODELS__HEALTH__MAX_COOLDOWN_SECONDS", "90000", "at most 86400"),
    ] {
        let error = load(Flags::default(), &[(name, value)]).unwrap_err().to_string();
        assert!(error.contains(says), "{name}={value}: {error}");
    }
    // A chain naming a provider that is not configured is refused when the core is built.
    let env = [("AGENTD_MODELS__FALLBACKS", "openai:a=mistral:large")];
    let config = load(Flags::default(), &env).unwrap();
    let error = agentcore::models::Models::new(&config.models).unwrap_err().to_string();
    assert!(error.contains("models.fallbacks.\"openai:a\": 'mistral:large' names"), "{error}");
}
