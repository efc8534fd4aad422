//! `no_progress` (`default` and `strict` profiles): one tool keeps
//! returning the same result, or the same error, whatever its arguments,
//! and nothing else happens in between.
//!
//! The agent varies its arguments trivially (flags reordered, `head -n 20`
//! then 30 then 50 on a short file, another offset of the same text, a
//! reworded search, another `old_string` for the same failing edit, another
//! `sleep` before the same refused connection) and gets the same answer
//! every time. The rule, read from the newest call back:
//!
//! * the tail is the run of back-to-back calls of the judged call's tool
//!   whose outcomes are identical (same normalised digest, the same `exec`
//!   failure identity, or errors that differ only inside quotes, which is
//!   where an error echoes the call's arguments: ``old_str `x` did not
//!   appear``); any other tool's call, a different outcome, or a new user
//!   turn ends it (something else happened);
//! * an outcome that says nothing also ends it: a success with fewer than
//!   [`MIN_INFORMATIVE_CHARS`] letters and digits once markup tags and the
//!   exit-code footer are removed (an empty output, `OK`, `<returncode>0</returncode>`),
//!   since different calls that print nothing are usually different edits;
//! * so does the success of a call that may change state (a write-like
//!   tool, or a shell command that writes files, see [`may_change_state`]):
//!   two different writes that both report "saved" (or "unchanged") are
//!   progress. Errors and terminal `exec` failures always count, except an
//!   error naming an unavailable tool (left to `unknown_tool_repeat`);
//! * blocked calls inside the tail count (a block is sticky); pending calls
//!   are skipped;
//! * the tail and the judged call must hold at least two different
//!   argument sets: identical calls are left to `generic_repeat` and the
//!   streak rule.
//!
//! With `n` calls in the tail: warning at `noProgressWarningThreshold`
//! ([`DEFAULT_WARNING`]), critical at `noProgressCriticalThreshold`
//! ([`DEFAULT_CRITICAL`]). Polls and message sends are left to their own
//! rules.

use serde_json::Value;

use super::{hx, Current, Done, Finding, Record, State, View};
use crate::loops::config::Settings;
use crate::loops::hashing::Digest;
use crate::loops::normalise::{command_of, is_operator, normalise_path, shell_tokens, SHELL_TOOLS};
use crate::loops::outcome::CallKind;
use crate::loops::{Detector, Level};

/// Default `noProgressWarningThreshold`: identical outcomes in a row before a warning.
pub const DEFAULT_WARNING: u32 = 3;

/// Default `noProgressCriticalThreshold`: identical outcomes in a row before a block.
pub const DEFAULT_CRITICAL: u32 = 6;

/// A success result with fewer letters and digits than this says nothing.
pub const MIN_INFORMATIVE_CHARS: usize = 8;

fn same(a: &Done, b: &Done) -> bool {
    a.hash == b.hash
        || (a.failure.is_some() && a.failure == b.failure)
        || (a.error_shape.is_some() && a.error_shape == b.error_shape)
}

/// Does this outcome count as evidence (see the module docs)?
fn counts(r: &Record, d: &Done) -> bool {
    if d.unknown.is_some() {
        // Left to `unknown_tool_repeat` and its own threshold.
        return false;
    }
    d.error || d.failure.is_some() || (!d.blank && !r.changes)
}

pub(crate) fn detect(history: View<'_>, cur: Current<'_>, s: &Settings) -> Option<Finding> {
    if cur.kind.is_poll() || cur.kind == CallKind::Send {
        return None;
    }
    let mut n = 0u32;
    let mut anchor: Option<&Done> = None;
    let mut vetoes = 0u32;
    let mut varied = false;
    for r in history.iter().rev() {
        if r.seq < cur.turn_seq || &*r.tool != cur.tool {
            break;
        }
        let d = match &r.state {
            State::Pending => continue,
            State::Veto => {
                vetoes += 1;
                varied |= r.call != cur.call;
                continue;
            }
            State::Done(d) => d,
        };
        if !counts(r, d) || anchor.is_some_and(|a| !same(a, d)) {
            break;
        }
        anchor.get_or_insert(d);
        n += 1 + vetoes;
        vetoes = 0;
        varied |= r.call != cur.call;
    }
    let latest = anchor.map(|d| d.hash);
    if !varied || n < s.no_progress_warning_threshold {
        return None;
    }
    let level = if n >= s.no_progress_critical_threshold {
        Level::Critical
    } else {
        Level::Warning
    };
    Some(finding(level, cur, n, latest))
}

