//! How a caller names a session: a selector.
//!
//! Wherever a request names a session (`session_id`, `parent`, `split_target`), it may give:
//!
//! - a full session id, in any case (`1a2b3c4d-…`): that session;
//! - a prefix of an id, at least [`SELECTOR_PREFIX_MIN_HEX`] hex digits (what `maxx ls`
//!   shows; dashes where the id has them), in any case: the one session whose id starts so;
//! - `%` and a title (`%build`): the one session whose `title` is exactly that.
//!
//! A prefix or a title is resolved by the daemon against its own table, after the request
//! is authorized and before it is routed, so every client (the CLI, the MCP server, a
//! script) gets the same answer. It must name exactly one session: none is `not_found`,
//! several is `ambiguous`, and the error lists the candidates. Nothing else is guessed: a
//! selector is never matched against anything but ids and titles.

use crate::limits::TITLE_MAX_CHARS;
use serde_json::Value;

/// The fewest hex digits a prefix selector has.
pub const SELECTOR_PREFIX_MIN_HEX: usize = 4;

/// The params fields that name a session and so take a selector.
pub const SESSION_FIELDS: [&str; 3] = ["session_id", "parent", "split_target"];

/// Candidates an `ambiguous` error lists at most.
pub const AMBIGUOUS_LISTED_MAX: usize = 10;

/// A parsed selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// A full id, canonical (uppercase).
    Id(String),
    /// A prefix of an id, uppercase.
    Prefix(String),
    /// An exact title (without the `%`).
    Title(String),
}

impl Selector {
    /// Parse `text`, or `None` if it is not a selector.
    pub fn parse(text: &str) -> Option<Selector> {
        if let Some(title) = text.strip_prefix('%') {
            let n = title.chars().count();
            return (n > 0 && n <= TITLE_MAX_CHARS && !title.contains('\0'))
                .then(|| Selector::Title(title.to_string()));
        }
        let bytes = text.as_bytes();
        if bytes.len() == 36 && is_id_prefix(bytes) {
            return Some(Selector::Id(text.to_ascii_uppercase()));
        }
        let hex = bytes.iter().filter(|b| b.is_ascii_hexdigit()).count();
        (bytes.len() < 36 && hex >= SELECTOR_PREFIX_MIN_HEX && is_id_prefix(bytes))
            .then(|| Selector::Prefix(text.to_ascii_uppercase()))
    }

    /// The selector as the daemon carries it until it is resolved: the canonical id, the
    /// uppercase prefix, or `%title`.
    pub fn to_wire(&self) -> String {
        match self {
            Selector::Id(id) | Selector::Prefix(id) => id.clone(),
            Selector::Title(t) => format!("%{t}"),
        }
    }

    /// Whether `id` (canonical) and `title` match this selector.
    pub fn matches(&self, id: &str, title: Option<&str>) -> bool {
        match self {
            Selector::Id(s) => id == s,
            Selector::Prefix(p) => id.starts_with(p.as_str()),
            Selector::Title(t) => title == Some(t.as_str()),
        }
    }
}

/// Whether `bytes` has the shape of the start of a hyphenated UUID: hex digits, with a dash
/// exactly at offsets 8, 13, 18 and 23.
fn is_id_prefix(bytes: &[u8]) -> bool {
    bytes.iter().enumerate().all(|(i, b)| match i {
        8 | 13 | 18 | 23 => *b == b'-',
        _ => b.is_ascii_hexdigit(),
    })
}

/// The session-naming fields of a params object that hold a selector other than a full id:
/// what the daemon resolves before routing.
pub fn unresolved(params: &Value) -> Vec<(&'static str, Selector)> {
    SESSION_FIELDS
        .iter()
        .filter_map(|&field| {
            let text = params.get(field)?.as_str()?;
            match Selector::parse(text)? {
                Selector::Id(_) => None,
                other => Some((field, other)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ID: &str = "1A2B3C4D-5E6F-4A0B-8C9D-0123456789AB";

    #[test]
    fn the_grammar() {
        assert_eq!(
            Selector::parse(&ID.to_lowercase()),
            Some(Selector::Id(ID.into()))
        );
        assert_eq!(
            Selector::parse("1a2b"),
            Some(Selector::Prefix("1A2B".into()))
        );
        assert_eq!(
            Selector::parse("1a2b3c4d-5e"),
            Some(Selector::Prefix("1A2B3C4D-5E".into()))
        );
        assert_eq!(
            Selector::parse("%build 1"),
            Some(Selector::Title("build 1".into()))
        );
        // Too short, not hex, a dash out of place, an empty or over-long title, 37 chars.
        for bad in [
            "1a2",
            "",
            "zzzz",
            "1a2b-3c",
            "%",
            &format!("%{}", "t".repeat(TITLE_MAX_CHARS + 1)),
            &format!("{ID}0"),
            "%a\0b",
        ] {
            assert_eq!(Selector::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn matching_is_exact_for_titles_and_ids_and_a_prefix_for_prefixes() {
        let title = Some("build");
        assert!(Selector::parse("1a2b").unwrap().matches(ID, title));
        assert!(!Selector::parse("1a2c").unwrap().matches(ID, title));
        assert!(Selector::parse("%build").unwrap().matches(ID, title));
        assert!(!Selector::parse("%buil").unwrap().matches(ID, title));
        assert!(!Selector::parse("%build").unwrap().matches(ID, None));
        assert!(Selector::parse(ID).unwrap().matches(ID, None));
    }

    #[test]
    fn only_session_fields_holding_a_short_selector_are_unresolved() {
        let params = json!({
            "session_id": "abcd",
            "parent": ID,
            "split_target": "%t",
            "title": "%not-a-field",
        });
        assert_eq!(
            unresolved(&params),
            vec![
                ("session_id", Selector::Prefix("ABCD".into())),
                ("split_target", Selector::Title("t".into())),
            ]
        );
        assert!(unresolved(&json!({"parent": ""})).is_empty());
    }
}
