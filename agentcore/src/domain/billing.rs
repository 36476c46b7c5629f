//! Plans and what they allow.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The plan every user starts on, and falls back to when a subscription ends.
pub const FREE: &str = "free";

/// Plan names and how many agents each allows. Always has `free`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plans(BTreeMap<String, u32>);

impl Default for Plans {
    fn default() -> Self {
        let plans = [("free", 3), ("starter", 10), ("pro", 25), ("team", 100)];
        Self(plans.into_iter().map(|(name, limit)| (name.to_owned(), limit)).collect())
    }
}

impl Plans {
    /// `free=3,starter=10,...`: names of lowercase letters, digits, `-` and `_`; whole-number
    /// limits; `free` must be among them.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut plans = BTreeMap::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, limit) =
                pair.split_once('=').ok_or_else(|| format!("'{pair}' is not name=limit"))?;
            let name = name.trim();
            let valid = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
            if !valid {
                return Err(format!(
                    "'{name}' is not a plan name (lowercase letters, digits, - and _)"
                ));
            }
            let limit = limit
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("the limit of '{name}' is not a whole number"))?;
            if plans.insert(name.to_owned(), limit).is_some() {
                return Err(format!("'{name}' is given twice"));
            }
        }
        if !plans.contains_key(FREE) {
            return Err(format!("the '{FREE}' plan must be defined: every new user starts on it"));
        }
        Ok(Self(plans))
    }

    /// The agents `plan` allows; a plan no longer configured counts as `free`.
    pub fn limit(&self, plan: &str) -> u32 {
        self.0.get(plan).or_else(|| self.0.get(FREE)).copied().unwrap_or(0)
    }

    pub fn contains(&self, plan: &str) -> bool {
        self.0.contains_key(plan)
    }
}

/// A user's plan as `GET /api/billing` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Billing {
    pub plan: String,
    pub agent_limit: u32,
    pub agents_used: i64,
    pub subscription_status: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_parse_from_configuration_and_need_free() {
        let plans = Plans::parse("free=1, pro=50").unwrap();
        assert_eq!((plans.limit("free"), plans.limit("pro"), plans.limit("gone")), (1, 50, 1));
        assert_eq!(Plans::default().limit("team"), 100);
        for bad in ["pro=5", "free=x", "free", "Free=3", "free=1,free=2", "free=-1"] {
            assert!(Plans::parse(bad).is_err(), "{bad}");
        }
    }
}
