//! The command line's fast path: a grammar of the root flags and the one verb the arguments
//! name, built alone.
//!
//! clap's derive builds the whole command tree (every noun, every verb, every flag) before it
//! looks at the arguments: ~0.5 ms of a CLI process's start, most of it first touches of
//! memory and code, on every `maxx sessions create` a script runs. So [`parse`] finds the noun
//! and verb first, with the root's flags skipped by what they are (not by a list of their
//! own), and builds only those from the same derives (with the same `--json`). Anything it
//! does not know, or that this grammar refuses — `--help`, a typo, a missing value — goes to
//! the whole grammar, which parses it or reports it as before: this path gives a result only
//! where the whole one would give the same (pinned by the tests below).

use super::*;
use clap::{Args, FromArgMatches};
use std::ffi::OsString;

/// The command line parsed on the grammar of its own verb; `None`: use the whole grammar.
pub(super) fn parse(args: &[OsString]) -> Option<Cli> {
    let root = Globals::augment_args(clap::Command::new("maxx"));
    let (noun, verb) = noun_and_verb(&root, args)?;
    let noun = match noun {
        "sessions" => clap::Command::new("sessions").subcommand(sessions_verb(verb)?),
        "stream" => clap::Command::new("stream").subcommand(stream_verb(verb)?),
        "event" => clap::Command::new("event").subcommand(event_verb(verb)?),
        // An agent host runs one at every turn.
        "hook" => clap::Command::new("hook").subcommand(hook_verb(verb)?),
        _ => return None,
    };
    let matches = root
        .subcommand(with_json(noun))
        .try_get_matches_from(args)
        .ok()?;
    Cli::from_arg_matches(&matches).ok()
}

/// The first two words that are neither a root flag nor its value. `None` at anything else
/// that starts with `-` (a verb's flag before the verb, a short flag, `--`).
fn noun_and_verb<'a>(root: &clap::Command, args: &'a [OsString]) -> Option<(&'a str, &'a str)> {
    let mut words = Vec::with_capacity(2);
    let mut rest = args.iter().skip(1);
    while words.len() < 2 {
        let word = rest.next()?.to_str()?;
        let Some(long) = word.strip_prefix("--") else {
            if word.starts_with('-') {
                return None;
            }
            words.push(word);
            continue;
        };
        let (name, inline_value) = match long.split_once('=') {
            Some((name, _)) => (name, true),
            None => (long, false),
        };
        let flag = root.get_arguments().find(|a| a.get_long() == Some(name))?;
        if flag.get_action().takes_values() && !inline_value {
            rest.next()?;
        }
    }
    Some((words[0], words[1]))
}

/// `fn $name(verb) -> Option<Command>`: the verb's command, from its arguments' derive.
macro_rules! verbs {
    ($name:ident: $($verb:literal => $args:ty),* $(,)?) => {
        fn $name(verb: &str) -> Option<clap::Command> {
            match verb {
                $($verb => Some(<$args>::augment_args(clap::Command::new($verb))),)*
                _ => None,
            }
        }
    };
}

verbs!(sessions_verb:
    "create" => CreateArgs,
    "get" => SelfIdArg,
    "list" => ListArgs,
    "update" => UpdateArgs,
    "action" => ActionArgs,
    "cancel" => IdArg,
    "wait" => WaitArgs,
    "watch" => WatchArgs,
    "events" => EventsArgs,
    "declare-state" => DeclareStateArgs,
    "emit-event" => EmitEventArgs,
    "set-metadata" => SetMetadataArgs,
    "remove-metadata" => RemoveMetadataArgs,
    "clear-metadata" => SourcedIdArgs,
    "set-state" => SetStateArgs,
    "set-summary" => SetSummaryArgs,
    "set-result" => SetResultArgs,
    "clear-result" => SourcedIdArgs,
    "set-result-schema" => SetResultSchemaArgs,
    "clear-result-schema" => SourcedIdArgs,
    "set-agent-type" => SetAgentTypeArgs,
    "ask" => AskArgs,
    "rec" => RecArgs,
    "answer" => AnswerArgs,
    "set-group" => SetGroupArgs,
    "set-parent" => SetParentArgs,
    "archive" => ArchiveArgs,
    "snapshot" => SnapshotArgs,
    "dump" => DumpArgs,
    "inspect" => SelfIdArg,
    "run" => RunArgs,
    "send-keys" => SendKeysArgs,
    "paste" => PasteArgs,
    "resize" => ResizeArgs,
    "set-restart-policy" => SetRestartPolicyArgs,
    "restart" => RestartArgs,
);

