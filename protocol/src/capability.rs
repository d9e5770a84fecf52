//! Capabilities: the typed permissions the capability policy grants, each with a stable wire
//! name (`tabs:list`, `tabs:spawn`, ..., `surface:attach`).
//!
//! A request resolves to a caller source and one or more capabilities; the daemon's policy
//! answers allow, deny or confirm for each before any side effect runs. The wire names are
//! the seed's and never change: they appear in policy files (`allow`, `confirm`), in
//! `policy.check --capability`, in error messages and in the log.
//!
//! Reads are `tabs:list`, `groups:list`, `profiles:list` and `output:read`; every other
//! capability mutates (see [`Capability::is_mutation`]), which is what the policy's safe
//! defaults key on.

use crate::error::ErrorBody;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// One capability of the policy model, serialised as its wire name (`"tabs:spawn"`).
///
/// Variants are ordered as [`Capability::ALL`] lists them, so sets of capabilities print in
/// a stable order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `tabs:list`: read session records, audit logs and the event stream (`sessions.get`,
    /// `sessions.list`, `sessions.watch`, `stream.watch`, ...).
    TabsList,
    /// `tabs:spawn`: create a session (`sessions.create`); create-time metadata rides here.
    TabsSpawn,
    /// `tabs:restart`: end a session's process and start it again (`sessions.restart`).
    TabsRestart,
    /// `tabs:focus`: change which session is focused.
    TabsFocus,
    /// `tabs:close`: close or archive a session, ending its process.
    TabsClose,
    /// `input:send`: write text into a session's terminal (`sessions.paste`, input actions).
    InputSend,
    /// `keys:press`: send key presses, interrupts included (`sessions.send-keys`). Text
    /// typed through `send-keys` needs `input:send` too, and an interrupt whose signal ends
    /// the program needs `tabs:close` too (see `Call::capabilities`).
    KeysPress,
    /// `state:set`: declare state, events, workflow state, summaries and results.
    StateSet,
    /// `metadata:set`: change a session's metadata after creation.
    MetadataSet,
    /// `groups:create`: put a session in a group or under a parent.
    GroupsCreate,
    /// `profiles:list`: list agent profiles (names and env key names, never values).
    ProfilesList,
    /// `output:read`: read what is on a session's screen (`sessions.snapshot`, `sessions.run`,
    /// `sessions.wait --until`). Privacy-sensitive: no source holds it until the user's policy
    /// file allowlists it.
    OutputRead,
    /// `groups:list`: list groups and their members.
    GroupsList,
    /// `automation:trigger`: trigger an automation. Part of the model; no method uses it yet.
    AutomationTrigger,
    /// `surface:attach`: a person attaches a terminal to a session, seeing its screen and
    /// typing into it (`maxx attach`). A mutation: an attached person sends input and resizes
    /// the PTY. The built-in `local-cli` source holds it; external, webhook and token sources
    /// hold it only when a policy file allowlists it. Attaching shows the screen, so
    /// `sessions.attach` needs `output:read` as well, which no source holds by default.
    SurfaceAttach,
}

