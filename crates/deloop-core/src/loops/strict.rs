//! The anti-loop protocol (seed 002): procedures, argument equivalence and
//! fingerprints.
//!
//! A *procedure* is (tool, equivalent arguments, context). In the `strict`
//! profile, when a call's outcome equals the outcome of the immediately
//! preceding call of the same procedure in the scope (twice in a row), the
//! run is terminated and the loop's fingerprint reported:
//!
//! `AGENT::<agent>::<operation>::<context>::<result-hash>`
//!
//! * `agent`: the agent id (`main` when absent);
//! * `operation`: the tool (`read`, `edit`, …); for shell tools the kind of
//!   command: `grep` (grep, egrep, fgrep, rg, ag, ack, `git grep`), `test`
//!   (pytest, `cargo test`, `npm test`, `go test`, `make test`, …), `build`
//!   (`cargo build`, `make`, `npm run build`, `go build`, `tsc`, …), else `bash`;
//! * `context`: the files or paths involved (argument keys such as `path`,
//!   `file`, `paths`, `dir`, `url`; for shell commands the non-flag operands),
//!   comma-separated, `-` when none; at most 80 characters;
//! * `result-hash`: the first 12 hex digits of the normalised outcome digest.
//!
//! `::` never occurs inside a component (it is collapsed to `:`), and
//! whitespace runs become one space.
//!
//! ## Argument equivalence
//! Pluggable through [`ArgEquivalence`]. The built-in [`SearchEquivalence`]
//! makes two search calls equivalent when they differ only in the *pattern*
//! spelling: letter case, the regex metacharacters `. * + ? ^ $ ( ) [ ] { } |`,
//! quotes, and the escapes `\b \B \s \S \w \W \d \D` are ignored. So
//! `grep "double.*jump"` ≈ `grep "doubleJump"` (both `doublejump`), but
//! `grep "jump"` ≠ `grep "doubleJump"`. Flags (order-insensitive) and paths
//! (after [`normalise_path`]) must match. Search calls are the tools `grep`,
//! `rg`, `search`, `search_dir`, `search_file`, `grep_search`, `code_search`,
//! … with a `pattern`/`query`/`regex` argument, and shell calls whose command
//! is a single grep-like program (no pipes or `;`/`&&`). Every other call is
//! its own procedure: canonical arguments after [`normalise_args`] (shell
//! commands tokenised with flags in any order, paths, numbers and whitespace
//! normalised; see [`super::normalise`]).

use serde_json::Value;

use super::hashing::{canonical_string, Canon};
use super::normalise::{command_of, normalise_args, normalise_path, PATH_KEYS, SHELL_TOOLS};

/// A call seen as a procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Procedure {
    /// Operation kind (`grep`, `read`, `test`, …).
    pub operation: String,
    /// Files/paths involved, comma-separated (`-` when none).
    pub context: String,
    /// Equivalence key: two calls are the same procedure iff their keys are equal.
    pub key: String,
}

/// Decides which calls are the same procedure.
pub trait ArgEquivalence: std::fmt::Debug + Send + Sync {
    /// The procedure of a call (tool name already normalised), or `None`
    /// to fall back to exact argument equality.
    fn procedure(&self, tool: &str, args: &Value) -> Option<Procedure>;
}

/// The built-in equivalence: search-pattern normalisation (see module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchEquivalence;

const SEARCH_TOOLS: &[&str] = &[
    "grep",
    "rg",
    "ripgrep",
    "egrep",
    "fgrep",
    "search",
    "search_dir",
    "search_file",
    "search_files",
    "grep_search",
    "code_search",
    "codebase_search",
    "find_in_files",
];
const PATTERN_KEYS: &[&str] = &["pattern", "query", "regex", "search_term", "search", "q"];
const GREP_PROGRAMS: &[&str] = &["grep", "egrep", "fgrep", "rg", "ag", "ack"];

