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
}

impl Response {
    /// A success carrying `result`.
    pub fn ok(result: Value) -> Self {
        Response {
            ok: true,
            result: Some(result),
            error: None,
            id: None,
        }
    }

    /// A failure carrying `error`.
    pub fn err(error: ErrorBody) -> Self {
        Response {
            ok: false,
            result: None,
            error: Some(error),
            id: None,
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
