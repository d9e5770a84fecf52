//! The Python client (`clients/python`, issue 21): its own pytest suite against a real daemon
//! (this build's `maxx`), `mypy --strict` on the package, and its method table against the
//! daemon's. Python, pytest and mypy come from the virtualenv `.ci/run` prepares
//! (`target/ci-venv`, pinned versions); the suite runs the package from the source tree.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The virtualenv's python: `$MAXX_TEST_PYTHON`, else `target/ci-venv/bin/python` (where
/// `.ci/run` installs pytest and mypy). `None` if it is missing or lacks either.
fn python() -> Option<PathBuf> {
    let path = std::env::var_os("MAXX_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(ROOT).join("target/ci-venv/bin/python"));
    let imports = Command::new(&path)
        .args(["-c", "import pytest, mypy"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    imports.is_ok_and(|s| s.success()).then_some(path)
}

/// Run the venv's python from the repo root on the package's source tree.
fn run(python: &Path, args: &[&str]) -> Output {
    Command::new(python)
        .args(args)
        .current_dir(ROOT)
        .env("PYTHONPATH", Path::new(ROOT).join("clients/python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        // The suite starts its own daemon with this binary, the one cargo built.
        .env("MAXX_BIN", maxx_bin())
        .env_remove("MAXX_CONTROL_DIR")
        .env_remove("MAXX_SESSION_ID")
        .env_remove("MAXX_SURFACE_ID")
        .env_remove("MAXX_REGISTRATION_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("run the virtualenv's python")
}

fn no_venv() {
    skip_or_fail(
        "no virtualenv with pytest and mypy at target/ci-venv (`.ci/run` installs them; or set \
         MAXX_TEST_PYTHON)",
    );
}

fn assert_ran(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `pytest clients/python/tests`: the loop, errors, iterators, asyncio and the supervisor
/// example, each against a daemon the suite starts.
#[test]
fn the_python_client_suite_passes() {
    let Some(python) = python() else {
        return no_venv();
    };
    let out = run(
        &python,
        &[
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "clients/python/tests",
        ],
    );
    assert_ran("pytest clients/python/tests", &out);
}

/// `mypy --strict clients/python/maxx`, for Python 3.10 (the package's floor).
#[test]
fn the_python_client_type_checks() {
    let Some(python) = python() else {
        return no_venv();
    };
    let out = run(
        &python,
        &[
            "-m",
            "mypy",
            "--strict",
            // The oldest Python the package supports (pyproject's requires-python).
            "--python-version=3.10",
            "--cache-dir=/dev/null",
            "clients/python/maxx",
        ],
    );
    assert_ran("mypy --strict clients/python/maxx", &out);
}

/// Every method this build implements has a client verb, and the client sends no other.
#[test]
fn the_python_client_covers_every_method() {
    let Some(python) = python() else {
        return no_venv();
    };
    let out = run(
        &python,
        &["-c", "import json, maxx; print(json.dumps(maxx.methods()))"],
    );
    assert_ran("maxx.methods()", &out);
    let client: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    let mut daemon: Vec<String> = maxx_protocol::request::all_methods()
        .map(str::to_string)
        .collect();
    daemon.sort();
    assert_eq!(
        client, daemon,
        "the Python client's methods (left), the daemon's (right)"
    );
}
