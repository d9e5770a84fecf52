//! Hostile params for every method: the decoder never panics, and every rejection is a
//! typed error (`invalid_request` or `unknown_method`). Seeded and bounded so `cargo test`
//! stays fast and repeatable; `PROPTEST_CASES=100000` runs a longer campaign.

use maxx_protocol::request::{all_methods, Call};
use maxx_protocol::ErrorCode;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Map, Value};

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,40}".prop_map(Value::String),
        Just(json!("2B0E0000-0000-4000-8000-000000000000")),
        Just(json!("exited")),
        Just(json!("30s")),
        Just(json!("a=b")),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const FIELDS: &[&str] = &[
    "session_id",
    "title",
    "cwd",
    "command",
    "env",
    "metadata",
    "status",
    "location",
    "split_target",
    "split_direction",
    "focus",
    "cols",
    "rows",
    "action",
    "input",
    "signal",
    "lifecycle",
    "state",
    "event",
    "since",
    "timeout",
    "until",
    "regex",
    "key",
    "keys",
    "value",
    "value_json",
    "summary",
    "result",
    "result_schema",
    "agent_type",
    "group",
    "parent",
    "metadata_filter",
    "scrollback",
    "cells",
    "unwrap",
    "tail",
    "text",
    "restart",
    "max_restarts",
    "backoff",
    "capability",
    "surface_id",
    "registration_token",
    "all",
    "type",
    "payload",
    "message",
    "source",
    "profile",
    "reason",
    "last_command",
];

fn params() -> impl Strategy<Value = Value> {
    prop::collection::vec((prop::sample::select(FIELDS), value()), 0..8).prop_map(|pairs| {
        let mut m = Map::new();
        for (k, v) in pairs {
            m.insert(k.to_string(), v);
        }
        Value::Object(m)
    })
}

#[test]
fn decoding_hostile_params_never_panics_and_errors_are_typed() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(3000);
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let methods: Vec<&str> = all_methods().chain(["bogus.method"]).collect();
    runner
        .run(
            &(
                prop::sample::select(methods),
                prop_oneof![params(), value()],
            ),
            |(method, params)| {
                match Call::decode(method, Some(params)) {
                    Ok(call) => prop_assert_eq!(call.method(), method),
                    Err(e) => prop_assert!(
                        matches!(e.code, ErrorCode::InvalidRequest | ErrorCode::UnknownMethod),
                        "{method}: {e}"
                    ),
                }
                Ok(())
            },
        )
        .unwrap();
}
