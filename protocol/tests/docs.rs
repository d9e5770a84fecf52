//! `docs/protocol.md` against the code: every method has its row in the capability table,
//! with the base capabilities its family's table declares, and its own section.

use maxx_protocol::request::{all_methods, spec};
use std::collections::BTreeMap;

fn protocol_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md");
    std::fs::read_to_string(path).expect("docs/protocol.md is readable")
}

/// The capability table's rows: method → its base capabilities as written.
fn capability_table(doc: &str) -> BTreeMap<String, Vec<String>> {
    let start = doc
        .find("| method | base (`MethodSpec`) | per request |")
        .expect("the capability table is in docs/protocol.md");
    doc[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let method = cells[1].trim_matches('`').to_string();
            let caps = match cells[2] {
                "none" => Vec::new(),
                caps => caps
                    .split(',')
                    .map(|c| c.trim().trim_matches('`').to_string())
                    .collect(),
            };
            (method, caps)
        })
        .collect()
}

#[test]
fn the_capability_table_is_the_code_s() {
    let doc = protocol_md();
    let table = capability_table(&doc);
    let methods: Vec<&str> = all_methods().collect();
    for m in &methods {
        let spec = spec(m).unwrap();
        let want: Vec<String> = spec
            .capabilities
            .iter()
            .map(|c| c.as_str().to_string())
            .collect();
        assert_eq!(
            table.get(*m),
            Some(&want),
            "docs/protocol.md's capability row for {m}"
        );
    }
    for documented in table.keys() {
        assert!(
            methods.contains(&documented.as_str()),
            "docs/protocol.md lists {documented}, which the daemon does not implement"
        );
    }
}

#[test]
fn every_method_is_described() {
    let doc = protocol_md();
    // Beyond the capability table: a heading or a row of a method table names it.
    let table_start = doc.find("| method | base (`MethodSpec`)").unwrap();
    let table_end = table_start + doc[table_start..].find("\n\n").unwrap();
    let rest = format!("{}{}", &doc[..table_start], &doc[table_end..]);
    for m in all_methods() {
        let named = format!("`{m}`");
        let described = rest.lines().any(|l| {
            let heading = l.starts_with('#')
                && l.split(|c: char| c.is_whitespace() || c == '`' || c == ',')
                    .any(|w| w == m);
            heading || ((l.starts_with("| ") || l.starts_with("- ")) && l.contains(&named))
        });
        assert!(described, "docs/protocol.md has no section or row for {m}");
    }
}