verbs!(stream_verb:
    "watch" => StreamWatchArgs,
    "wait" => StreamWaitArgs,
);

verbs!(event_verb:
    "emit" => EmitArgs,
);

verbs!(hook_verb:
    "claude-code" => HookRunArgs,
    "codex" => HookRunArgs,
    "install" => HookInstallArgs,
);

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<OsString> {
        line.split(' ').map(Into::into).collect()
    }

    /// The whole grammar's answer for a line, as text to compare.
    fn whole(line: &str) -> String {
        let matches = command().try_get_matches_from(args(line)).expect(line);
        format!("{:?}", Cli::from_arg_matches(&matches).expect(line))
    }

    /// Every verb of the nouns this path serves is built here exactly as the whole grammar
    /// builds it (its flags, `--json` among them, their parsers, defaults, conflicts: the
    /// arguments' debug form), and none is left out but the one without arguments.
    #[test]
    fn each_verb_is_the_whole_grammars_verb() {
        let mut whole = command();
        whole.build();
        let mut served = 0;
        for noun in ["sessions", "stream", "event", "hook"] {
            let tree = whole.find_subcommand(noun).expect(noun);
            for full in tree.get_subcommands().filter(|v| v.get_name() != "help") {
                let name = full.get_name();
                let found = match noun {
                    "sessions" => sessions_verb(name),
                    "stream" => stream_verb(name),
                    "event" => event_verb(name),
                    _ => hook_verb(name),
                };
                let Some(mut alone) = found else {
                    assert_eq!(
                        (noun, name),
                        ("sessions", "register-current"),
                        "`{noun} {name}` is missing from the fast path's tables"
                    );
                    continue;
                };
                let mut root = Globals::augment_args(clap::Command::new("maxx")).subcommand(
                    with_json(clap::Command::new(noun).subcommand(alone.clone())),
                );
                root.build();
                alone = root
                    .find_subcommand(noun)
                    .and_then(|n| n.find_subcommand(name))
                    .cloned()
                    .expect(name);
                let shape = |c: &clap::Command| {
                    c.get_arguments()
                        .map(|a| format!("{a:?}"))
                        .collect::<Vec<_>>()
                };
                assert_eq!(shape(&alone), shape(full), "`{noun} {name}`");
                assert_eq!(
                    alone.get_all_aliases().collect::<Vec<_>>(),
                    full.get_all_aliases().collect::<Vec<_>>()
                );
                served += 1;
            }
        }
        assert!(served > 35, "served {served} verbs");
    }

    /// Lines this path takes give what the whole grammar gives; the rest it leaves to it.
    #[test]
    fn it_answers_as_the_whole_grammar_or_not_at_all() {
        for line in [
            "maxx sessions create --no-focus --command true",
            "maxx sessions create --title t --metadata a=b --metadata c= --command=true",
            "maxx --as me sessions get abcd",
            "maxx --socket /tmp/s sessions --as me list --filter k=v",
            "maxx --socket=/tmp/s sessions wait abcd --lifecycle exited --timeout 5m",
            "maxx sessions send-keys abcd C-c Enter --as x --confirm",
            "maxx --hosts a,b sessions list",
            "maxx stream wait --group g --all exited --timeout 1h",
            "maxx event emit --session abcd --type t --json {}",
            "maxx sessions snapshot abcd --scrollback",
            "maxx sessions list --json",
            "maxx sessions watch abcd --json",
            "maxx hook claude-code --strict",
            "maxx hook install codex --print",
        ] {
            let fast = parse(&args(line)).unwrap_or_else(|| panic!("not taken: {line}"));
            assert_eq!(format!("{fast:?}"), whole(line), "{line}");
        }
        for line in [
            "maxx sessions create --help", // help
            "maxx sessions",               // no verb
            "maxx sessions register-current",
            "maxx ls",
            "maxx --version",
            "maxx -h",
            "maxx --nope sessions list",
            "maxx sessions lsit",
            "maxx sessions wait abcd --timeout soon", // a bad value: the whole grammar reports it
        ] {
            assert!(parse(&args(line)).is_none(), "taken: {line}");
        }
    }
}
