use agentcore::domain::mcp::McpServerName;
use agentcore::mcp::{McpServerConfig, McpTransport};
use secrecy::ExposeSecret;

use super::*;

pub(super) fn load(flags: Flags, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let vars: Environment = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Config::load_with_default_file(&flags, &vars, None)
}

#[test]
fn defaults_apply_when_nothing_is_set() {
    let config = load(Flags::default(), &[]).unwrap();
    assert_eq!(config.bind.to_string(), DEFAULT_BIND);
    assert!(
        config.database_url.is_none() && config.jwt_secret.is_none() && config.token_ttl.is_none()
    );
}

#[test]
fn environment_overrides_defaults_and_flags_override_environment() {
    let vars = [("AGENTD_BIND", "0.0.0.0:9000"), ("AGENTD_DATA_DIR", "/env/dir")];
    let config = load(Flags::default(), &vars).unwrap();
    assert_eq!(config.bind.to_string(), "0.0.0.0:9000");
    assert_eq!(config.data_dir.unwrap(), PathBuf::from("/env/dir"));

    let flags = Flags {
        bind: Some("127.0.0.1:7000".into()),
        data_dir: Some("/flag/dir".into()),
        ..Flags::default()
    };
    let config = load(flags, &vars).unwrap();
    assert_eq!(config.bind.to_string(), "127.0.0.1:7000");
    assert_eq!(config.data_dir.unwrap(), PathBuf::from("/flag/dir"));
}

#[test]
fn the_database_defaults_to_a_file_in_the_data_dir() {
    let config = load(Flags { data_dir: Some("/data".into()), ..Flags::default() }, &[]).unwrap();
    assert_eq!(
        format!("{:?}", config.database_url().unwrap()),
        "DatabaseUrl(\"sqlite:///data/agentd.db\")"
    );
}

