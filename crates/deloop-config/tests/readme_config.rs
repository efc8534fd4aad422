//! The README's configuration reference is real: each `toml` block of its
//! "Configuration" section parses as a `deloop.toml` (unknown keys are an
//! error), and every key of the repetition guards is listed in it.

use std::path::Path;

use deloop_config::Config;
use deloop_core::repetition::ClampConfig;

/// The `toml` blocks of the README's "Configuration" section.
fn config_blocks() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md at the workspace root");
    let start = readme
        .find("\n## Configuration")
        .expect("a Configuration section");
    let section = &readme[start + 1..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    section
        .split("```toml\n")
        .skip(1)
        .map(|b| b[..b.find("\n```").expect("a closed block")].to_owned())
        .collect()
}

#[test]
fn every_config_block_parses_as_deloop_toml() {
    let blocks = config_blocks();
    assert!(blocks.len() >= 2, "found {} toml blocks", blocks.len());
    for b in &blocks {
        if let Err(e) = Config::parse(b) {
            panic!("a README config block does not parse: {e}\n{b}");
        }
    }
}

#[test]
fn every_repetition_guard_key_is_listed() {
    let text = config_blocks().join("\n");
    let defaults = toml::Table::try_from(ClampConfig::default()).expect("serializable");
    let mut missing = Vec::new();
    for (table, keys) in &defaults {
        let header = format!("[guards.clamp.{table}]");
        let Some(at) = text.find(&header) else {
            missing.push(header);
            continue;
        };
        let body = &text[at + header.len()..];
        let body = &body[..body.find("\n[").unwrap_or(body.len())];
        let keys = keys.as_table().expect("a table of keys");
        for key in keys.keys() {
            let listed = body.lines().any(|l| {
                let l = l.trim_start_matches(['#', ' ']);
                l.strip_prefix(key.as_str())
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
            });
            if !listed {
                missing.push(format!("guards.clamp.{table}.{key}"));
            }
        }
    }
    assert!(missing.is_empty(), "not in the README: {missing:?}");
}