impl Capability {
    /// Every capability, in wire-documentation order.
    pub const ALL: &'static [Capability] = &[
        Capability::TabsList,
        Capability::TabsSpawn,
        Capability::TabsRestart,
        Capability::TabsFocus,
        Capability::TabsClose,
        Capability::InputSend,
        Capability::KeysPress,
        Capability::StateSet,
        Capability::MetadataSet,
        Capability::GroupsCreate,
        Capability::ProfilesList,
        Capability::OutputRead,
        Capability::GroupsList,
        Capability::AutomationTrigger,
        Capability::SurfaceAttach,
    ];

    /// The wire name, e.g. `"tabs:spawn"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::TabsList => "tabs:list",
            Capability::TabsSpawn => "tabs:spawn",
            Capability::TabsRestart => "tabs:restart",
            Capability::TabsFocus => "tabs:focus",
            Capability::TabsClose => "tabs:close",
            Capability::InputSend => "input:send",
            Capability::KeysPress => "keys:press",
            Capability::StateSet => "state:set",
            Capability::MetadataSet => "metadata:set",
            Capability::GroupsCreate => "groups:create",
            Capability::ProfilesList => "profiles:list",
            Capability::OutputRead => "output:read",
            Capability::GroupsList => "groups:list",
            Capability::AutomationTrigger => "automation:trigger",
            Capability::SurfaceAttach => "surface:attach",
        }
    }

    /// Parse a wire name (`"tabs:close"`). Anything else is `invalid_request`, with the valid
    /// names as the remedy.
    pub fn parse(name: &str) -> Result<Capability, ErrorBody> {
        Capability::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == name)
            .ok_or_else(|| {
                let shown: String = name.chars().take(64).collect();
                ErrorBody::invalid(format!("unknown capability {shown:?}"))
                    .with_remedy(format!("use one of: {}", Capability::wire_names()))
            })
    }

    /// Whether the capability changes terminal or session state. `false` only for the reads
    /// `tabs:list`, `groups:list`, `profiles:list` and `output:read`; `surface:attach` is a
    /// mutation (an attached person types into the session and resizes it).
    ///
    /// The policy's safe defaults key on this: external, webhook and token sources never
    /// mutate unless allowlisted, and an unlisted mutation by a local source asks for
    /// confirmation.
    pub fn is_mutation(self) -> bool {
        !matches!(
            self,
            Capability::TabsList
                | Capability::GroupsList
                | Capability::ProfilesList
                | Capability::OutputRead
        )
    }

    /// Whether the capability exposes what a session's terminal shows (`output:read`), which
    /// needs an explicit opt-in in the user's policy file whatever the source.
    pub fn needs_opt_in(self) -> bool {
        matches!(self, Capability::OutputRead)
    }

    /// What granting the capability lets a caller do, as a clause for confirmation prompts
    /// and diagnostics (`"closes the session's terminal and ends its process"`).
    pub fn consequence(self) -> &'static str {
        match self {
            Capability::TabsList => "reads session records, audit logs and the event stream",
            Capability::TabsSpawn => "starts a new terminal session running a command",
            Capability::TabsRestart => "ends the session's process and starts it again",
            Capability::TabsFocus => "changes which session is focused",
            Capability::TabsClose => "closes the session's terminal and ends its process",
            Capability::InputSend => "types text into the session's terminal",
            Capability::KeysPress => {
                "sends key presses, interrupts included, to the session's terminal"
            }
            Capability::StateSet => "records declared state, events or results on the session",
            Capability::MetadataSet => "changes the session's metadata",
            Capability::GroupsCreate => "changes group membership or parent edges",
            Capability::ProfilesList => "lists agent profiles (env key names, never values)",
            Capability::OutputRead => "reads the text on the session's screen",
            Capability::GroupsList => "lists groups and their members",
            Capability::AutomationTrigger => "triggers an automation",
            Capability::SurfaceAttach => {
                "attaches a person's terminal, who then sees the session's screen and types into it"
            }
        }
    }

    /// Every wire name, comma-separated, for help text and remedies.
    pub fn wire_names() -> String {
        Capability::ALL
            .iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Capability {
    type Err = ErrorBody;

    /// Same as [`Capability::parse`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Capability::parse(s)
    }
}

