//! Unit tests of the policy rules, the file loader and the actor.

use super::*;
use maxx_protocol::error::ErrorCode;
use std::ffi::OsString;
use std::sync::atomic::{AtomicUsize, Ordering};
use Capability::*;
use DecisionKind::{Allow as A, Confirm as C, Deny as D};

/// A file under the temp dir, removed on drop (the actors crate has no tempfile dep).
struct TempPath(PathBuf);

impl TempPath {
    fn new() -> TempPath {
        static N: AtomicUsize = AtomicUsize::new(0);
        TempPath(std::env::temp_dir().join(format!(
            "maxx-policy-test-{}-{}.json",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )))
    }

    fn with(contents: &str) -> TempPath {
        let t = TempPath::new();
        std::fs::write(&t.0, contents).unwrap();
        t
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_dir(&self.0);
    }
}

const CONFIG: &str = r#"{
  "version": 1,
  "sources": [
    {"id": "linear-webhook", "kind": "webhook",
     "allow": ["tabs:spawn", "groups:create", "state:set"], "confirm": [],
     "confirm_scope": "always"},
    {"id": "ext-reader", "kind": "external", "allow": ["tabs:list"]},
    {"id": "bare-token", "kind": "token"},
    {"id": "local-reader", "kind": "local", "allow": ["output:read", "tabs:list"]},
    {"id": "careful-local", "kind": "local", "allow": ["tabs:list"],
     "confirm": ["tabs:close", "output:read"], "confirm_scope": "once_per_source"},
    {"id": "hook-confirm", "kind": "webhook", "confirm": ["input:send"]},
    {"id": "attach-hook", "kind": "webhook", "allow": ["surface:attach"]},
    {"id": "ext-readout", "kind": "external", "allow": ["output:read"]}
  ]
}"#;

fn configured() -> (Policy, TempPath) {
    let file = TempPath::with(CONFIG);
    let (policy, report) = load_policy(Some(&file.0));
    assert_eq!(report.status, ConfigStatus::Loaded, "{:?}", report.reasons);
    (policy, file)
}

fn decide(policy: &Policy, caller: Option<&str>, cap: Capability) -> DecisionKind {
    policy
        .evaluate(
            caller,
            &[cap],
            Some("S1"),
            "test.method",
            false,
            &Approvals::new(),
        )
        .kind()
}

fn assert_table(policy: &Policy, table: &[(Option<&str>, Capability, DecisionKind)]) {
    for &(caller, cap, want) in table {
        let got = decide(policy, caller, cap);
        assert_eq!(got, want, "{caller:?} asking for {cap}");
        // policy.check agrees with a real (unconfirmed) evaluation.
        let check = policy.check(caller, cap, Some("S1"), &Approvals::new());
        assert_eq!(
            check.decision, want,
            "check {caller:?} {cap}: {}",
            check.reason
        );
        assert!(!check.reason.is_empty());
    }
}

#[test]
fn built_in_safe_defaults() {
    let p = Policy::builtin();
    let long = "x".repeat(5000);
    let mut table = vec![
        // The default source is local-cli.
        (None, TabsSpawn, A),
        (None, OutputRead, D),
        (Some(LOCAL_CLI), OutputRead, D),
        (Some(LOCAL_CLI), SurfaceAttach, A),
        // No method behind them yet: denied to everyone.
        (Some(LOCAL_CLI), GroupsList, D),
        (Some(LOCAL_CLI), AutomationTrigger, D),
        (Some(READONLY_EXTERNAL), TabsList, A),
        (Some(READONLY_EXTERNAL), ProfilesList, A),
        (Some(READONLY_EXTERNAL), TabsClose, D),
        (Some(READONLY_EXTERNAL), TabsSpawn, D),
        (Some(READONLY_EXTERNAL), InputSend, D),
        (Some(READONLY_EXTERNAL), OutputRead, D),
        (Some(READONLY_EXTERNAL), SurfaceAttach, D),
        (Some(DECLARE_ONLY), StateSet, A),
        (Some(DECLARE_ONLY), MetadataSet, A),
        (Some(DECLARE_ONLY), TabsList, A),
        (Some(DECLARE_ONLY), TabsSpawn, D),
        (Some(DECLARE_ONLY), KeysPress, D),
        (Some(DECLARE_ONLY), ProfilesList, D),
        (Some(DECLARE_ONLY), OutputRead, D),
        (Some(DECLARE_ONLY), SurfaceAttach, D),
    ];
    for &cap in Capability::ALL {
        let want = if cap == OutputRead || UNAVAILABLE.contains(&cap) {
            D
        } else {
            A
        };
        table.push((Some(LOCAL_CLI), cap, want));
        // Unknown sources are denied everything, however they are spelled.
        for unknown in ["nobody", "", "LOCAL-CLI", "local-cli ", &long] {
            table.push((Some(unknown), cap, D));
        }
    }
    assert_table(&p, &table);
}

