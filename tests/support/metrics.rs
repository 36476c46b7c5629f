//! Reading `/metrics`: Prometheus' text format, as a test or benchmark asserts on it.

use std::collections::HashMap;

/// The samples of a Prometheus text exposition, `name{labels}` → value, after checking every
/// line's shape (a TYPE line for each name, labels in braces, no series twice).
pub fn metric_samples(text: &str) -> HashMap<String, f64> {
    let mut samples = HashMap::new();
    let mut typed = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            typed.push(name.to_owned());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value: {line}"));
        let name = series.split('{').next().unwrap();
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{line}");
        assert!(
            typed.iter().any(|t| name == t
                || name
                    .strip_prefix(t.as_str())
                    .is_some_and(|s| ["_bucket", "_sum", "_count"].contains(&s))),
            "{name} has no TYPE line"
        );
        if let Some(labels) = series.strip_prefix(name) {
            assert!(
                labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}')),
                "{line}"
            );
        }
        assert!(samples.insert(series.to_owned(), value).is_none(), "{series} twice");
    }
    samples
}

/// The value of `series` (name and labels, as printed); a series that is not there fails with
/// the list of those that are.
pub fn sample(samples: &HashMap<String, f64>, series: &str) -> f64 {
    *samples.get(series).unwrap_or_else(|| {
        let mut known: Vec<_> = samples.keys().collect();
        known.sort();
        panic!("{series} missing; have {known:#?}")
    })
}
