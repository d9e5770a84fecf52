//! The declared result schema: a JSON-Schema subset — `type`, `required`, `properties`,
//! `items`. Unknown keywords are ignored so the subset can grow; the schema itself is
//! validated when declared so a session never carries a contract maxx cannot enforce.

use serde_json::Value;

/// Deepest schema nesting accepted.
pub const MAX_SCHEMA_DEPTH: usize = 32;

const TYPES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Check that `schema` is a schema of the supported subset.
pub fn validate_schema(schema: &Value) -> Result<(), String> {
    validate_at(schema, "$", 0)
}

fn validate_at(schema: &Value, path: &str, depth: usize) -> Result<(), String> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "{path}: schema nests deeper than {MAX_SCHEMA_DEPTH}"
        ));
    }
    let Value::Object(map) = schema else {
        return Err(format!("{path}: a schema must be a JSON object"));
    };
    if let Some(t) = map.get("type") {
        match t {
            Value::String(s) if TYPES.contains(&s.as_str()) => {}
            _ => return Err(format!("{path}.type must be one of {}", TYPES.join(", "))),
        }
    }
    if let Some(req) = map.get("required") {
        let ok = req
            .as_array()
            .is_some_and(|items| items.iter().all(Value::is_string));
        if !ok {
            return Err(format!(
                "{path}.required must be an array of property names"
            ));
        }
    }
    if let Some(props) = map.get("properties") {
        let Value::Object(props) = props else {
            return Err(format!("{path}.properties must be an object"));
        };
        for (name, sub) in props {
            validate_at(sub, &format!("{path}.properties.{name}"), depth + 1)?;
        }
    }
    if let Some(items) = map.get("items") {
        validate_at(items, &format!("{path}.items"), depth + 1)?;
    }
    Ok(())
}

/// Check `value` against a (validated) `schema`. The error names the first violation.
pub fn check(schema: &Value, value: &Value) -> Result<(), String> {
    check_at(schema, value, "$")
}

fn type_matches(t: &str, value: &Value) -> bool {
    match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

fn check_at(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let Value::Object(map) = schema else {
        return Ok(());
    };
    if let Some(Value::String(t)) = map.get("type") {
        if !type_matches(t, value) {
            return Err(format!("{path} must be of type {t}"));
        }
    }
    if let Value::Object(obj) = value {
        if let Some(Value::Array(required)) = map.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(name) {
                    return Err(format!("{path} is missing required property {name:?}"));
                }
            }
        }
        if let Some(Value::Object(props)) = map.get("properties") {
            for (name, sub) in props {
                if let Some(v) = obj.get(name) {
                    check_at(sub, v, &format!("{path}.{name}"))?;
                }
            }
        }
    }
    if let (Value::Array(items), Some(sub)) = (value, map.get("items")) {
        for (i, v) in items.iter().enumerate() {
            check_at(sub, v, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subset() {
        let s = json!({"type": "object", "required": ["verdict"],
            "properties": {"verdict": {"type": "string"}, "confidence": {"type": "number"}},
            "x-unknown": 1});
        validate_schema(&s).unwrap();
        check(&s, &json!({"verdict": "ship", "confidence": 0.9})).unwrap();
        assert!(check(&s, &json!({"confidence": 0.9})).is_err());
        assert!(check(&s, &json!({"verdict": 1})).is_err());
        assert!(check(&s, &json!("looks good")).is_err());
        let arr = json!({"type": "array", "items": {"type": "integer"}});
        check(&arr, &json!([1, 2, 3.0])).unwrap();
        assert!(check(&arr, &json!([1, 2.5])).is_err());
    }

    #[test]
    fn bad_schemas() {
        assert!(validate_schema(&json!([])).is_err());
        assert!(validate_schema(&json!({"type": "text"})).is_err());
        assert!(validate_schema(&json!({"required": "x"})).is_err());
        assert!(validate_schema(&json!({"properties": {"a": 1}})).is_err());
        assert!(validate_schema(&json!({"items": {"type": 3}})).is_err());
        let mut deep = json!({});
        for _ in 0..40 {
            deep = json!({ "items": deep });
        }
        assert!(validate_schema(&deep).is_err());
    }
}