#[test]
fn configured_safe_defaults() {
    let (p, _file) = configured();
    assert_table(
        &p,
        &[
            (Some("linear-webhook"), TabsSpawn, A),
            (Some("linear-webhook"), GroupsCreate, A),
            (Some("linear-webhook"), StateSet, A),
            // Webhooks cannot mutate unless allowlisted.
            (Some("linear-webhook"), TabsClose, D),
            (Some("linear-webhook"), MetadataSet, D),
            (Some("linear-webhook"), InputSend, D),
            (Some("linear-webhook"), SurfaceAttach, D),
            // Reads are what a source lists, nothing more.
            (Some("linear-webhook"), TabsList, D),
            (Some("linear-webhook"), OutputRead, D),
            (Some("ext-reader"), TabsList, A),
            (Some("ext-reader"), ProfilesList, D),
            (Some("ext-reader"), TabsSpawn, D),
            (Some("ext-reader"), SurfaceAttach, D),
            (Some("bare-token"), TabsSpawn, D),
            (Some("bare-token"), TabsList, D),
            (Some("bare-token"), SurfaceAttach, D),
            // The output:read opt-in: a configured local source used via --as.
            (Some("local-reader"), OutputRead, A),
            (Some("local-reader"), TabsList, A),
            (Some("local-reader"), ProfilesList, D),
            // An unlisted mutation by a local source asks.
            (Some("local-reader"), TabsSpawn, C),
            (Some("local-reader"), SurfaceAttach, C),
            // local-cli still lacks output:read with a loaded config.
            (None, OutputRead, D),
            (Some(LOCAL_CLI), OutputRead, D),
            (Some("careful-local"), TabsClose, C),
            (Some("careful-local"), OutputRead, C),
            (Some("careful-local"), InputSend, C),
            (Some("hook-confirm"), InputSend, C),
            (Some("hook-confirm"), KeysPress, D),
            (Some("attach-hook"), SurfaceAttach, A),
            (Some("ext-readout"), OutputRead, A),
            (Some("ext-readout"), TabsList, D),
            // A source the file does not declare is still unknown.
            (Some("not-configured"), TabsList, D),
        ],
    );
    assert_eq!(p.sources().len(), builtin_sources().len() + 8);
}

#[test]
fn unavailable_capabilities_are_denied_even_when_listed() {
    let file = TempPath::with(
        r#"{"version":1,"sources":[{"id":"g","kind":"local","allow":["groups:list","automation:trigger"]}]}"#,
    );
    let (p, report) = load_policy(Some(&file.0));
    assert_eq!(report.status, ConfigStatus::Loaded);
    assert_table(
        &p,
        &[
            (Some("g"), GroupsList, D),
            (Some("g"), AutomationTrigger, D),
        ],
    );
    let check = p.check(Some("g"), GroupsList, None, &Approvals::new());
    assert!(check.reason.contains("unavailable"), "{}", check.reason);
}

#[test]
fn confirm_true_approves_and_never_lifts_a_deny() {
    let (p, _file) = configured();
    let none = Approvals::new();
    let d = p.evaluate(
        Some("careful-local"),
        &[TabsClose],
        Some("S1"),
        "sessions.close",
        true,
        &none,
    );
    assert!(d.is_allow(), "{d:?}");
    let d = p.evaluate(
        Some("linear-webhook"),
        &[TabsClose],
        Some("S1"),
        "sessions.close",
        true,
        &none,
    );
    assert_eq!(d.kind(), D);
    let d = p.evaluate(
        None,
        &[OutputRead],
        Some("S1"),
        "sessions.snapshot",
        true,
        &none,
    );
    assert_eq!(d.kind(), D);
}

