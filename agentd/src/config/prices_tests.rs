//! `models.prices`: two-part prices with their kind's cache rates, four-part prices as given,
//! and the forms refused.

use agentcore::domain::budget::Price;

use super::Flags;
use super::tests::load;

fn prices(value: &str) -> Result<std::collections::BTreeMap<String, Price>, String> {
    load(Flags::default(), &[("AGENTD_MODELS__PRICES", value)])
        .map(|config| config.models.prices)
        .map_err(|e| e.to_string())
}

fn price(input: i64, output: i64, cache_read: i64, cache_write: i64) -> Price {
    Price { input, output, cache_read, cache_write }
}

#[test]
fn four_part_prices_give_the_cache_rates_and_two_part_ones_take_their_kinds() {
    let parsed = prices(
        "anthropic:claude-x=3/15/0.30/3.75, anthropic:claude-y=1/5, openai:gpt-x=0.40/1.60, \
         openai:gpt-y=2/8/0.5/2",
    )
    .unwrap();
    assert_eq!(parsed["anthropic:claude-x"], price(3_000_000, 15_000_000, 300_000, 3_750_000));
    // Anthropic: reads a tenth of the input rate, writes a quarter more.
    assert_eq!(parsed["anthropic:claude-y"], price(1_000_000, 5_000_000, 100_000, 1_250_000));
    // OpenAI: cached input at half the input rate, writes at the input rate.
    assert_eq!(parsed["openai:gpt-x"], price(400_000, 1_600_000, 200_000, 400_000));
    assert_eq!(parsed["openai:gpt-y"], price(2_000_000, 8_000_000, 500_000, 2_000_000));
    // The examples carry their providers' published cache rates.
    let sonnet = prices("").unwrap()["anthropic:claude-sonnet-4-5"];
    assert_eq!(sonnet, price(3_000_000, 15_000_000, 300_000, 3_750_000));
    // A provider of an unknown kind (refused later) or none: no discount, no surcharge.
    let unknown = prices("nowhere:m=1/2").unwrap()["nowhere:m"];
    assert_eq!(unknown, price(1_000_000, 2_000_000, 1_000_000, 1_000_000));
}

#[test]
fn the_effective_configuration_shows_all_four_rates() {
    let vars = [("AGENTD_MODELS__PRICES", "anthropic:claude-y=1/5")];
    let shown = load(Flags::default(), &vars).unwrap().effective().unwrap();
    assert!(shown.contains(r#""anthropic:claude-y" = "1/5/0.1/1.25""#), "{shown}");
}

#[test]
fn bad_price_forms_are_refused_by_the_setting() {
    for (value, expected) in [
        ("openai:gpt-x=1/2/3", "is not <provider>:<model>=<input>/<output>[/<cache_read>/"),
        ("openai:gpt-x=1/2/3/4/5", "is not <provider>:<model>"),
        ("openai:gpt-x=1/2/x/4", "is not <provider>:<model>"),
        ("openai:gpt-x", "is not <provider>:<model>"),
        ("openai:gpt-x=1/2/-0.1/4", r#"models.prices."openai:gpt-x": -0.1 is not a price"#),
        ("openai:gpt-x=1/2/0.1/2000000", r#"models.prices."openai:gpt-x": 2000000 is not"#),
    ] {
        let error = prices(value).unwrap_err();
        assert!(error.contains(expected), "{value}: {error}");
    }
}
