//! The request line and the response object.

use crate::error::ErrorBody;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One request line: `{token, method, params, caller?, confirm?, id?}`.
///
/// Unknown fields are ignored so the envelope can grow. Every field is optional at this
/// level so that a missing token is answered `unauthenticated` rather than a decode error.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RequestEnvelope {
    /// The capability token from `<control dir>/token`.
    #[serde(default)]
    pub token: Option<String>,
    /// `noun.verb`, e.g. `sessions.create`.
    #[serde(default)]
    pub method: Option<String>,
    /// Method parameters; absent means `{}`.
    #[serde(default)]
    pub params: Option<Value>,
    /// The policy source this request claims (`--as`); default `local-cli`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// Approval of a `confirmation_required` answer (`--confirm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<bool>,
    /// Opaque request id, echoed in the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
}

/// A response: `{ok: true, result}` or `{ok: false, error: {code, message, remedy?}}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// Whether the request succeeded.
    pub ok: bool,
    /// The method's result, present when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The error, present when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
    /// The request's `id`, echoed when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    /// What the daemon wants the caller to know about a request it served (e.g. params it
    /// does not know and ignored); absent when there is nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// A note on a served request: `{code, param?, message}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Stable code to branch on: `unknown_param`.
    pub code: String,
    /// The param it concerns (a path: `condition.foo`), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// For a person.
    pub message: String,
}

impl Warning {
    /// A param this daemon does not know, ignored.
    pub fn unknown_param(path: &str) -> Warning {
        Warning {
            code: "unknown_param".into(),
            param: Some(path.to_string()),
            message: format!(
                "{path} is not a param of this method in this daemon; it was ignored \
                 (a typo, or a newer client)"
            ),
        }
    }
}

impl Response {
    /// A success carrying `result`.
    pub fn ok(result: Value) -> Self {
        Response {
            ok: true,
            result: Some(result),
            error: None,
            id: None,
            warnings: Vec::new(),
        }
    }

    /// A failure carrying `error`.
    pub fn err(mut error: ErrorBody) -> Self {
        // Every error carries a remedy: the site's own, else its code's.
        if error.remedy.is_none() {
            error.remedy = Some(error.code.default_remedy().to_string());
        }
        Response {
            ok: false,
            result: None,
            error: Some(error),
            id: None,
            warnings: Vec::new(),
        }
    }

    /// Echo a request id.
    pub fn with_id(mut self, id: Option<Value>) -> Self {
        self.id = id;
        self
    }

    /// The NDJSON line for this response (with trailing newline).
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_else(|_| {
            br#"{"ok":false,"error":{"code":"internal","message":"response encoding failed"}}"#
                .to_vec()
        });
        line.push(b'\n');
        line
    }
}

/// Parses any JSON document and fails on a duplicate key at any depth. A request with a
/// duplicate key is ambiguous (which `token`? which `status`?), so it is refused whole.
pub struct NoDuplicateKeys;

impl<'de> serde::Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DupVisitor).map(|_| NoDuplicateKeys)
    }
}

struct DupVisitor;

impl<'de> serde::de::Visitor<'de> for DupVisitor {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key) {
                return Err(serde::de::Error::custom("duplicate key"));
            }
            map.next_value::<NoDuplicateKeys>()?;
        }
        Ok(())
    }
}