#[test]
fn secrets_come_from_a_variable_or_a_file() {
    let dir = std::env::temp_dir().join(format!("agentd-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("jwt");
    std::fs::write(&file, "from-file\n").unwrap();
    let path = file.to_string_lossy().into_owned();
    let config = load(Flags::default(), &[("AGENTD_AUTH__JWT_SECRET_FILE", &path)]).unwrap();
    assert_eq!(config.jwt_secret.unwrap().expose_secret(), "from-file");
    let config = load(Flags::default(), &[("AGENTD_AUTH__JWT_SECRET", "direct")]).unwrap();
    assert_eq!(config.jwt_secret.unwrap().expose_secret(), "direct");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn discord_settings_come_from_nested_variables() {
    let vars = [
        ("AGENTD_DISCORD__API_BASE", "http://127.0.0.1:9/api/v10"),
        ("AGENTD_DISCORD__CLIENT_ID", "42"),
        ("AGENTD_DISCORD__BOT_TOKEN", "bot"),
        ("AGENTD_SECRET_KEY", "ab"),
    ];
    let config = load(Flags::default(), &vars).unwrap();
    assert_eq!(config.discord.api_base, "http://127.0.0.1:9/api/v10");
    assert_eq!(config.discord.client_id.as_deref(), Some("42"));
    assert_eq!(config.discord.bot_token.unwrap().expose_secret(), "bot");
    assert!(config.discord.client_secret.is_none());
    assert_eq!(config.secret_key.unwrap().expose_secret(), "ab");
    assert_eq!(
        load(Flags::default(), &[]).unwrap().discord.api_base,
        "https://discord.com/api/v10"
    );
}

#[test]
fn model_settings_fall_back_to_the_providers_own_variables() {
    let config = load(
        Flags::default(),
        &[("OPENAI_API_KEY", "sk-plain"), ("AGENTD_MODELS__DEFAULT", "openai:gpt-4o-mini")],
    )
    .unwrap();
    assert_eq!(config.models.default, "openai:gpt-4o-mini");
    let key = |config: &Config, name: &str| {
        config.models.providers[name].api_key.as_ref().map(|k| k.expose_secret().to_owned())
    };
    assert_eq!(key(&config, "openai").as_deref(), Some("sk-plain"));
    let config = load(
        Flags::default(),
        &[("OPENAI_API_KEY", "sk-plain"), ("AGENTD_MODELS__OPENAI_API_KEY", "sk-ours")],
    )
    .unwrap();
    assert_eq!(key(&config, "openai").as_deref(), Some("sk-ours"));
    let config = load(Flags::default(), &[("AGENTD_MODELS__TIMEOUT_SECONDS", "2.5")]).unwrap();
    assert_eq!(config.models.timeout, Duration::from_millis(2500));
    assert_eq!(load(Flags::default(), &[]).unwrap().models.default, "echo");
    assert!(load(Flags::default(), &[("AGENTD_MODELS__TIMEOUT_SECONDS", "0")]).is_err());
}

#[test]
fn providers_are_configured_by_name_in_the_file_or_the_environment() {
    let file = File::new(
        "providers.toml",
        r#"
        [models]
        default = "ollama:llama3.1"
        openai_api_key = "sk-legacy"
        [models.providers.ollama]
        kind = "openai"
        base_url = "http://127.0.0.1:11434/v1"
        [models.providers.anthropic]
        base_url = "http://127.0.0.1:9/anthropic"
        "#,
    );
    let env = [
        ("AGENTD_MODELS__PROVIDERS__OPENROUTER__KIND", "openai"),
        ("AGENTD_MODELS__PROVIDERS__OPENROUTER__BASE_URL", "https://openrouter.ai/api/v1"),
        ("AGENTD_MODELS__PROVIDERS__OPENROUTER__API_KEY", "sk-or"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
    ];
    let config = load(file.flags(), &env).unwrap();
    let providers = &config.models.providers;
    let names: Vec<&str> = providers.keys().map(String::as_str).collect();
    assert_eq!(names, ["anthropic", "ollama", "openai", "openrouter"]);
    let ollama = &providers["ollama"];
    assert_eq!(ollama.kind, "openai");
    assert_eq!(ollama.base_url.as_deref(), Some("http://127.0.0.1:11434/v1"));
    assert!(ollama.api_key.is_none(), "a local server needs no key");
    let openrouter = &providers["openrouter"];
    assert_eq!(openrouter.api_key.as_ref().unwrap().expose_secret(), "sk-or");
    // The settings from before the registry configure the default providers...
    assert_eq!(providers["openai"].api_key.as_ref().unwrap().expose_secret(), "sk-legacy");
    assert_eq!(providers["openai"].effective_base_url(), Some("https://api.openai.com/v1"));
    assert_eq!(providers["anthropic"].api_key.as_ref().unwrap().expose_secret(), "sk-ant");
    // ...and a provider's own table wins over them.
    let env = [("AGENTD_MODELS__PROVIDERS__OPENAI__API_KEY", "sk-table")];
    let config = load(file.flags(), &env).unwrap();
    let openai = &config.models.providers["openai"];
    assert_eq!(openai.api_key.as_ref().unwrap().expose_secret(), "sk-table");
    assert_eq!(config.models.providers["anthropic"].kind, "anthropic");

    let shown = load(file.flags(), &[]).unwrap().effective().unwrap();
    assert!(shown.contains("[models.providers.ollama]"), "{shown}");
    assert!(!shown.contains("sk-legacy") && !shown.contains("openai_api_key"), "{shown}");

    for (vars, expected) in [
        (
            [("AGENTD_MODELS__PROVIDERS__LOCAL__BASE_URL", "http://127.0.0.1:1/v1")],
            "models.providers.local.kind: missing",
        ),
        ([("AGENTD_MODELS__PROVIDERS__ECHO__KIND", "openai")], "models.providers.echo:"),
        (
            [("AGENTD_MODELS__PROVIDERS__9LIVES__KIND", "openai")],
            "models.providers.9lives: '9lives' is not a provider name",
        ),
        (
            [("AGENTD_MODELS__PROVIDERS__OPENAI__BASE_URL", "api.openai.com")],
            "models.providers.openai.base_url",
        ),
    ] {
        let error = load(Flags::default(), &vars).unwrap_err().to_string();
        assert!(error.contains(expected), "{vars:?}: {error}");
    }
    let misspelt = File::new(
        "misspelt.toml",
        "[models.providers.ollama]
kind = 'openai'
baseurl = 'x'
",
    );
    let error = load(misspelt.flags(), &[]).unwrap_err().to_string();
    assert!(error.contains("'models.providers.ollama.baseurl' is not a setting"), "{error}");
}

#[test]
fn runtime_settings_have_documented_names_and_defaults() {
    let defaults = load(Flags::default(), &[]).unwrap().runtime;
    assert_eq!(defaults.max_concurrent_calls, 64);
    assert_eq!(defaults.lease, Duration::from_secs(30));
    assert_eq!(defaults.shutdown_grace, Duration::from_secs(30));
    let config = load(
        Flags::default(),
        &[
            ("AGENTD_RUNTIME__MAX_CONCURRENT_CALLS", "8"),
            ("AGENTD_RUNTIME__LEASE_SECONDS", "2.5"),
            ("AGENTD_RUNTIME__SHUTDOWN_GRACE_SECONDS", "0"),
            ("AGENTD_MODELS__MAX_TOKENS", "256"),
        ],
    )
    .unwrap();
    assert_eq!(config.runtime.max_concurrent_calls, 8);
    assert_eq!(config.runtime.lease, Duration::from_millis(2500));
    assert_eq!(config.runtime.shutdown_grace, Duration::ZERO);
    assert_eq!(config.models.max_tokens, 256);
    for (name, value) in [
        ("AGENTD_RUNTIME__MAX_CONCURRENT_CALLS", "0"),
        ("AGENTD_RUNTIME__MAX_CONCURRENT_CALLS", "lots"),
        ("AGENTD_RUNTIME__LEASE_SECONDS", "0"),
        ("AGENTD_RUNTIME__SHUTDOWN_GRACE_SECONDS", "-1"),
    ] {
        let error = load(Flags::default(), &[(name, value)]).unwrap_err();
        let key = name.trim_start_matches("AGENTD_").replace("__", ".").to_lowercase();
        assert!(error.to_string().contains(&key), "{error}");
    }
}

/// A file in a directory of its own, removed with the guard.
pub(super) struct File(PathBuf);

impl File {
    pub(super) fn new(name: &str, text: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("agentd-config-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        Self(path)
    }

    pub(super) fn flags(&self) -> Flags {
        Flags { config: Some(self.0.clone()), ..Flags::default() }
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

const FILE: &str = r#"
    bind = "127.0.0.1:7001"
    data_dir = "/file/dir"
    [runtime]
    lease_seconds = 12
    poll_seconds = 0.5
    [billing]
    plans = { free = 2, pro = 20 }
    prices = { price_1Pro = "pro" }
    webhook_secrets = ["whsec_a", "whsec_b"]
    [http]
    cors_origins = ["https://app.example.com"]
    trust_forwarded_for = true
    [limits]
    auth_per_minute = 0
"#;

#[test]
fn the_file_is_overridden_by_the_environment_and_the_environment_by_flags() {
    let file = File::new("layers.toml", FILE);
    let config = load(file.flags(), &[]).unwrap();
    assert_eq!(config.bind.to_string(), "127.0.0.1:7001");
    assert_eq!(config.runtime.lease, Duration::from_secs(12));
    assert_eq!(config.runtime.poll, Duration::from_millis(500));
    assert_eq!(config.billing.plans.limit("free"), 2);
    assert_eq!(config.billing.prices["price_1Pro"], "pro");
    assert_eq!(config.billing.webhook_secrets.len(), 2);
    assert_eq!(config.http.cors_origins, ["https://app.example.com"]);
    assert!(config.http.trust_forwarded_for);
    assert_eq!(config.limits.auth_per_minute, 0);
    assert_eq!(config.limits.requests_per_minute, LimitsConfig::default().requests_per_minute);
    assert_eq!(config.file.as_deref(), Some(file.0.as_path()));

    let env = [
        ("AGENTD_BIND", "127.0.0.1:7002"),
        ("AGENTD_RUNTIME__LEASE_SECONDS", "13"),
        ("AGENTD_HTTP__CORS_ORIGINS", "https://a.example, https://b.example"),
    ];
    let config = load(file.flags(), &env).unwrap();
    assert_eq!(config.bind.to_string(), "127.0.0.1:7002");
    assert_eq!(config.runtime.lease, Duration::from_secs(13));
    assert_eq!(config.http.cors_origins, ["https://a.example", "https://b.example"]);
    assert_eq!(config.data_dir.as_deref(), Some(Path::new("/file/dir")));

    let flags = Flags { bind: Some("127.0.0.1:7003".into()), ..file.flags() };
    assert_eq!(load(flags, &env).unwrap().bind.to_string(), "127.0.0.1:7003");
    // The file can also be named by AGENTD_CONFIG.
    let path = file.0.display().to_string();
    let config = load(Flags::default(), &[("AGENTD_CONFIG", &path)]).unwrap();
    assert_eq!(config.bind.to_string(), "127.0.0.1:7001");
}

#[test]
fn secrets_in_the_file_lose_to_the_environment_in_either_form() {
    let secret = File::new("jwt", "from-secret-file\n");
    let text = format!("[auth]\njwt_secret_file = '{}'\n", secret.0.display());
    let file = File::new("secrets.toml", &text);
    let config = load(file.flags(), &[]).unwrap();
    assert_eq!(config.jwt_secret.unwrap().expose_secret(), "from-secret-file");
    let config = load(file.flags(), &[("AGENTD_AUTH__JWT_SECRET", "from-env")]).unwrap();
    assert_eq!(config.jwt_secret.unwrap().expose_secret(), "from-env");
}

#[test]
fn a_bad_file_is_refused_with_the_place_named() {
    let missing = Flags { config: Some("/nonexistent/agentd.toml".into()), ..Flags::default() };
    assert!(load(missing, &[]).unwrap_err().to_string().contains("/nonexistent/agentd.toml"));
    for (text, named) in [
        ("[runtime]\nlease_secs = 3\n", "runtime.lease_secs"),
        ("bind = ", "not valid TOML"),
        ("[runtime]\nlease_seconds = 0\n", "runtime.lease_seconds"),
        ("[http]\ncors_origins = [[1]]\n", "http.cors_origins"),
        ("[log]\nformat = 'xml'\n", "log.format"),
        ("[http]\ncors_origins = ['app.example.com']\n", "http.cors_origins"),
        ("[http]\ncors_origins = ['https://app.example.com/path']\n", "http.cors_origins"),
    ] {
        let file = File::new("bad.toml", text);
        let error = load(file.flags(), &[]).unwrap_err().to_string();
        assert!(error.contains(named), "{text:?}: {error}");
    }
}

#[test]
fn unknown_variables_are_reported_with_the_closest_name() {
    let config = load(Flags::default(), &[]).unwrap();
    let names = [
        "AGENTD_RUNTIME__LEASE_SECOND",
        "AGENTD_BIND",
        "AGENTD_LOG",
        "AGENTD_CONFIG",
        "AGENTD_AUTH__JWT_SECRET_FILE",
        "AGENTD_COMPLETELY_UNRELATED",
        "HOME",
    ];
    let unknown = config.unknown_variables(names.map(String::from));
    assert_eq!(
        unknown,
        [
            "AGENTD_RUNTIME__LEASE_SECOND (did you mean AGENTD_RUNTIME__LEASE_SECONDS?)",
            "AGENTD_COMPLETELY_UNRELATED"
        ]
    );
}

#[test]
fn the_effective_configuration_hides_secrets_and_reads_back_the_same() {
    let env = [
        ("AGENTD_AUTH__JWT_SECRET", "super-secret-jwt-value"),
        ("AGENTD_DATABASE_URL", "postgres://agentd:hunter2@db.internal/agentd"),
        ("AGENTD_MODELS__OPENAI_API_KEY", "sk-very-secret"),
    ];
    let file = File::new("effective.toml", FILE);
    let shown = load(file.flags(), &env).unwrap().effective().unwrap();
    for secret in ["super-secret-jwt-value", "hunter2", "sk-very-secret", "whsec_a"] {
        assert!(!shown.contains(secret), "{secret} shown:\n{shown}");
    }
    assert!(shown.contains("jwt_secret = \"<redacted>\""), "{shown}");
    assert!(shown.contains("lease_seconds = 12"), "{shown}");

    let plain = load(file.flags(), &[]).unwrap().effective().unwrap();
    let again = File::new("again.toml", &plain);
    let reread = load(again.flags(), &[]).unwrap().effective().unwrap();
    let body =
        |text: &str| text.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&reread), body(&plain), "agentd config's output is a configuration file");
}

#[test]
fn logging_is_configured_and_agentd_log_is_its_shorthand() {
    let file = File::new("log.toml", "[log]\nfilter = 'debug'\nformat = 'json'\n");
    let config = load(file.flags(), &[]).unwrap();
    assert_eq!((config.log.filter.as_str(), config.log.json), ("debug", true));
    let config = load(file.flags(), &[("AGENTD_LOG", "warn")]).unwrap();
    assert_eq!(config.log.filter, "warn", "the environment wins over the file");
    assert_eq!(load(Flags::default(), &[]).unwrap().log, LogConfig::default());
}

#[test]
fn bad_values_are_named() {
    let error = load(Flags { bind: Some("nowhere".into()), ..Flags::default() }, &[]).unwrap_err();
    assert!(error.to_string().contains("bind"), "{error}");
    let error = load(Flags::default(), &[("AGENTD_DATABASE_URL", "mysql://x")]).unwrap_err();
    assert!(error.to_string().contains("database_url"), "{error}");
    let error = load(Flags::default(), &[("AGENTD_AUTH__TOKEN_TTL_SECONDS", "soon")]).unwrap_err();
    assert!(error.to_string().contains("token_ttl_seconds"), "{error}");
}

#[test]
fn mcp_servers_are_configured_by_name_with_either_transport() {
    let secret = File::new("github-header", "Bearer from-file\n");
    let header = &secret.0;
    let file = File::new(
        "mcp.toml",
        &format!(
            r#"
            [mcp.servers.files]
            command = "npx"
            args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/a,b"]
            env = {{ GITHUB_TOKEN = "ghp-secret", CONFIG_FILE = "/etc/x" }}
            [mcp.servers.github]
            url = "https://mcp.example.com/github"
            headers = {{ X_Api_Key = "key-1", Authorization_file = "{}" }}
            timeout_seconds = 5
            "#,
            header.display()
        ),
    );
    let config = load(file.flags(), &[]).unwrap();
    let servers = &config.mcp.servers;
    let names: Vec<&str> = servers.keys().map(|n| n.as_str()).collect();
    assert_eq!(names, ["files", "github"]);
    let files = &servers[&McpServerName::parse("files").unwrap()];
    let (command, args, env) = stdio(&files.transport).unwrap();
    assert_eq!(command, "npx");
    assert_eq!(args, &["-y", "@modelcontextprotocol/server-filesystem", "/srv/a,b"]);
    assert_eq!(env["GITHUB_TOKEN"].expose_secret(), "ghp-secret");
    assert_eq!(env["CONFIG_FILE"].expose_secret(), "/etc/x", "a program's own _FILE variable");
    assert_eq!(files.timeout, McpServerConfig::DEFAULT_TIMEOUT);
    let github = &servers[&McpServerName::parse("github").unwrap()];
    let McpTransport::Http { url, headers } = &github.transport else { unreachable!("http") };
    assert_eq!(url, "https://mcp.example.com/github");
    assert_eq!(headers["x-api-key"].expose_secret(), "key-1");
    assert_eq!(headers["authorization"].expose_secret(), "Bearer from-file");
    assert_eq!(github.timeout, Duration::from_secs(5));
    let shown = config.effective().unwrap();
    for secret in ["ghp-secret", "key-1", "from-file"] {
        assert!(!shown.contains(secret), "{secret} shown:\n{shown}");
    }

    let env = [
        ("AGENTD_MCP__SERVERS__CALC__COMMAND", "calc"),
        ("AGENTD_MCP__SERVERS__CALC__ARGS", r#"["a,b", "c"]"#),
    ];
    let config = load(Flags::default(), &env).unwrap();
    let calc = &config.mcp.servers[&McpServerName::parse("calc").unwrap()];
    let (_, args, _) = stdio(&calc.transport).unwrap();
    assert_eq!(args, &["a,b", "c"]);
    for (vars, problem) in [
        (vec![("AGENTD_MCP__SERVERS__X__TIMEOUT_SECONDS", "3")], "missing command"),
        (
            vec![
                ("AGENTD_MCP__SERVERS__X__COMMAND", "a"),
                ("AGENTD_MCP__SERVERS__X__URL", "http://x/"),
            ],
            "not both",
        ),
        (vec![("AGENTD_MCP__SERVERS__X__URL", "ftp://x/")], "mcp.servers.x.url"),
        (vec![("AGENTD_MCP__SERVERS__X_Y__URL", "http://x/")], "not a server name"),
    ] {
        let error = load(Flags::default(), &vars).unwrap_err().to_string();
        assert!(error.contains(problem), "{vars:?}: {error}");
    }
}

type Stdio<'a> = (&'a String, &'a Vec<String>, &'a BTreeMap<String, SecretString>);

fn stdio(transport: &McpTransport) -> Option<Stdio<'_>> {
    match transport {
        McpTransport::Stdio { command, args, env } => Some((command, args, env)),
        McpTransport::Http { .. } => None,
    }
}