impl ArgEquivalence for SearchEquivalence {
    fn procedure(&self, tool: &str, args: &Value) -> Option<Procedure> {
        if SEARCH_TOOLS.contains(&tool) {
            let pattern = PATTERN_KEYS
                .iter()
                .find_map(|k| args.get(*k).and_then(Value::as_str))?;
            let mut rest = args.clone();
            if let Value::Object(m) = &mut rest {
                for k in PATTERN_KEYS {
                    m.remove(*k);
                }
            }
            let context = context_of(args);
            return Some(Procedure {
                operation: "grep".into(),
                context,
                key: format!(
                    "search\0{tool}\0{}\0{}",
                    normalise_pattern(pattern),
                    canonical_string(&normalise_args(tool, &rest), Canon::Args)
                ),
            });
        }
        if SHELL_TOOLS.contains(&tool) {
            let command = command_of(args)?;
            let words = shell_words(command)?;
            let (program, operands) = split_program(&words)?;
            if !GREP_PROGRAMS.contains(&program) {
                return None;
            }
            let mut flags: Vec<&str> = Vec::new();
            let mut pattern: Option<&str> = None;
            let mut paths: Vec<&str> = Vec::new();
            let mut it = operands.iter();
            while let Some(w) = it.next() {
                if w == "-e" || w == "--regexp" {
                    pattern = it.next().map(String::as_str);
                } else if w.starts_with('-') && w.len() > 1 {
                    flags.push(w);
                } else if pattern.is_none() {
                    pattern = Some(w);
                } else {
                    paths.push(w);
                }
            }
            let pattern = pattern?;
            let paths: Vec<String> = paths.into_iter().map(normalise_path).collect();
            let mut flag_chars: Vec<String> = Vec::new();
            for f in flags {
                if let Some(long) = f.strip_prefix("--") {
                    flag_chars.push(long.to_string());
                } else {
                    flag_chars.extend(f[1..].chars().map(String::from));
                }
            }
            flag_chars.sort();
            flag_chars.dedup();
            let context = if paths.is_empty() {
                "-".to_string()
            } else {
                paths.join(",")
            };
            return Some(Procedure {
                operation: "grep".into(),
                context: clip(&context),
                key: format!(
                    "grep\0{}\0{}\0{}",
                    flag_chars.join(" "),
                    normalise_pattern(pattern),
                    paths.join("\0")
                ),
            });
        }
        None
    }
}

/// Normalises a search pattern: lower-case, regex metacharacters, quotes
/// and class escapes removed (see module docs).
///
/// ```
/// use deloop_core::loops::strict::normalise_pattern;
/// assert_eq!(normalise_pattern("double.*jump"), normalise_pattern("doubleJump"));
/// assert_ne!(normalise_pattern("jump"), normalise_pattern("doubleJump"));
/// ```
pub fn normalise_pattern(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('b' | 'B' | 's' | 'S' | 'w' | 'W' | 'd' | 'D') => {
                    chars.next();
                }
                Some(_) => {
                    // An escaped literal: keep the literal itself.
                    if let Some(n) = chars.next() {
                        if !".*+?^$()[]{}|\"'\\/".contains(n) {
                            out.extend(n.to_lowercase());
                        }
                    }
                }
                None => {}
            }
            continue;
        }
        if ".*+?^$()[]{}|\"'".contains(c) {
            continue;
        }
        out.extend(c.to_lowercase());
    }
    let t = out.trim();
    if t.is_empty() {
        p.to_lowercase()
    } else {
        t.to_string()
    }
}

/// Splits a simple shell command into words (POSIX quoting, by `shlex`).
/// `None` for compound commands (pipes, `;`, `&&`, redirections, command
/// substitution, several lines) and for unbalanced quotes.
fn shell_words(cmd: &str) -> Option<Vec<String>> {
    if is_compound(cmd) {
        return None;
    }
    shlex::split(cmd)
}

