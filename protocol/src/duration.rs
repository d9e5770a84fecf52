//! Durations on the wire and on the command line: `ms`/`s`/`m`/`h` suffixes, a bare
//! number is seconds (`30` = `30s`), anything humantime accepts (`1m30s`).

use std::time::Duration;

/// Parse a duration; a bare non-negative number (integer or decimal) means seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = text
            .parse()
            .map_err(|_| format!("invalid duration {text:?}"))?;
        if !secs.is_finite() || secs > 1e12 {
            return Err(format!("duration {text:?} is out of range"));
        }
        return Ok(Duration::from_secs_f64(secs));
    }
    humantime::parse_duration(text).map_err(|e| format!("invalid duration {text:?}: {e}"))
}

/// Decode a duration param that may be a JSON number of seconds or a duration string.
pub fn duration_from_json(value: &serde_json::Value) -> Result<Duration, String> {
    match value {
        serde_json::Value::Number(n) => match n.as_f64() {
            Some(secs) if secs >= 0.0 && secs.is_finite() && secs <= 1e12 => {
                Ok(Duration::from_secs_f64(secs))
            }
            _ => Err(format!("duration {n} is out of range")),
        },
        serde_json::Value::String(s) => parse_duration(s),
        other => Err(format!(
            "a duration must be a number of seconds or a string like \"30s\", got {other}"
        )),
    }
}

/// The JSON Schema of a duration param (`timeout`, `restart_window`): a number of seconds or
/// a duration string. Used by the `schemars` feature for the wire types' schemas; a field
/// using it also carries `#[serde(default)]` (a no-op for an `Option`), which is how the
/// derive knows the field is optional.
#[cfg(feature = "schemars")]
pub fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    // The field's own doc becomes the description (it names the default and the bound).
    schemars::json_schema!({ "type": ["number", "string"] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_number_is_seconds() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("0.5").unwrap(), Duration::from_millis(500));
    }

    #[test]
    fn suffixes() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_duration("").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("1.2.3").is_err());
    }

    #[test]
    fn json_forms() {
        use serde_json::json;
        assert_eq!(
            duration_from_json(&json!(2)).unwrap(),
            Duration::from_secs(2)
        );
        assert_eq!(
            duration_from_json(&json!("2s")).unwrap(),
            Duration::from_secs(2)
        );
        assert!(duration_from_json(&json!(-1)).is_err());
        assert!(duration_from_json(&json!(true)).is_err());
    }
}