fn finding(level: Level, cur: Current<'_>, n: u32, latest: Option<Digest>) -> Finding {
    let what = format!(
        "`{}` returned the same result {n} times in a row with different arguments",
        cur.tool
    );
    let message = match level {
        Level::Critical => format!(
            "CRITICAL: {what}; the call is blocked. Varying the arguments is not helping: change approach or report the task as failed."
        ),
        _ => format!(
            "WARNING: {what}. Varying the arguments is not helping; check what is wrong before trying again."
        ),
    };
    Finding {
        level,
        detector: Detector::NoProgress,
        count: n,
        key: format!(
            "no-progress:{}:{}",
            cur.tool,
            latest.map(hx).unwrap_or_else(|| "none".into())
        ),
        message,
        latest,
    }
}

/// Is `text` a success that says nothing: fewer than
/// [`MIN_INFORMATIVE_CHARS`] letters and digits once `<tags>` and the
/// `(Command exited with code N)` footer are removed?
pub(crate) fn says_nothing(text: &str) -> bool {
    let mut count = 0;
    let mut in_tag = false;
    let mut tag_len = 0;
    let text = match text.trim_end().rfind("(Command exited with code ") {
        Some(i) if text.trim_end().ends_with(')') => &text[..i],
        _ => text,
    };
    for c in text.chars() {
        match c {
            '<' => {
                in_tag = true;
                tag_len = 0;
            }
            '>' if in_tag => in_tag = false,
            c if in_tag => {
                tag_len += 1;
                // Not a tag after all: `a < b` in program output.
                if tag_len > 32 || c.is_whitespace() {
                    in_tag = false;
                }
            }
            c if c.is_alphanumeric() => {
                count += 1;
                if count >= MIN_INFORMATIVE_CHARS {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// Does a non-object result (string, array, number, …) say nothing?
pub(crate) fn value_says_nothing(v: &Value) -> bool {
    match v {
        Value::String(s) => says_nothing(s),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => true,
    }
}

/// Tool-name words of a call that may change state.
const WRITE_WORDS: &[&str] = &[
    "write", "edit", "create", "patch", "replace", "insert", "delete", "remove", "update",
    "modify", "move", "rename", "append", "save", "commit", "send", "post", "put", "toggle",
    "enable", "disable", "transfer", "cancel", "book", "upload", "apply", "reset", "set_", "add_",
];

/// `command`/`action` values that make a write-like tool's call a read.
const READ_VERBS: &[&str] = &[
    "view", "read", "get", "list", "search", "find", "show", "status", "cat", "open", "check",
    "query", "fetch", "describe",
];

/// Programs that change files or processes.
const WRITE_PROGRAMS: &[&str] = &[
    "rm", "mv", "cp", "mkdir", "rmdir", "touch", "tee", "patch", "chmod", "chown", "ln", "install",
    "truncate", "dd", "kill", "pkill", "killall",
];

/// `git` subcommands that change the work tree or the repository.
const GIT_WRITES: &[&str] = &[
    "apply",
    "checkout",
    "commit",
    "stash",
    "reset",
    "restore",
    "add",
    "rm",
    "mv",
    "merge",
    "rebase",
    "cherry-pick",
    "revert",
    "switch",
    "clean",
    "am",
    "pull",
    "push",
    "fetch",
    "clone",
    "init",
];

/// Package managers whose `install`/`add`/`remove`/… change the environment.
const PACKAGE_MANAGERS: &[&str] = &[
    "pip", "pip3", "npm", "yarn", "pnpm", "cargo", "apt", "apt-get", "conda", "go", "gem",
];

/// May this call change state, so that an identical success is not
/// evidence of no progress? Write-like tool names (unless a `command` or
/// `action` argument names a read), and shell commands that run a program
/// that writes (`rm`, `mv`, `tee`, `sed -i`, `git checkout`,
/// `pip install`, …) or redirect output to a file.
pub(crate) fn may_change_state(tool: &str, args: &Value) -> bool {
    if SHELL_TOOLS.contains(&tool) {
        return command_of(args).is_some_and(command_writes);
    }
    let verb = ["command", "action"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str));
    if verb.is_some_and(|v| READ_VERBS.contains(&v.trim().to_ascii_lowercase().as_str())) {
        return false;
    }
    // Tool names reach here normalised (lower-cased).
    WRITE_WORDS.iter().any(|w| tool.contains(w))
}

fn command_writes(cmd: &str) -> bool {
    let Some(tokens) = shell_tokens(cmd) else {
        return false;
    };
    let words: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut start = true;
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).copied().unwrap_or("");
        // The subcommand: the first operand (flags sort before operands).
        let sub = words[i + 1..]
            .iter()
            .take_while(|w| !is_operator(w))
            .find(|w| !w.starts_with('-'))
            .copied()
            .unwrap_or("");
        if *w == ">" {
            // `> file`, `>> file`; not `2>&1` or `> /dev/null`.
            if next != "&" && next != ">" && normalise_path(next) != "/dev/null" {
                return true;
            }
            start = false;
            continue;
        }
        if is_operator(w) {
            start = true;
            continue;
        }
        if !start {
            continue;
        }
        start = false;
        let program = w.rsplit('/').next().unwrap_or(w);
        let writes = WRITE_PROGRAMS.contains(&program)
            || (program == "sed" || program == "perl") && flags_after(&words[i + 1..], "-i")
            || program == "git" && GIT_WRITES.contains(&sub)
            || PACKAGE_MANAGERS.contains(&program)
                && [
                    "install",
                    "add",
                    "remove",
                    "uninstall",
                    "update",
                    "upgrade",
                    "get",
                ]
                .contains(&sub);
        if writes {
            return true;
        }
    }
    false
}

/// Does the simple command starting at `rest` have a flag starting with `flag`?
fn flags_after(rest: &[&str], flag: &str) -> bool {
    rest.iter()
        .take_while(|w| !is_operator(w))
        .any(|w| w.starts_with(flag))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_outputs_and_bare_exit_codes_say_nothing() {
        for t in [
            "",
            "   \n",
            "OK",
            "Done.",
            "<returncode>0</returncode>\n<output>\n</output>",
            "<returncode>1</returncode>\n<output>\n</output>",
            "(Command exited with code 1)",
            "0\n",
        ] {
            assert!(says_nothing(t), "{t:?}");
        }
        for t in [
            "curl: (7) Failed to connect to localhost port 8080: Connection refused",
            "<returncode>0</returncode>\n<output>\nline one\nline two\n</output>",
            "if a < b and c > d then print something",
            "No matches found",
        ] {
            assert!(!says_nothing(t), "{t:?}");
        }
        assert!(value_says_nothing(&json!([])));
        assert!(value_says_nothing(&json!(null)));
        assert!(!value_says_nothing(&json!([{"id": 1}])));
    }

    #[test]
    fn errors_that_differ_only_inside_quotes_share_a_shape() {
        use crate::loops::outcome::error_shape;
        let a = error_shape(
            "No replacement was performed, old_str `fn a()` did not appear verbatim in /w/x.py.",
        );
        let b = error_shape(
            "No replacement was performed, old_str `fn  b( )` did not appear verbatim in /w/x.py.",
        );
        assert!(a.is_some());
        assert_eq!(a, b);
        assert_eq!(
            error_shape("Unknown column 'nme' in 'field list'"),
            error_shape("Unknown column 'name_' in 'field list'")
        );
        // Outside the quotes the texts must agree.
        assert_ne!(
            error_shape("old_str `x` did not appear in /w/x.py"),
            error_shape("old_str `x` did not appear in /w/y.py")
        );
        // No quoted span, no shape; an apostrophe in a word opens no quote.
        assert_eq!(error_shape("connection refused"), None);
        assert_eq!(error_shape("can't connect, don't retry"), None);
        // Unterminated quotes and hostile input.
        for t in ["`", "'a", "\"\n\"", "é`é`é", ""] {
            let _ = error_shape(t);
        }
    }

    #[test]
    fn writes_are_recognised() {
        let sh = |c: &str| may_change_state("exec", &json!({ "command": c }));
        for c in [
            "sed -i 's/a/b/' x.py",
            "cd /repo && sed -i.bak 's/a/b/' x.py",
            "echo hi > out.txt",
            "cat <<EOF >> notes.md",
            "git checkout src/a.py",
            "pip install -e .",
            "rm -rf build",
            "python x.py | tee log.txt",
        ] {
            assert!(sh(c), "{c}");
        }
        for c in [
            "ls -la",
            "head -n 20 README.md",
            "python x.py 2>&1",
            "grep -rn foo src > /dev/null",
            "git status",
            "git diff",
            "sed -n '1,20p' x.py",
            "sleep 5 && curl localhost:8080",
        ] {
            assert!(!sh(c), "{c}");
        }
        assert!(may_change_state("edit", &json!({"path": "a"})));
        assert!(may_change_state("update_reservation_flights", &json!({})));
        assert!(!may_change_state(
            "str_replace_editor",
            &json!({"command": "view"})
        ));
        assert!(may_change_state(
            "str_replace_editor",
            &json!({"command": "str_replace"})
        ));
        assert!(!may_change_state("read", &json!({"path": "a"})));
        assert!(!may_change_state(
            "search_dir",
            &json!({"search_term": "a"})
        ));
    }
}