#[test]
fn several_capabilities_deny_beats_confirm_beats_allow() {
    let (p, _file) = configured();
    let none = Approvals::new();
    let eval = |caller, caps: &[Capability]| {
        p.evaluate(Some(caller), caps, None, "sessions.create", false, &none)
    };
    // create --group needs both.
    assert!(eval("linear-webhook", &[TabsSpawn, GroupsCreate]).is_allow());
    // The deny is reported even after an allowed one.
    match eval("linear-webhook", &[TabsSpawn, MetadataSet, TabsClose]) {
        Decision::Deny { capability, .. } => assert_eq!(capability, Some(MetadataSet)),
        other => panic!("{other:?}"),
    }
    // Deny wins over an earlier confirm.
    match eval("local-reader", &[TabsSpawn, ProfilesList]) {
        Decision::Deny { capability, .. } => assert_eq!(capability, Some(ProfilesList)),
        other => panic!("{other:?}"),
    }
    // The first capability needing confirmation is named.
    match eval("careful-local", &[TabsList, InputSend, TabsClose]) {
        Decision::Confirm { capability, .. } => assert_eq!(capability, InputSend),
        other => panic!("{other:?}"),
    }
    // No capability: allowed for a known source, denied for an unknown one.
    assert!(eval("linear-webhook", &[]).is_allow());
    match eval("nobody", &[]) {
        Decision::Deny { capability, .. } => assert_eq!(capability, None),
        other => panic!("{other:?}"),
    }
}

#[test]
fn once_per_source_is_remembered_per_source_and_capability() {
    let (p, _file) = configured();
    let mut approved = Approvals::new();
    let eval = |caller, cap, confirm, approved: &Approvals| {
        p.evaluate(Some(caller), &[cap], Some("S1"), "m", confirm, approved)
            .kind()
    };
    assert_eq!(eval("careful-local", TabsClose, false, &approved), C);
    assert_eq!(
        p.once_approvals(Some("careful-local"), &[TabsList, TabsClose]),
        vec![("careful-local".to_string(), TabsClose)]
    );
    approved.extend(p.once_approvals(Some("careful-local"), &[TabsClose]));
    assert_eq!(eval("careful-local", TabsClose, false, &approved), A);
    // Another capability of the same source still asks.
    assert_eq!(eval("careful-local", OutputRead, false, &approved), C);
    // An `always` source earns no approvals.
    assert!(p
        .once_approvals(Some("hook-confirm"), &[InputSend])
        .is_empty());
    assert!(p.once_approvals(Some("nobody"), &[InputSend]).is_empty());
    // A forged approval does nothing for an `always` source.
    approved.insert(("hook-confirm".into(), InputSend));
    assert_eq!(eval("hook-confirm", InputSend, false, &approved), C);
}

#[test]
fn built_ins_are_subsets_of_local_cli() {
    let p = Policy::builtin();
    let local = p.source(LOCAL_CLI).unwrap().clone();
    let rank = |k: DecisionKind| match k {
        D => 0,
        C => 1,
        A => 2,
    };
    for s in builtin_sources() {
        assert!(s.builtin);
        assert!(s.allow.is_subset(&local.allow), "{}", s.id);
        assert!(s
            .confirm
            .iter()
            .all(|c| local.allow.contains(c) || local.confirm.contains(c)));
        for &cap in Capability::ALL {
            let mine = decide(&p, Some(&s.id), cap);
            let theirs = decide(&p, Some(LOCAL_CLI), cap);
            assert!(
                rank(mine) <= rank(theirs),
                "{} {cap}: {mine:?} > {theirs:?}",
                s.id
            );
        }
        assert!(!s.allow.contains(&OutputRead), "{} holds output:read", s.id);
    }
    // Only local-cli holds surface:attach among the built-ins.
    for s in builtin_sources().iter().filter(|s| s.id != LOCAL_CLI) {
        assert!(!s.allow.contains(&SurfaceAttach), "{}", s.id);
        assert_ne!(
            s.kind,
            SourceKind::Local,
            "{} would confirm mutations",
            s.id
        );
    }
}

