//! What a person installs besides the binary (issue 22): shell completions and a man page
//! generated from the clap definition, so they can never drift from the CLI.

use crate::common::maxx_bin;
use std::process::Command;

fn generated(args: &[&str]) -> String {
    let out = Command::new(maxx_bin()).args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    assert!(out.stderr.is_empty(), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Complete the last word of `line` the way bash does, with the generated script loaded.
fn bash_complete(words: &[&str]) -> Vec<String> {
    let script = format!(
        "source <({bin} completions bash); COMP_WORDS=({words}); COMP_CWORD={cword}; \
         _maxx maxx {cur} {prev}; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        bin = maxx_bin(),
        words = words.join(" "),
        cword = words.len() - 1,
        cur = words[words.len() - 1],
        prev = words[words.len() - 2],
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn completions_and_the_man_page_come_from_the_cli_definition() {
    assert_eq!(bash_complete(&["maxx", "sess"]), ["sessions"]);
    assert_eq!(
        bash_complete(&["maxx", "sessions", "set-re"]),
        ["set-result", "set-result-schema", "set-restart-policy"]
    );
    assert!(bash_complete(&["maxx", "sessions", "wait", "--lif"]).contains(&"--lifecycle".into()));
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let text = generated(&["completions", shell]);
        assert!(text.contains("set-restart-policy"), "{shell}");
    }
    let man = generated(&["man"]);
    assert!(man.contains(".TH maxx 1"), "{man}");
    assert!(man.contains("sessions"));
    // A shell it does not know is a usage error.
    let out = Command::new(maxx_bin())
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
