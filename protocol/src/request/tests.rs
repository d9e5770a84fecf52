use super::*;
use serde_json::json;

fn create(params: Value) -> Result<Call, ErrorBody> {
    Call::decode("sessions.create", Some(params))
}

#[test]
fn unknown_method() {
    let e = Call::decode("sessions.frobnicate", None).unwrap_err();
    assert_eq!(e.code, ErrorCode::UnknownMethod);
}

#[test]
fn create_limits() {
    assert!(create(json!({"title": "x".repeat(256)})).is_ok());
    assert!(create(json!({"title": "x".repeat(257)})).is_err());
    assert!(create(json!({"status": "é".repeat(128)})).is_ok());
    assert!(create(json!({"status": "é".repeat(129)})).is_err());
    assert!(create(json!({"command": "x".repeat(4097)})).is_err());
    assert!(create(json!({"env": ["A-B=1"]})).is_err());
    assert!(create(json!({"env": ["NOEQUALS"]})).is_err());
    let many: Vec<String> = (0..257).map(|i| format!("K{i}=v")).collect();
    assert!(create(json!({"env": many})).is_err());
}

#[test]
fn a_screen_is_bounded_in_cells_at_create() {
    // 1000x1000 at the default scrollback fits; the largest scrollback at 160 columns too.
    assert!(create(json!({"cols": 1000, "rows": 1000})).is_ok());
    assert!(create(json!({"cols": 160, "rows": 50, "scrollback_lines": 100_000})).is_ok());
    let e = create(json!({"cols": 1000, "rows": 1000, "scrollback_lines": 100_000})).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest);
    assert!(e
        .remedy
        .unwrap()
        .contains("up to 15777 scrollback lines fit"));
    // Exactly at the bound, and one cell row past it.
    let rows_fit = GRID_MAX_CELLS / 1000 - 1000;
    assert!(check_grid(1000, 1000, rows_fit as usize).is_ok());
    assert!(check_grid(1000, 1000, rows_fit as usize + 1).is_err());
}

#[test]
fn start_row_pages_snapshot_and_dump_but_not_inspect() {
    let read = |method: &str, params: Value| Call::decode(method, Some(params));
    let Ok(Call::Screen(ScreenCall::Read(p))) = read(
        "sessions.snapshot",
        json!({"session_id": "7F1E2D3C-0000-4000-8000-000000000001", "start_row": 88}),
    ) else {
        panic!()
    };
    assert_eq!(p.start_row, 88);
    assert!(read(
        "sessions.dump",
        json!({"session_id": "7F1E2D3C-0000-4000-8000-000000000001", "start_row": 3})
    )
    .is_ok());
    let e = read(
        "sessions.inspect",
        json!({"session_id": "7F1E2D3C-0000-4000-8000-000000000001", "start_row": 3}),
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest);
    assert!(read(
        "sessions.snapshot",
        json!({"session_id": "7F1E2D3C-0000-4000-8000-000000000001", "start_row": -1})
    )
    .is_err());
}

#[test]
fn one_nesting_bound_for_every_stored_value() {
    let deep = |n: usize| (0..n).fold(json!(1), |v, _| json!([v]));
    assert_eq!(json_depth(&json!(1)), 0);
    assert_eq!(json_depth(&json!({"a": [1, {"b": []}]})), 4);
    assert_eq!(json_depth(&deep(JSON_MAX_DEPTH)), JSON_MAX_DEPTH);
    let id = "0123abcd-0000-4000-8000-000000000000";
    let call = |method: &str, p: Value| Call::decode(method, Some(p));
    for (method, at, over) in [
        (
            "sessions.set-metadata",
            json!({"session_id": id, "key": "k", "value": deep(JSON_MAX_DEPTH)}),
            json!({"session_id": id, "key": "k", "value": deep(JSON_MAX_DEPTH + 1)}),
        ),
        (
            "sessions.set-metadata",
            json!({"session_id": id, "key": "k", "value_json": deep(JSON_MAX_DEPTH).to_string()}),
            json!({"session_id": id, "key": "k", "value_json": deep(JSON_MAX_DEPTH + 1).to_string()}),
        ),
        (
            "sessions.emit-event",
            json!({"session_id": id, "event": "e", "payload": deep(JSON_MAX_DEPTH)}),
            json!({"session_id": id, "event": "e", "payload": deep(JSON_MAX_DEPTH + 1)}),
        ),
        (
            "sessions.create",
            json!({"command": "true", "metadata": {"k": deep(JSON_MAX_DEPTH)}}),
            json!({"command": "true", "metadata": {"k": deep(JSON_MAX_DEPTH + 1)}}),
        ),
    ] {
        assert!(call(method, at).is_ok(), "{method} at the bound");
        let e = call(method, over).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest, "{method}");
        assert!(e.remedy.is_some(), "{method}");
    }
    // The backstop: an unknown-to-the-checks value deeper than the params allow.
    let e = call("sessions.list", json!({"x": deep(PARAMS_MAX_DEPTH)})).unwrap_err();
    assert!(e.message.contains("nest"), "{}", e.message);
}