#[test]
fn malformed_configs_are_rejected_whole_and_built_ins_still_work() {
    let good = r#"{"id":"ok-source","kind":"webhook","allow":["tabs:spawn"]}"#;
    let cases: &[(&str, String, &str)] = &[
        ("invalid json", "{".into(), "invalid JSON"),
        ("trailing garbage", r#"{"version":1,"sources":[]} x"#.into(), "invalid JSON"),
        ("empty file", String::new(), "invalid JSON"),
        ("not an object", "[]".into(), "policy object"),
        ("unsupported version", format!(r#"{{"version":2,"sources":[{good}]}}"#), "unsupported version 2"),
        ("string version", format!(r#"{{"version":"1","sources":[{good}]}}"#), "unsupported version"),
        ("missing version", format!(r#"{{"sources":[{good}]}}"#), "missing \"version\""),
        ("missing sources", r#"{"version":1}"#.into(), "missing \"sources\""),
        ("sources not array", r#"{"version":1,"sources":{}}"#.into(), "unexpected structure"),
        ("unknown top field", format!(r#"{{"version":1,"sources":[{good}],"extra":1}}"#), "unknown field"),
        ("unknown source field", r#"{"version":1,"sources":[{"id":"a","kind":"local","alow":["tabs:list"]}]}"#.into(), "unknown field `alow`"),
        ("duplicate field", r#"{"version":1,"sources":[{"id":"a","id":"b","kind":"local"}]}"#.into(), "duplicate field"),
        ("reserved local-cli", format!(r#"{{"version":1,"sources":[{good},{{"id":"local-cli","kind":"local","allow":["output:read"]}}]}}"#), "reserved"),
        ("reserved readonly-external", r#"{"version":1,"sources":[{"id":"readonly-external","kind":"external"}]}"#.into(), "reserved"),
        ("duplicate id", format!(r#"{{"version":1,"sources":[{good},{good}]}}"#), "duplicate id"),
        ("unknown capability in allow", r#"{"version":1,"sources":[{"id":"a","kind":"local","allow":["tabs:explode"]}]}"#.into(), "unknown capability \"tabs:explode\" in allow"),
        ("unknown capability in confirm", r#"{"version":1,"sources":[{"id":"a","kind":"local","confirm":["output:write"]}]}"#.into(), "in confirm"),
        ("capability not a string", r#"{"version":1,"sources":[{"id":"a","kind":"local","allow":[1]}]}"#.into(), "not a capability name"),
        ("allow not an array", r#"{"version":1,"sources":[{"id":"a","kind":"local","allow":"tabs:list"}]}"#.into(), "must be an array"),
        ("overlap", r#"{"version":1,"sources":[{"id":"a","kind":"local","allow":["tabs:close","tabs:list"],"confirm":["tabs:close"]}]}"#.into(), "ambiguous: tabs:close"),
        ("bad kind", r#"{"version":1,"sources":[{"id":"a","kind":"remote"}]}"#.into(), "unknown kind \"remote\""),
        ("missing kind", r#"{"version":1,"sources":[{"id":"a"}]}"#.into(), "\"kind\" must be"),
        ("missing id", r#"{"version":1,"sources":[{"kind":"local"}]}"#.into(), "\"id\" must be a string"),
        ("empty id", r#"{"version":1,"sources":[{"id":"","kind":"local"}]}"#.into(), "id is empty"),
        ("bad id chars", r#"{"version":1,"sources":[{"id":"a b\n","kind":"local"}]}"#.into(), "may hold only"),
        ("long id", format!(r#"{{"version":1,"sources":[{{"id":"{}","kind":"local"}}]}}"#, "a".repeat(65)), "longer than 64"),
        ("bad confirm_scope", r#"{"version":1,"sources":[{"id":"a","kind":"local","confirm_scope":"sometimes"}]}"#.into(), "unknown confirm_scope \"sometimes\""),
    ];
    for (name, text, want) in cases {
        let file = TempPath::with(text);
        let (p, report) = load_policy(Some(&file.0));
        assert_eq!(report.status, ConfigStatus::Rejected, "{name}");
        assert!(
            report.reasons.iter().any(|r| r.contains(want)),
            "{name}: wanted {want:?} in {:?}",
            report.reasons
        );
        // The whole file is refused: not even its good source is active.
        assert!(p.source("ok-source").is_none(), "{name}");
        assert_eq!(p.sources(), builtin_sources().as_slice(), "{name}");
        assert_eq!(decide(&p, None, TabsSpawn), A, "{name}");
        assert_eq!(decide(&p, Some(READONLY_EXTERNAL), TabsList), A, "{name}");
        assert_eq!(decide(&p, Some("a"), TabsList), D, "{name}");
        assert_eq!(decide(&p, Some(LOCAL_CLI), OutputRead), D, "{name}");
        // The offline validator reports the same problem.
        let reasons = validate_config_file(&file.0).unwrap_err();
        assert!(
            reasons.iter().any(|r| r.contains(want)),
            "{name}: {reasons:?}"
        );
    }
}

#[test]
fn every_problem_is_reported_at_once_and_bounded() {
    let file = TempPath::with(
        r#"{"version":3,"sources":[
            {"id":"local-cli","kind":"local"},
            {"id":"a","kind":"remote","allow":["nope"],"confirm_scope":"x"}]}"#,
    );
    let reasons = validate_config_file(&file.0).unwrap_err();
    assert_eq!(reasons.len(), 5, "{reasons:?}");
    let many: Vec<String> = (0..500)
        .map(|i| format!(r#"{{"id":"s{i}","kind":"bad"}}"#))
        .collect();
    let file = TempPath::with(&format!(
        r#"{{"version":1,"sources":[{}]}}"#,
        many.join(",")
    ));
    let reasons = validate_config_file(&file.0).unwrap_err();
    assert_eq!(reasons.len(), MAX_REASONS + 1);
    assert!(reasons.last().unwrap().contains("450 more"));
}

#[test]
fn missing_oversized_and_odd_files() {
    let missing = TempPath::new();
    let (p, report) = load_policy(Some(&missing.0));
    assert_eq!(report.status, ConfigStatus::Missing);
    assert!(report.reasons.is_empty());
    assert_eq!(p.sources(), builtin_sources().as_slice());
    assert!(validate_config_file(&missing.0).unwrap_err()[0].contains("does not exist"));

    let (_, report) = load_policy(None);
    assert_eq!(report.status, ConfigStatus::NoPath);

    // Just over the bound: refused before reading, with no JSON parse attempted.
    let mut big = String::from(r#"{"version":1,"sources":[]}"#);
    big.push_str(&" ".repeat(POLICY_MAX_BYTES as usize));
    let file = TempPath::with(&big);
    let (p, report) = load_policy(Some(&file.0));
    assert_eq!(report.status, ConfigStatus::Rejected);
    assert!(
        report.reasons[0].contains("larger than"),
        "{:?}",
        report.reasons
    );
    assert_eq!(p.sources(), builtin_sources().as_slice());
    // Exactly at the bound is fine.
    big.truncate(POLICY_MAX_BYTES as usize);
    let file = TempPath::with(&big);
    assert_eq!(load_policy(Some(&file.0)).1.status, ConfigStatus::Loaded);

    let dir = TempPath::new();
    std::fs::create_dir(&dir.0).unwrap();
    let (_, report) = load_policy(Some(&dir.0));
    assert_eq!(report.status, ConfigStatus::Rejected);
    assert!(report.reasons[0].contains("not a regular file"));
}

#[test]
fn validate_summarises_the_configured_sources() {
    let file = TempPath::with(CONFIG);
    let summary = validate_config_file(&file.0).unwrap();
    assert_eq!(summary.version, 1);
    assert_eq!(summary.sources.len(), 8);
    assert!(summary.sources.iter().all(|s| !s.builtin));
    let json = serde_json::to_value(&summary.sources[0]).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "id": "linear-webhook",
            "kind": "webhook",
            "allow": ["tabs:spawn", "state:set", "groups:create"],
            "confirm": [],
            "confirm_scope": "always",
            "builtin": false,
        })
    );
    let careful = summary
        .sources
        .iter()
        .find(|s| s.id == "careful-local")
        .unwrap();
    assert_eq!(careful.confirm_scope, ConfirmScope::OncePerSource);
    // The seed's example verbatim loads.
    let seed = TempPath::with(
        r#"{
  "version": 1,
  "sources": [
{
  "id": "linear-webhook",
  "kind": "webhook",
  "allow": ["tabs:spawn", "groups:create", "state:set"],
  "confirm": [],
  "confirm_scope": "always"
}
  ]
}"#,
    );
    assert!(validate_config_file(&seed.0).is_ok());
}

#[test]
fn errors_carry_code_prompt_and_remedy() {
    let (p, file) = configured();
    let none = Approvals::new();
    let d = p.evaluate(
        Some("careful-local"),
        &[TabsClose],
        Some("8F2C0D4E-0000-4000-8000-000000000001"),
        "sessions.close",
        false,
        &none,
    );
    let e = d.clone().into_result().unwrap_err();
    assert_eq!(e.code, ErrorCode::ConfirmationRequired);
    for part in [
        "\"careful-local\"",
        "sessions.close",
        "8F2C0D4E-0000-4000-8000-000000000001",
        TabsClose.consequence(),
        "not asked again",
    ] {
        assert!(
            e.message.contains(part),
            "{part:?} missing from {}",
            e.message
        );
    }
    assert!(e.remedy.unwrap().contains("--confirm"));

    let e = p
        .evaluate(
            Some("linear-webhook"),
            &[TabsClose],
            None,
            "sessions.close",
            false,
            &none,
        )
        .to_error()
        .unwrap();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert!(e.message.contains("\"linear-webhook\"") && e.message.contains("tabs:close"));
    let remedy = e.remedy.unwrap();
    assert!(remedy.contains(&file.0.display().to_string()), "{remedy}");

    let e = p
        .evaluate(
            None,
            &[OutputRead],
            Some("S"),
            "sessions.snapshot",
            false,
            &none,
        )
        .to_error()
        .unwrap();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert!(e.remedy.unwrap().contains("--as local-reader"));

    let e = p
        .evaluate(
            Some("ghost"),
            &[TabsList],
            None,
            "sessions.list",
            false,
            &none,
        )
        .to_error()
        .unwrap();
    assert!(e.message.contains("unknown source \"ghost\""));
    assert!(e.remedy.unwrap().contains("maxx policy sources"));

    assert!(Decision::Allow {
        reason: String::new()
    }
    .to_error()
    .is_none());
}

#[test]
fn policy_path_resolution() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    };
    assert_eq!(
        policy_path_from(env(&[
            ("MAXX_CONTROL_POLICY_FILE", "/p.json"),
            ("XDG_CONFIG_HOME", "/x"),
            ("HOME", "/h")
        ])),
        Some(PathBuf::from("/p.json"))
    );
    assert_eq!(
        policy_path_from(env(&[
            ("MAXX_CONTROL_POLICY_FILE", ""),
            ("XDG_CONFIG_HOME", "/x"),
            ("HOME", "/h")
        ])),
        Some(PathBuf::from("/x/maxx/control-policy.json"))
    );
    assert_eq!(
        policy_path_from(env(&[("HOME", "/h")])),
        Some(PathBuf::from("/h/.config/maxx/control-policy.json"))
    );
    assert_eq!(policy_path_from(env(&[])), None);
}

/// A policy actor and the gate it loads, as the daemon runs them.
struct Running {
    actor: ActorRef<PolicyMsg>,
    gate: PolicyGate,
}

impl Running {
    fn stop(&self, reason: Option<String>) {
        self.actor.stop(reason);
    }
}

async fn spawn(path: Option<PathBuf>) -> Running {
    let gate = PolicyGate::default();
    let args = PolicyArgs {
        path,
        gate: gate.clone(),
    };
    let (actor, _) = Actor::spawn(None, PolicyActor, args).await.unwrap();
    Running { actor, gate }
}

/// Decided as a connection does, through the gate (async so every assertion reads alike).
async fn evaluate(p: &Running, caller: &str, caps: &[Capability], confirm: bool) -> Decision {
    p.gate
        .evaluate(Some(caller), caps, Some("S1"), "sessions.close", confirm)
}

async fn check(p: &Running, caller: &str, cap: Capability) -> CheckResult {
    let caller = Some(caller.to_string());
    ractor::call!(p.actor, |reply| PolicyMsg::Check {
        caller,
        capability: cap,
        target: None,
        reply,
    })
    .unwrap()
}

#[tokio::test]
async fn actor_remembers_once_per_source_and_check_records_nothing() {
    let file = TempPath::with(CONFIG);
    let actor = spawn(Some(file.0.clone())).await;

    // check never records: asking twice, then evaluating, still needs confirmation.
    assert_eq!(check(&actor, "careful-local", TabsClose).await.decision, C);
    assert_eq!(
        evaluate(&actor, "careful-local", &[TabsClose], false)
            .await
            .kind(),
        C
    );
    assert_eq!(check(&actor, "careful-local", TabsClose).await.decision, C);

    // A confirmed request is allowed and remembered for that source and capability.
    assert!(evaluate(&actor, "careful-local", &[TabsClose], true)
        .await
        .is_allow());
    assert!(evaluate(&actor, "careful-local", &[TabsClose], false)
        .await
        .is_allow());
    let c = check(&actor, "careful-local", TabsClose).await;
    assert_eq!(c.decision, A);
    assert!(c.reason.contains("once_per_source"), "{}", c.reason);
    assert_eq!(
        evaluate(&actor, "careful-local", &[OutputRead], false)
            .await
            .kind(),
        C
    );

    // A confirmed request that is denied overall records nothing.
    assert_eq!(
        evaluate(&actor, "careful-local", &[OutputRead, ProfilesList], true)
            .await
            .kind(),
        D
    );
    assert_eq!(
        evaluate(&actor, "careful-local", &[OutputRead], false)
            .await
            .kind(),
        C
    );

    // `always` sources are asked every time.
    assert!(evaluate(&actor, "hook-confirm", &[InputSend], true)
        .await
        .is_allow());
    assert_eq!(
        evaluate(&actor, "hook-confirm", &[InputSend], false)
            .await
            .kind(),
        C
    );

    let report = ractor::call!(actor.actor, PolicyMsg::Sources).unwrap();
    assert_eq!(report.config.status, ConfigStatus::Loaded);
    assert_eq!(
        report.approved_once,
        vec![Approval {
            source: "careful-local".into(),
            capability: TabsClose
        }]
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["sources"][0]["id"], LOCAL_CLI);
    assert_eq!(json["sources"][0]["builtin"], true);
    assert_eq!(json["config"]["status"], "loaded");
    assert_eq!(json["approved_once"][0]["capability"], "tabs:close");

    // A restart forgets the approvals.
    actor.stop(None);
    let actor = spawn(Some(file.0.clone())).await;
    assert_eq!(
        evaluate(&actor, "careful-local", &[TabsClose], false)
            .await
            .kind(),
        C
    );
    actor.stop(None);
}

#[tokio::test]
async fn actor_reports_a_rejected_file_and_enforces_built_ins() {
    let file = TempPath::with(r#"{"version":1,"sources":[{"id":"local-cli","kind":"local"}]}"#);
    let actor = spawn(Some(file.0.clone())).await;
    let report = ractor::call!(actor.actor, PolicyMsg::Sources).unwrap();
    assert_eq!(report.config.status, ConfigStatus::Rejected);
    assert!(report.config.reasons[0].contains("reserved"));
    assert_eq!(report.sources, builtin_sources());
    let json = serde_json::to_value(check(&actor, READONLY_EXTERNAL, TabsClose).await).unwrap();
    assert_eq!(json["decision"], "deny");
    assert_eq!(json["source"], READONLY_EXTERNAL);
    assert_eq!(json["source_kind"], "external");
    assert_eq!(json["capability"], "tabs:close");
    assert!(json["remedy"].is_string());
    let json = serde_json::to_value(check(&actor, "nobody", TabsList).await).unwrap();
    assert_eq!(json["decision"], "deny");
    assert_eq!(json["source_kind"], serde_json::Value::Null);
    assert!(evaluate(&actor, LOCAL_CLI, &[TabsClose], false)
        .await
        .is_allow());
    actor.stop(None);
}

#[tokio::test]
async fn a_reload_is_what_the_next_decision_sees_and_forgets_approvals_of_changed_sources() {
    let file = TempPath::with(CONFIG);
    let running = spawn(Some(file.0.clone())).await;
    assert!(evaluate(&running, "careful-local", &[TabsClose], true)
        .await
        .is_allow());
    assert!(evaluate(&running, "ext-reader", &[TabsList], false)
        .await
        .is_allow());

    // careful-local changes (its approval is dropped); ext-reader is removed.
    std::fs::write(
        &file.0,
        r#"{"version":1,"sources":[{"id":"careful-local","kind":"local","allow":["groups:list"],"confirm_scope":"once_per_source"}]}"#,
    )
    .unwrap();
    let report = ractor::call!(running.actor, PolicyMsg::Reload).unwrap();
    assert!(report.applied, "{:?}", report.config.reasons);
    assert_eq!(report.changed, vec!["careful-local".to_string()]);
    assert_eq!(
        evaluate(&running, "careful-local", &[TabsClose], false)
            .await
            .kind(),
        C,
        "the approval was given under the old rules"
    );
    assert_eq!(
        evaluate(&running, "ext-reader", &[TabsList], false)
            .await
            .kind(),
        D,
        "a removed source is unknown to the next decision"
    );
    let sources = ractor::call!(running.actor, PolicyMsg::Sources).unwrap();
    assert!(sources.approved_once.is_empty());
    running.stop(None);
}
