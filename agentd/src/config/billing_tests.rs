//! Billing's settings: plans, prices, webhook secrets and plans' own quotas.

use super::Flags;
use super::tests::load;

#[test]
fn billing_settings_parse_plans_prices_and_secrets() {
    let defaults = load(Flags::default(), &[]).unwrap().billing;
    assert_eq!(defaults.plans.limit("pro"), 25);
    assert!(defaults.webhook_secrets.is_empty());
    let config = load(
        Flags::default(),
        &[
            ("AGENTD_BILLING__PLANS", "free=1,pro=9"),
            ("AGENTD_BILLING__PRICES", "price_1Pro=pro, pro_monthly=pro"),
            ("AGENTD_BILLING__WEBHOOK_SECRETS", "whsec_old,whsec_new"),
        ],
    )
    .unwrap()
    .billing;
    assert_eq!(config.plans.limit("pro"), 9);
    assert_eq!(config.prices["pro_monthly"], "pro");
    assert_eq!(config.webhook_secrets.len(), 2);
    let error = load(Flags::default(), &[("AGENTD_BILLING__PRICES", "price_1=gold")]).unwrap_err();
    assert!(error.to_string().contains("billing.prices"), "{error}");
    let error = load(Flags::default(), &[("AGENTD_BILLING__PLANS", "pro=3")]).unwrap_err();
    assert!(error.to_string().contains("billing.plans"), "{error}");
}

#[test]
fn plans_may_have_quotas_of_their_own() {
    let config = load(
        Flags::default(),
        &[
            ("AGENTD_QUOTAS__SCHEDULES_PER_AGENT", "4"),
            ("AGENTD_BILLING__PLAN_QUOTAS__TEAM__SCHEDULES_PER_AGENT", "40"),
            ("AGENTD_BILLING__PLAN_QUOTAS__TEAM__MIN_ENQUEUE_PERIOD_SECONDS", "60"),
        ],
    )
    .unwrap();
    assert_eq!(config.quotas.schedules_per_agent, 4);
    let team = &config.billing.plan_quotas["team"];
    assert_eq!(team.schedules_per_agent, Some(40));
    assert_eq!(team.min_enqueue_period, Some(std::time::Duration::from_secs(60)));
    assert_eq!(team.queued_tasks_per_agent, None);
    assert!(!config.billing.plan_quotas.contains_key("free"));
    let shown = config.effective().unwrap();
    assert!(shown.contains("schedules_per_agent = 40"), "{shown}");
    let error =
        load(Flags::default(), &[("AGENTD_BILLING__PLAN_QUOTAS__GOLD__SCHEDULES_PER_AGENT", "9")])
            .unwrap_err();
    assert!(error.to_string().contains("'gold' is not a plan"), "{error}");
}
