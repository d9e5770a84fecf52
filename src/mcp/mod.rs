//! `maxx mcp`: an MCP server on stdio for agent hosts (Claude Code, Codex, Cursor, ...),
//! built on the official Rust SDK (`rmcp`).
//!
//! - [`tools`]: the tool catalog, one entry per tool (name, method, wire params type,
//!   capabilities, example). Adding a tool is one entry there.
//! - [`server`]: the rmcp handler: list the tools, turn a call into one socket request as
//!   the `--as` source, map the answer to a tool result; progress and cancellation for waits.
//! - `skill.md`: the operating guide `maxx mcp --skill` prints.
//!
//! `maxx mcp --schema` prints the catalog as JSON: every tool with its method, the
//! capabilities its example call needs, its input schema and an example.

mod server;
mod tools;

use crate::cli::McpArgs;
use crate::client::Target;
use crate::{exit, report};
use serde_json::{json, Value};

/// The operating guide for an agent (`maxx mcp --skill`).
pub const SKILL: &str = include_str!("skill.md");

/// `maxx mcp [--schema | --skill]`.
pub fn command(target: &Target, caller: &Option<String>, confirm: bool, args: McpArgs) -> i32 {
    if args.schema {
        println!("{}", crate::views::json_text(&catalog()));
        return exit::OK;
    }
    if args.skill {
        print!("{SKILL}");
        return exit::OK;
    }
    if confirm {
        // Approving once for every call an agent makes would turn a confirmation into none.
        return report::usage_error(
            "maxx mcp never sends confirm: an agent cannot approve its own calls",
            "confirm with the CLI (`maxx --confirm ...`), or allow the capability for this \
             source in the policy file",
        );
    }
    server::run(target.clone(), caller.clone())
}

/// The MCP tools' names and the socket method each sends (`maxx --capabilities`).
pub fn tool_names() -> Value {
    Value::Array(
        tools::TOOLS
            .iter()
            .map(|t| serde_json::json!({"tool": t.name, "method": t.method}))
            .collect(),
    )
}

/// The tool catalog as `maxx mcp --schema` prints it.
pub fn catalog() -> Value {
    let tools: Vec<Value> = tools::TOOLS
        .iter()
        .map(|t| {
            let mcp = t.to_mcp();
            json!({
                "name": t.name,
                "method": t.method,
                "capabilities": t.capabilities.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
                "more_capabilities": (!t.more.is_empty()).then_some(t.more),
                "waits": t.waits,
                "description": t.description,
                "inputSchema": mcp.input_schema,
                "annotations": mcp.annotations,
                "example": serde_json::from_str::<Value>(t.example).expect("examples are JSON"),
            })
        })
        .collect();
    json!({
        "schema_version": 1,
        "server": {"name": "maxx", "version": env!("CARGO_PKG_VERSION")},
        "protocol_version": server::PROTOCOL.as_str(),
        "tools": tools,
    })
}