impl Serialize for Capability {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Capability {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Capability::parse(&name).map_err(|e| serde::de::Error::custom(e.message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn wire_names_round_trip() {
        for &c in Capability::ALL {
            assert_eq!(Capability::parse(c.as_str()).unwrap(), c);
            assert_eq!(c.as_str().parse::<Capability>().unwrap(), c);
            assert_eq!(c.to_string(), c.as_str());
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            assert_eq!(serde_json::from_str::<Capability>(&json).unwrap(), c);
        }
    }

    #[test]
    fn the_seed_names_are_all_there_and_distinct() {
        let names: Vec<&str> = Capability::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            names,
            [
                "tabs:list",
                "tabs:spawn",
                "tabs:restart",
                "tabs:focus",
                "tabs:close",
                "input:send",
                "keys:press",
                "state:set",
                "metadata:set",
                "groups:create",
                "profiles:list",
                "output:read",
                "groups:list",
                "automation:trigger",
                "surface:attach",
            ]
        );
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
        // ALL is in declaration order, so sorted sets print in the documented order.
        let mut sorted = Capability::ALL.to_vec();
        sorted.sort();
        assert_eq!(sorted, Capability::ALL);
    }

    #[test]
    fn unknown_names_are_invalid_request_with_the_valid_names() {
        for bad in ["tabs:explode", "", "TABS:LIST", "tabs:list ", "tabs"] {
            let err = Capability::parse(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidRequest, "{bad:?}");
            assert!(
                err.message.contains("unknown capability"),
                "{}",
                err.message
            );
            assert!(err.remedy.as_deref().unwrap().contains("output:read"));
        }
        let err = serde_json::from_str::<Capability>("\"tabs:explode\"").unwrap_err();
        assert!(err.to_string().contains("unknown capability"), "{err}");
        assert!(serde_json::from_str::<Capability>("3").is_err());
    }

    #[test]
    fn long_unknown_names_are_truncated_in_the_message() {
        let long = "x".repeat(10_000);
        let err = Capability::parse(&long).unwrap_err();
        assert!(err.message.len() < 200);
    }

    #[test]
    fn reads_and_mutations() {
        let reads: Vec<Capability> = Capability::ALL
            .iter()
            .copied()
            .filter(|c| !c.is_mutation())
            .collect();
        assert_eq!(
            reads,
            [
                Capability::TabsList,
                Capability::ProfilesList,
                Capability::OutputRead,
                Capability::GroupsList,
            ]
        );
        assert!(Capability::SurfaceAttach.is_mutation());
        assert!(Capability::AutomationTrigger.is_mutation());
        let opt_in: Vec<Capability> = Capability::ALL
            .iter()
            .copied()
            .filter(|c| c.needs_opt_in())
            .collect();
        assert_eq!(opt_in, [Capability::OutputRead]);
    }

    #[test]
    fn every_capability_has_a_consequence() {
        for &c in Capability::ALL {
            assert!(!c.consequence().is_empty());
        }
    }
}

#[cfg(test)]
mod gate_tests {
    use super::*;
    use crate::request::Call;
    use serde_json::json;

    fn caps(method: &str, params: serde_json::Value) -> Vec<Capability> {
        Call::decode(method, Some(params)).unwrap().capabilities()
    }

    const ID: &str = "2B0E0000-0000-4000-8000-000000000000";

    #[test]
    fn text_through_send_keys_is_input() {
        use Capability::*;
        let keys = |k: serde_json::Value, literal: bool| {
            caps(
                "sessions.send-keys",
                json!({"session_id": ID, "keys": k, "literal": literal}),
            )
        };
        assert_eq!(
            keys(json!(["C-c", "Enter", "M-x", "Up"]), false),
            [KeysPress]
        );
        for k in [
            json!(["ls"]),
            json!(["l"]),
            json!(["S-x"]),
            json!(["C-c", "rm"]),
        ] {
            assert_eq!(keys(k.clone(), false), [KeysPress, InputSend], "{k}");
        }
        assert_eq!(keys(json!(["Enter"]), true), [KeysPress, InputSend]);
    }

    #[test]
    fn ending_signals_need_tabs_close_and_attach_reads_the_screen() {
        use Capability::*;
        let interrupt = |signal: Option<&str>| {
            let mut p = json!({"session_id": ID, "action": "interrupt"});
            if let Some(s) = signal {
                p["signal"] = json!(s);
            }
            caps("sessions.action", p)
        };
        assert_eq!(interrupt(None), [KeysPress]);
        assert_eq!(interrupt(Some("SIGINT")), [KeysPress]);
        for s in ["SIGTERM", "SIGKILL", "SIGHUP", "SIGQUIT"] {
            assert_eq!(interrupt(Some(s)), [KeysPress, TabsClose], "{s}");
        }
        assert_eq!(
            caps("sessions.attach", json!({})),
            [SurfaceAttach, OutputRead]
        );
    }
}