#[test]
fn metadata_limits() {
    let mut m = Map::new();
    for i in 0..33 {
        m.insert(format!("k{i}"), json!(1));
    }
    assert!(create(json!({"metadata": m})).is_err());
    assert!(create(json!({"metadata": {"bad key": 1}})).is_err());
    assert!(create(json!({"metadata": {"k": "x".repeat(2047)}})).is_err());
    assert!(create(json!({"metadata": {"k": "x".repeat(2046)}})).is_ok());
    assert!(create(json!({"metadata": {"k": i64::MIN}})).is_ok());
}

#[test]
fn split_rules() {
    let id = "2b0e0000-0000-4000-8000-000000000000";
    assert!(create(json!({"location": "split"})).is_err());
    assert!(create(json!({"location": "tab", "split_target": id})).is_err());
    assert!(create(json!({"split_direction": "down"})).is_err());
    let Call::Create(CreateCall::Create(p)) =
        create(json!({"location": "split", "split_target": id})).unwrap()
    else {
        panic!()
    };
    assert_eq!(p.split_direction, Some(SplitDirection::Right));
    assert!(!p.focus);
    assert_eq!(p.split_target.as_deref(), Some(&*id.to_ascii_uppercase()));
}

#[test]
fn update_rejects_server_owned() {
    let id = "2B0E0000-0000-4000-8000-000000000000";
    let e = Call::decode(
        "sessions.update",
        Some(json!({"session_id": id, "lifecycle": "closed"})),
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest);
    assert!(Call::decode("sessions.update", Some(json!({"session_id": id}))).is_err());
}

#[test]
fn wait_timeout_cap() {
    let id = "2B0E0000-0000-4000-8000-000000000000";
    let w = |t: Value| {
        Call::decode(
            "sessions.wait",
            Some(json!({"session_id": id, "lifecycle": "exited", "timeout": t})),
        )
    };
    assert!(w(json!("1h")).is_ok());
    assert!(w(json!("61m")).is_err());
    assert!(w(json!("soon")).is_err());
}

#[test]
fn run_timeout_zero_is_no_limit_and_other_bounds_hold() {
    let id = "2B0E0000-0000-4000-8000-000000000000";
    let run = |t: Option<Value>| {
        let mut p = json!({"session_id": id, "command": "true"});
        if let Some(t) = t {
            p["timeout"] = t;
        }
        match Call::decode("sessions.run", Some(p)) {
            Ok(Call::Screen(ScreenCall::Run(r))) => Ok(r.timeout),
            Ok(other) => panic!("decoded as {other:?}"),
            Err(e) => Err(e.code),
        }
    };
    assert_eq!(run(None), Ok(Some(RUN_DEFAULT_TIMEOUT)));
    assert_eq!(run(Some(json!(0))), Ok(None));
    assert_eq!(run(Some(json!("0s"))), Ok(None));
    assert_eq!(run(Some(json!(2))), Ok(Some(Duration::from_secs(2))));
    assert_eq!(run(Some(json!("61m"))), Err(ErrorCode::InvalidRequest));
    assert_eq!(run(Some(json!(-1))), Err(ErrorCode::InvalidRequest));
    // A wait's 0 still means "check once, now".
    let wait = Call::decode(
        "sessions.wait",
        Some(json!({"session_id": id, "lifecycle": "exited", "timeout": 0})),
    );
    assert!(
        matches!(wait, Ok(Call::Wait(WaitCall::Wait(ref w))) if w.timeout.is_zero()),
        "{wait:?}"
    );
}

#[test]
fn send_keys_literal_and_chords() {
    let id = "2B0E0000-0000-4000-8000-000000000000";
    let keys = |p: Value| match Call::decode("sessions.send-keys", Some(p)) {
        Ok(Call::Screen(ScreenCall::SendKeys { keys, .. })) => Ok(keys),
        Ok(other) => panic!("decoded as {other:?}"),
        Err(e) => Err(e),
    };
    let e = keys(json!({"session_id": id, "keys": ["ls", "S-Upp"]})).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest);
    assert!(e.remedy.is_some());
    let k = keys(json!({"session_id": id, "keys": ["S-Upp"], "literal": true})).unwrap();
    assert_eq!(k, vec![crate::keys::KeyToken::Literal("S-Upp".into())]);
    assert!(keys(json!({"session_id": id, "keys": ["S-Tab"], "literal": "yes"})).is_err());
}

