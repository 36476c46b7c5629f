//! Rules shared by the text fields of the domain.

/// Counts characters, not bytes: a limit of 100 means 100 characters in any script.
pub(crate) fn char_len(value: &str) -> usize {
    value.chars().count()
}

/// A single-line field: no control characters, `min..=max` characters.
pub(crate) fn line(value: &str, min: usize, max: usize) -> Result<String, String> {
    if value.chars().any(char::is_control) {
        return Err("must not contain control characters or line breaks".into());
    }
    text(value, min, max)
}

/// A free-text field: any characters but NUL, `min..=max` characters.
pub(crate) fn text(value: &str, min: usize, max: usize) -> Result<String, String> {
    if value.contains('\0') {
        return Err("must not contain NUL characters".into());
    }
    let len = char_len(value);
    if len < min {
        return Err(if min == 1 {
            "must not be empty".into()
        } else {
            format!("must be at least {min} characters")
        });
    }
    if len > max {
        return Err(format!("must be at most {max} characters"));
    }
    Ok(value.to_owned())
}

/// Like [`line`], but a field of only white space counts as empty.
pub(crate) fn non_blank_line(value: &str, max: usize) -> Result<String, String> {
    if value.trim().is_empty() {
        return Err("must not be empty".into());
    }
    line(value, 1, max)
}

/// Declares a text newtype whose only constructor is `parse`, with the rule `check`.
macro_rules! text_newtype {
    ($(#[$meta:meta])* $name:ident, $check:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub struct $name(String);

        impl $name {
            pub fn parse(value: &str) -> Result<Self, String> {
                let check: fn(&str) -> Result<String, String> = $check;
                check(value).map(Self)
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_inner(self) -> String {
                self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(&self.0)
            }
        }
    };
}
pub(crate) use text_newtype;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_count_characters_not_bytes() {
        assert!(line(&"é".repeat(100), 1, 100).is_ok());
        assert!(line(&"é".repeat(101), 1, 100).is_err());
    }

    #[test]
    fn single_lines_refuse_line_breaks_but_text_keeps_them() {
        assert!(line("a\nb", 1, 10).is_err());
        assert!(text("a\nb", 1, 10).is_ok());
        assert!(text("a\0b", 1, 10).is_err());
    }

    #[test]
    fn blank_names_are_empty() {
        assert_eq!(non_blank_line("   ", 10).unwrap_err(), "must not be empty");
    }
}