/// Shell operators outside quotes. Each operator character is padded with
/// spaces (a newline becomes ` ; `) and the result split by `shlex`: an
/// operator outside quotes becomes a word of its own, while one inside
/// quotes or escaped stays inside a longer word, so `shlex` does the
/// quoting and no second quote parser is needed here.
fn is_compound(cmd: &str) -> bool {
    const OPERATORS: &[char] = &['|', ';', '&', '>', '<', '`'];
    if !cmd.contains(OPERATORS) && !cmd.trim().contains('\n') {
        return false;
    }
    let mut padded = String::with_capacity(cmd.len() * 2);
    for c in cmd.trim().chars() {
        match c {
            '\n' => padded.push_str(" ; "),
            c if OPERATORS.contains(&c) => {
                padded.push(' ');
                padded.push(c);
                padded.push(' ');
            }
            c => padded.push(c),
        }
    }
    match shlex::split(&padded) {
        Some(words) => words
            .iter()
            .any(|w| w.len() == 1 && w.starts_with(OPERATORS)),
        None => true,
    }
}

fn split_program(words: &[String]) -> Option<(&str, &[String])> {
    let first = words.first()?;
    let base = first.rsplit('/').next().unwrap_or(first);
    if base == "git" && words.get(1).map(String::as_str) == Some("grep") {
        return Some(("grep", &words[2..]));
    }
    Some((base, &words[1..]))
}

fn clip(s: &str) -> String {
    if s.len() <= 80
        && !s.is_empty()
        && !s.contains("::")
        && !s.bytes().any(|b| b.is_ascii_whitespace() && b != b' ')
        && !s.contains("  ")
        && !s.starts_with(' ')
        && !s.ends_with(' ')
    {
        return s.to_string();
    }
    let mut s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    while s.contains("::") {
        s = s.replace("::", ":");
    }
    if s.len() > 80 {
        let mut cut = 80;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    if s.is_empty() {
        "-".to_string()
    } else {
        s
    }
}

fn context_of(args: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    for k in PATH_KEYS {
        match args.get(*k) {
            Some(Value::String(s)) if !s.is_empty() => parts.push(s.clone()),
            Some(Value::Array(items)) => {
                parts.extend(items.iter().filter_map(Value::as_str).map(String::from))
            }
            _ => {}
        }
    }
    clip(&parts.join(","))
}

/// The operation kind of a shell command.
fn shell_operation(command: &str) -> &'static str {
    let lower = command.to_ascii_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let first = words
        .first()
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .unwrap_or("");
    if GREP_PROGRAMS.contains(&first) || (first == "git" && words.get(1) == Some(&"grep")) {
        return "grep";
    }
    let has = |w: &str| words.contains(&w);
    if first == "pytest"
        || has("pytest")
        || (matches!(
            first,
            "cargo" | "npm" | "go" | "make" | "yarn" | "pnpm" | "tox" | "jest"
        ) && has("test"))
        || first == "jest"
    {
        return "test";
    }
    if (matches!(
        first,
        "cargo" | "go" | "npm" | "yarn" | "pnpm" | "gradle" | "mvn" | "docker"
    ) && (has("build") || has("compile")))
        || matches!(
            first,
            "make" | "tsc" | "cmake" | "ninja" | "gcc" | "cc" | "clang" | "javac" | "rustc"
        )
    {
        return "build";
    }
    "bash"
}

/// The default procedure: canonical arguments after
/// [`normalise_args`] (shell commands tokenised, paths and numbers
/// normalised); operation and context derived as the module docs say.
pub fn default_procedure(tool: &str, args: &Value) -> Procedure {
    let (operation, context) = describe(tool, args);
    Procedure {
        operation,
        context,
        key: format!(
            "args\0{tool}\0{}",
            canonical_string(&normalise_args(tool, args), Canon::Args)
        ),
    }
}

/// Operation and context of a call (the fingerprint's middle parts).
pub fn describe(tool: &str, args: &Value) -> (String, String) {
    if SHELL_TOOLS.contains(&tool) {
        match command_of(args) {
            Some(cmd) => {
                let op = shell_operation(cmd);
                let operands: Vec<String> = shell_words(cmd)
                    .map(|w| {
                        w.into_iter()
                            .skip(1)
                            .filter(|x| !x.starts_with('-'))
                            .take(3)
                            .collect()
                    })
                    .unwrap_or_default();
                let ctx = if operands.is_empty() {
                    cmd.to_string()
                } else {
                    operands.join(",")
                };
                (op.to_string(), clip(&ctx))
            }
            None => ("bash".to_string(), context_of(args)),
        }
    } else {
        (tool.to_string(), context_of(args))
    }
}

