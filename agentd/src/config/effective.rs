//! `agentd config`: the effective configuration, as a TOML file that reads back the same.

use toml::{Table, Value};

use super::settings::{self, number};
use super::{Config, ConfigError};

impl Config {
    /// The effective configuration as a TOML document, secrets shown as `<redacted>` and unset
    /// settings left out (`agentd config`).
    pub fn effective(&self) -> Result<String, ConfigError> {
        let text = |value: &str| Value::String(value.to_owned());
        let mut root = Table::new();
        root.insert("bind".into(), text(&self.bind.to_string()));
        root.insert("database_url".into(), text(&self.database_url()?.redacted()));
        root.insert("data_dir".into(), text(&self.data_dir()?.display().to_string()));
        settings::show(self, &mut root);
        super::models::show(&self.models, &mut root);
        super::mcp::show(&self.mcp, &mut root);

        let billing = &self.billing;
        if !billing.webhook_secrets.is_empty() {
            let redacted = billing.webhook_secrets.iter().map(|_| text("<redacted>"));
            settings::insert(
                &mut root,
                "billing.webhook_secrets",
                Value::Array(redacted.collect()),
            );
        }
        let plans = billing.plans.iter().map(|(name, limit)| (name.into(), number(limit)));
        settings::insert(&mut root, "billing.plans", Value::Table(plans.collect()));
        let prices = billing.prices.iter().map(|(price, plan)| (price.clone(), text(plan)));
        settings::insert(&mut root, "billing.prices", Value::Table(prices.collect()));
        for (plan, own) in &billing.plan_quotas {
            let counts = [
                ("schedules_per_agent", own.schedules_per_agent),
                ("schedules_per_user", own.schedules_per_user),
                ("queued_tasks_per_agent", own.queued_tasks_per_agent),
                ("queued_tasks_per_user", own.queued_tasks_per_user),
                ("mcp_servers_per_user", own.mcp_servers_per_user),
            ];
            for (quota, value) in counts {
                if let Some(value) = value {
                    let key = format!("billing.plan_quotas.{plan}.{quota}");
                    settings::insert(&mut root, &key, number(value));
                }
            }
            if let Some(period) = own.min_enqueue_period {
                let key = format!("billing.plan_quotas.{plan}.min_enqueue_period_seconds");
                settings::insert(&mut root, &key, settings::seconds(period));
            }
        }

        settings::insert(&mut root, "log.filter", text(&self.log.filter));
        settings::insert(
            &mut root,
            "log.format",
            text(if self.log.json { "json" } else { "text" }),
        );

        let source = match &self.file {
            Some(path) => format!("# with {}\n", path.display()),
            None => "# no configuration file\n".into(),
        };
        Ok(format!("# agentd's effective configuration\n{source}\n{root}"))
    }
}