#[test]
fn wait_output_only_needs_a_text_condition() {
    let id = "2B0E0000-0000-4000-8000-000000000000";
    let w = |extra: Value| {
        let mut p = json!({"session_id": id});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        Call::decode("sessions.wait", Some(p))
    };
    for cond in [json!({"until": "x"}), json!({"regex": "^x$"})] {
        let mut p = cond.clone();
        p["output_only"] = json!(true);
        let Ok(Call::Wait(WaitCall::Wait(WaitParams {
            condition: WaitCondition::Text(t),
            ..
        }))) = w(p)
        else {
            panic!("{cond} with output_only is a text wait")
        };
        assert!(t.output_only);
    }
    let Ok(Call::Wait(WaitCall::Wait(WaitParams {
        condition: WaitCondition::Text(t),
        ..
    }))) = w(json!({"until": "x"}))
    else {
        panic!()
    };
    assert!(!t.output_only, "off unless asked");
    for other in [
        json!({"lifecycle": "exited"}),
        json!({"state": "s"}),
        json!({"event": "e"}),
    ] {
        let mut p = other.clone();
        p["output_only"] = json!(true);
        let e = w(p).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest, "{other}");
        assert!(e.message.contains("output_only"), "{}", e.message);
    }
    assert!(w(json!({"lifecycle": "exited", "output_only": false})).is_ok());
}

mod decode_error_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decode_errors_never_quote_a_value() {
        let err = Call::decode(
            "sessions.create",
            Some(json!({"env": "API_KEY=s3cr\"et\\x"})),
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "bad params: env: invalid type: a string, expected a sequence"
        );
        let err = Call::decode("sessions.create", Some(json!({"env": ["A=1", 99]}))).unwrap_err();
        assert!(!err.message.contains("99"), "{}", err.message);
        assert!(
            err.message.contains("env: invalid type: an integer"),
            "{}",
            err.message
        );
        let err = Call::decode("sessions.create", Some(json!({"location": "s3cret"}))).unwrap_err();
        assert!(!err.message.contains("s3cret"), "{}", err.message);
        assert!(err.message.contains("unknown variant"), "{}", err.message);
    }

    /// A param the method does not take is ignored and named, at any depth; a well-formed
    /// request reports nothing.
    #[test]
    fn unknown_params_are_ignored_and_reported() {
        let (call, ignored) = Call::decode_reporting(
            "sessions.create",
            Some(json!({"titel": "x", "title": "t", "bogus": {"deep": 1}})),
        )
        .unwrap();
        assert_eq!(ignored, ["bogus", "titel"]);
        let Call::Create(CreateCall::Create(p)) = call else {
            panic!("a create")
        };
        assert_eq!(p.title.as_deref(), Some("t"));
        let (_, ignored) = Call::decode_reporting(
            "sessions.list",
            Some(json!({"metadata_filter": [{"key": "k", "value": "v", "extra": true}]})),
        )
        .unwrap();
        assert_eq!(ignored, ["metadata_filter.0.extra"]);
        let (_, ignored) =
            Call::decode_reporting("sessions.create", Some(json!({"title": "t"}))).unwrap();
        assert!(ignored.is_empty());
        // A bad value is still refused, whatever else is unknown.
        assert!(
            Call::decode_reporting("sessions.create", Some(json!({"cols": "x", "u": 1}))).is_err()
        );
        // Nothing leaks into the next decode on this thread.
        assert!(Call::decode("sessions.create", Some(json!({"zz": 1}))).is_ok());
        let (_, ignored) = Call::decode_reporting("sessions.list", Some(json!({}))).unwrap();
        assert!(ignored.is_empty());
    }
}

mod tables {
    use super::*;

    #[test]
    fn every_method_is_in_one_table_once() {
        let names: Vec<&str> = all_methods().collect();
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "a method is in two tables");
        for m in &names {
            let families = [
                CreateCall::owns(m),
                RecordsCall::owns(m),
                DeclareParams::owns(m),
                ScreenCall::owns(m),
                WaitCall::owns(m),
                DaemonCall::owns(m),
            ];
            assert_eq!(families.iter().filter(|o| **o).count(), 1, "{m}");
        }
        assert!(!names.contains(&DEBUG_PANIC));
        assert!(
            spec(DEBUG_PANIC).is_some(),
            "in the table, owned only by debug builds"
        );
    }

    #[test]
    fn a_decoded_call_names_its_own_method() {
        // The decoders and `method()` agree, so the table entry found is the method's.
        let id = "2B0E0000-0000-4000-8000-000000000000";
        for m in all_methods() {
            let params = serde_json::json!({ "session_id": id });
            if let Ok(call) = Call::decode(m, Some(params)) {
                let expect = if m == "event.emit" {
                    "sessions.emit-event"
                } else {
                    m
                };
                assert_eq!(call.method(), expect);
                assert_eq!(call.spec().name, expect);
            }
        }
    }
}