/// Builds `AGENT::<agent>::<operation>::<context>` (the fingerprint without
/// its result hash).
pub fn fingerprint_prefix(agent: &str, p: &Procedure) -> String {
    format!(
        "AGENT::{}::{}::{}",
        clip(agent),
        clip(&p.operation),
        clip(&p.context)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(tool: &str, args: Value) -> String {
        SearchEquivalence
            .procedure(tool, &args)
            .unwrap_or_else(|| default_procedure(tool, &args))
            .key
    }

    #[test]
    fn seed_equivalences() {
        assert_eq!(
            key("grep", json!({"pattern": "double.*jump", "path": "src"})),
            key("grep", json!({"pattern": "doubleJump", "path": "src"}))
        );
        assert_ne!(
            key("grep", json!({"pattern": "jump", "path": "src"})),
            key("grep", json!({"pattern": "doubleJump", "path": "src"}))
        );
        assert_eq!(
            key("exec", json!({"command": "grep -rn \"double.*jump\" src/"})),
            key("exec", json!({"command": "grep -nr 'doubleJump' src/"}))
        );
        assert_ne!(
            key("exec", json!({"command": "grep -rn jump src/"})),
            key("exec", json!({"command": "grep -rn doubleJump src/"}))
        );
        // Different paths are different procedures.
        assert_ne!(
            key("exec", json!({"command": "grep -rn doubleJump src/"})),
            key("exec", json!({"command": "grep -rn doubleJump tests/"}))
        );
        // Escapes and classes.
        assert_eq!(normalise_pattern(r"\bdouble\s*jump\b"), "doublejump");
        // Compound commands get no equivalence.
        assert_ne!(
            key("exec", json!({"command": "grep double.*jump src | wc -l"})),
            key("exec", json!({"command": "grep doubleJump src | wc -l"}))
        );
    }

    #[test]
    fn operations_and_context() {
        let p = default_procedure("exec", &json!({"command": "cargo test --lib"}));
        assert_eq!(p.operation, "test");
        let p = default_procedure("exec", &json!({"command": "npm run build"}));
        assert_eq!(p.operation, "build");
        let p = default_procedure("read", &json!({"path": "src/app/app.ts"}));
        assert_eq!(
            (p.operation.as_str(), p.context.as_str()),
            ("read", "src/app/app.ts")
        );
        let fp = fingerprint_prefix("explorer", &p);
        assert_eq!(fp, "AGENT::explorer::read::src/app/app.ts");
        let p = default_procedure("read", &json!({"path": "a::b"}));
        assert_eq!(p.context, "a:b");
    }

    #[test]
    fn shell_words_split_quotes_and_refuse_compound_commands() {
        let w = |c: &str| shell_words(c);
        assert_eq!(
            w(r#"grep -rn "double.*jump" 'src dir/' a\ b"#),
            Some(vec![
                "grep".into(),
                "-rn".into(),
                "double.*jump".into(),
                "src dir/".into(),
                "a b".into()
            ])
        );
        // Operators inside quotes or escaped are literal.
        assert_eq!(
            w(r#"grep "a|b;c" x\|y '&'"#),
            Some(vec![
                "grep".into(),
                "a|b;c".into(),
                "x|y".into(),
                "&".into()
            ])
        );
        for c in [
            "grep a src | wc -l",
            "grep a src|wc",
            "cd x && grep a",
            "grep a > out",
            "grep a 2>&1",
            "echo `ls`",
            "grep a\ngrep b",
            "grep a;ls",
            "\"unbalanced",
        ] {
            assert_eq!(w(c), None, "{c}");
        }
        assert_eq!(w("  "), Some(Vec::new()));
    }

    #[test]
    fn hostile_commands_do_not_panic() {
        for c in ["", "\"", "'", "\\", "grep", "grep -e", "grep \"é\\", "git"] {
            let _ = key("exec", json!({ "command": c }));
        }
        let long = "x".repeat(500);
        assert!(
            default_procedure("read", &json!({ "path": long }))
                .context
                .len()
                <= 80
        );
    }
}