/// What a client builds from `wire` decodes to the call it meant.
mod wire_round_trip {
    use super::*;

    const ID: &str = "2B0E0000-0000-4000-8000-000000000000";

    fn call<P: Serialize>(method: &str, params: &P) -> Call {
        let value = serde_json::to_value(params).unwrap();
        Call::decode(method, Some(value)).unwrap_or_else(|e| panic!("{method}: {e:?}"))
    }

    #[test]
    fn unset_options_are_left_out() {
        let paste = wire::Paste {
            session_id: ID.into(),
            text: "hi".into(),
        };
        let v = serde_json::to_value(&paste).unwrap();
        assert_eq!(v, serde_json::json!({"session_id": ID, "text": "hi"}));
        let read = wire::Read {
            session_id: ID.into(),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            serde_json::json!({ "session_id": ID })
        );
    }

    #[test]
    fn screen_calls() {
        let Call::Screen(ScreenCall::Read(r)) = call(
            "sessions.snapshot",
            &wire::Read {
                session_id: ID.into(),
                cells: true,
                tail: Some(5),
                ..Default::default()
            },
        ) else {
            panic!()
        };
        assert!(r.cells && r.tail == Some(5) && r.kind == ReadKind::Snapshot);
        let Call::Screen(ScreenCall::Resize { size, .. }) = call(
            "sessions.resize",
            &wire::Resize {
                session_id: ID.into(),
                cols: 100,
                rows: 30,
            },
        ) else {
            panic!()
        };
        assert_eq!((size.cols, size.rows), (100, 30));
    }

    #[test]
    fn create_with_a_restart_policy() {
        let Call::Create(CreateCall::Create(p)) = call(
            "sessions.create",
            &wire::Create {
                command: Some("make".into()),
                env: vec!["A=1".into()],
                restart: Some(RestartMode::OnFailure),
                max_restarts: Some(3),
                backoff: Some("1s..5s".into()),
                ..Default::default()
            },
        ) else {
            panic!()
        };
        assert_eq!(p.command.as_deref(), Some("make"));
        assert_eq!(p.restart_policy.unwrap().max_restarts, 3);
        let Call::Records(RecordsCall::SetRestartPolicy { policy, .. }) = call(
            "sessions.set-restart-policy",
            &wire::SetRestartPolicy {
                session_id: ID.into(),
                policy: wire::RestartFields {
                    restart: Some(RestartMode::Always),
                    ..Default::default()
                },
            },
        ) else {
            panic!()
        };
        assert_eq!(policy.unwrap().mode, RestartMode::Always);
    }

    #[test]
    fn declarations_waits_and_actions() {
        let Call::Declare(d) = call(
            "sessions.set-metadata",
            &wire::Declare {
                session_id: ID.into(),
                key: Some("k".into()),
                value: Some(serde_json::json!([1, 2])),
                ..Default::default()
            },
        ) else {
            panic!()
        };
        assert_eq!(d.declaration.method(), "sessions.set-metadata");
        let Call::Wait(WaitCall::Wait(w)) = call(
            "sessions.wait",
            &wire::Wait {
                session_id: ID.into(),
                until: Some("done".into()),
                timeout: Some(serde_json::json!("5s")),
                ..Default::default()
            },
        ) else {
            panic!()
        };
        assert_eq!(w.timeout, Duration::from_secs(5));
        let Call::Records(RecordsCall::Action(a)) = call(
            "sessions.action",
            &wire::Action {
                session_id: ID.into(),
                action: ActionKind::Interrupt,
                input: None,
                signal: Some("SIGTERM".into()),
            },
        ) else {
            panic!()
        };
        assert_eq!(a.signal.map(InterruptSignal::ends_the_program), Some(true));
        let Call::Wait(WaitCall::StreamWait(w)) = call(
            "stream.wait",
            &wire::Stream {
                group: Some("g".into()),
                all: Some("exited".into()),
                require_members: Some(true),
                ..Default::default()
            },
        ) else {
            panic!()
        };
        assert!(matches!(
            w.wait_for,
            StreamWaitFor::All {
                require_members: true,
                ..
            }
        ));
    }
}
