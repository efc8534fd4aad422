//! Argument normalisation for the strict protocol's procedures: two calls
//! whose arguments differ only in spelling are the same procedure.
//!
//! | argument | normalised | so these are one procedure |
//! |---|---|---|
//! | shell command (`command`/`cmd`/`script` of a shell tool) | tokenised with POSIX quoting; per simple command: the program first, then its flags sorted and deduplicated (combined letter flags split, `-la` = `-l -a`; `--key=value` one flag), then its operands sorted (a flag's value cannot be told from an operand); operators (`\|`, `;`, `&&`, `>` …) and the order of commands kept | `ls -la src/` = `ls  -al ./src` = `ls -l -a src`; `find . -name x -type f` = `find . -type f -name x` |
//! | path (a path-like operand, or the value of a path key such as `path`, `file`, `dir`) | `./` prefixes and `/./` segments removed, duplicate slashes collapsed, trailing slash dropped (not `..`, not URLs) | `./src//app/` = `src/app` |
//! | number (a JSON number, a numeric string, a numeric shell word such as `20`, `0.5`, `10s`, `1,50p`, `-5`, or the value of `-n20` / `--lines=20`) | each run of digits becomes `#` | `head -n 20 f` = `head -n 50 f`; `{"offset": 0}` = `{"offset": 200}` |
//! | any other string | trimmed, whitespace runs collapsed to one space | `"a  b "` = `"a b"` |
//!
//! Masking numbers is safe for the protocol because it still needs the
//! *same result* twice in a row: a number that changes the result (the
//! next page, another line range) keeps the calls apart. Digits inside
//! names (`file2.py`, `localhost:8080`) are not numbers and are kept.
//!
//! Everything here is pure and total: hostile input (unbalanced quotes,
//! deep nesting) falls back to a whitespace-collapsed form, never panics.

use serde_json::{Map, Value};

use super::hashing::MAX_DEPTH;

/// Tools whose `command` argument is a shell command line.
pub(crate) const SHELL_TOOLS: &[&str] = &[
    "exec",
    "shell",
    "sh",
    "run",
    "execute_bash",
    "run_command",
    "terminal",
    "run_shell_command",
];

/// Argument keys that hold a shell command line in a shell tool's call.
pub(crate) const COMMAND_KEYS: &[&str] = &["command", "cmd", "script"];

/// Argument keys that hold a path.
pub(crate) const PATH_KEYS: &[&str] = &[
    "path",
    "file",
    "file_path",
    "filePath",
    "filename",
    "paths",
    "files",
    "dir",
    "directory",
    "url",
    "glob",
    "include",
    "target",
];

/// Shell operator characters (outside quotes they separate commands).
const OPERATORS: &[char] = &['|', ';', '&', '>', '<', '`'];

/// What a masked number becomes.
const NUMBER: &str = "#";

/// The shell command of a call's arguments (a bare string, or a command key).
pub(crate) fn command_of(args: &Value) -> Option<&str> {
    match args {
        Value::String(s) => Some(s),
        _ => COMMAND_KEYS
            .iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str)),
    }
}

/// A call's arguments with every spelling variant above normalised away.
///
/// ```
/// use deloop_core::loops::normalise::normalise_args;
/// use serde_json::json;
/// assert_eq!(
///     normalise_args("exec", &json!({"command": "head -n 20 ./notes.txt"})),
///     normalise_args("exec", &json!({"command": "head  -n 50 notes.txt"})),
/// );
/// ```
pub fn normalise_args(tool: &str, args: &Value) -> Value {
    let shell = SHELL_TOOLS.contains(&tool);
    match args {
        Value::String(s) if shell => Value::String(shell_command(s)),
        _ => value(args, shell, None, 0),
    }
}

fn value(v: &Value, shell: bool, key: Option<&str>, depth: usize) -> Value {
    if depth >= MAX_DEPTH {
        return Value::String("<deloop:too-deep>".into());
    }
    let is_path = key.is_some_and(|k| PATH_KEYS.contains(&k));
    match v {
        Value::Number(_) => Value::String(NUMBER.into()),
        Value::String(s)
            if shell && depth == 1 && key.is_some_and(|k| COMMAND_KEYS.contains(&k)) =>
        {
            Value::String(shell_command(s))
        }
        Value::String(s) => Value::String(plain_string(s, is_path)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| value(i, shell, key.filter(|_| is_path), depth + 1))
                .collect(),
        ),
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                out.insert(k.clone(), value(v, shell, Some(k), depth + 1));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn plain_string(s: &str, is_path: bool) -> String {
    let collapsed = collapse_whitespace(s);
    if let Some(masked) = mask_number(&collapsed) {
        return masked;
    }
    if is_path {
        normalise_path(&collapsed)
    } else {
        collapsed
    }
}

fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Normalises a path: `./` prefixes and `/./` segments removed, duplicate
/// slashes collapsed, a trailing slash dropped. `..` is kept (resolving it
/// needs the file system), and so is anything with `://` (a URL).
///
/// ```
/// use deloop_core::loops::normalise::normalise_path;
/// assert_eq!(normalise_path("./src//app/"), "src/app");
/// assert_eq!(normalise_path("/"), "/");
/// assert_eq!(normalise_path("./"), ".");
/// assert_eq!(normalise_path("../x/./y"), "../x/y");
/// ```
pub fn normalise_path(p: &str) -> String {
    if p.contains("://") || p.is_empty() {
        return p.to_string();
    }
    let absolute = p.starts_with('/');
    let parts: Vec<&str> = p
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// Does this word look like a path (so that [`normalise_path`] applies)?
fn path_like(w: &str) -> bool {
    !w.contains("://") && (w.contains('/') || w == "." || w.starts_with("./"))
}

/// `Some(masked)` when `w` is a number, a number with a short unit
/// (`10s`, `50%`, `2.5ms`), a signed number (`-5`), or a range or list of
/// numbers (`1,50p`, `10:20`, `3-7`): each run of digits becomes `#`.
/// Words that merely contain digits (`file2.py`, `v1`, `:8080`) are not
/// numbers.
///
/// ```
/// use deloop_core::loops::normalise::mask_number;
/// assert_eq!(mask_number("20").as_deref(), Some("#"));
/// assert_eq!(mask_number("1,50p").as_deref(), Some("#,#p"));
/// assert_eq!(mask_number("2.5s").as_deref(), Some("#s"));
/// assert_eq!(mask_number("file2.py"), None);
/// ```
pub fn mask_number(w: &str) -> Option<String> {
    let b = w.as_bytes();
    let mut i = 0;
    let mut out = String::with_capacity(w.len());
    if matches!(b.first(), Some(b'-' | b'+')) {
        out.push(b[0] as char);
        i = 1;
    }
    let mut numbers = 0;
    loop {
        // One number: digits, optionally a decimal part.
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
        }
        out.push_str(NUMBER);
        numbers += 1;
        // A separator followed by another number continues the list.
        if i + 1 < b.len() && matches!(b[i], b',' | b':' | b'-') && b[i + 1].is_ascii_digit() {
            out.push(b[i] as char);
            i += 1;
            continue;
        }
        break;
    }
    // An optional short unit or sed command (`s`, `ms`, `p`, `%`, `kb`).
    let unit = &w[i..];
    let unit_ok = unit.len() <= 3 && unit.bytes().all(|c| c.is_ascii_alphabetic() || c == b'%');
    (numbers > 0 && unit_ok).then(|| {
        out.push_str(unit);
        out
    })
}

/// Normalises a shell command line (see the module docs). Unbalanced
/// quotes fall back to the command with whitespace runs collapsed.
///
/// ```
/// use deloop_core::loops::normalise::shell_command;
/// assert_eq!(shell_command("ls -la src/"), shell_command("ls   -a -l ./src"));
/// assert_eq!(shell_command("sleep 5 && curl -s localhost:8080"), "sleep # & & curl -s localhost:8080");
/// assert_ne!(shell_command("cat a | wc"), shell_command("wc | cat a"));
/// ```
pub fn shell_command(cmd: &str) -> String {
    let Some(words) = shell_tokens(cmd) else {
        return collapse_whitespace(cmd.trim());
    };
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut segment: Vec<String> = Vec::new();
    for w in words {
        if is_operator(&w) {
            out.extend(simple_command(std::mem::take(&mut segment)));
            out.push(w);
        } else {
            segment.push(w);
        }
    }
    out.extend(simple_command(segment));
    // Runs of `;` (blank lines) say nothing.
    out.dedup_by(|a, b| a == ";" && b == ";");
    while out.last().is_some_and(|w| w == ";") {
        out.pop();
    }
    out.join(" ")
}

/// A command line split into words with POSIX quoting, each shell operator
/// character outside quotes a word of its own (`&&` is `&`, `&`; a newline
/// is `;`). `None` for unbalanced quotes.
pub(crate) fn shell_tokens(cmd: &str) -> Option<Vec<String>> {
    let trimmed = cmd.trim();
    let padded = if trimmed.contains(OPERATORS) || trimmed.contains('\n') {
        let mut padded = String::with_capacity(trimmed.len() * 2);
        for c in trimmed.chars() {
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
        padded
    } else {
        trimmed.to_string()
    };
    shlex::split(&padded)
}

/// Is this token a shell operator?
pub(crate) fn is_operator(w: &str) -> bool {
    w.len() == 1 && w.starts_with(OPERATORS)
}

/// One simple command: the program, its flags (sorted, deduplicated),
/// then its operands (sorted). A flag's value cannot be told from an
/// operand without knowing the program, so words are compared as a bag:
/// `find . -name x -type f` = `find . -type f -name x`. This also makes
/// `cp a b` one procedure with `cp b a`; the protocol still needs the
/// same result twice in a row before it acts.
fn simple_command(words: Vec<String>) -> Vec<String> {
    let mut it = words.into_iter();
    let Some(program) = it.next() else {
        return Vec::new();
    };
    let program = if path_like(&program) {
        normalise_path(&program)
    } else {
        program
    };
    let mut flags: Vec<String> = Vec::new();
    let mut operands: Vec<String> = Vec::new();
    let mut only_operands = false;
    for w in it {
        if only_operands || !w.starts_with('-') || w.len() == 1 {
            operands.push(operand(&w));
        } else if w == "--" {
            only_operands = true;
            flags.push(w);
        } else if let Some(masked) = mask_number(&w) {
            // `head -5`: a signed number is a count, not a flag.
            flags.push(masked);
        } else {
            flags.extend(flag(&w));
        }
    }
    flags.sort();
    flags.dedup();
    operands.sort();
    let mut out = Vec::with_capacity(1 + flags.len() + operands.len());
    out.push(program);
    out.extend(flags);
    out.extend(operands);
    out
}

fn operand(w: &str) -> String {
    if let Some(m) = mask_number(w) {
        m
    } else if path_like(w) {
        normalise_path(w)
    } else {
        w.to_string()
    }
}

/// A flag word, split or normalised: `-la` → `-a`, `-l`; `-n20` → `-n#`;
/// `--lines=20` → `--lines=#`; `--dir=./x/` → `--dir=x`.
fn flag(w: &str) -> Vec<String> {
    if let Some(long) = w.strip_prefix("--") {
        return vec![match long.split_once('=') {
            Some((name, v)) => format!("--{name}={}", operand(v)),
            None => w.to_string(),
        }];
    }
    let short = &w[1..];
    if short.bytes().all(|b| b.is_ascii_alphabetic()) {
        return short.chars().map(|c| format!("-{c}")).collect();
    }
    let mut chars = short.chars();
    if let Some(first) = chars.next() {
        if first.is_ascii_alphabetic() {
            if let Some(m) = mask_number(chars.as_str()) {
                return vec![format!("-{first}{m}")];
            }
        }
    }
    vec![w.to_string()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flag_order_spacing_and_trailing_slash_do_not_matter() {
        let same = [
            "ls -la src/",
            "ls -al src",
            "ls  -l   -a ./src",
            "ls -a -l src//",
            "  ls -la -l src/ ",
        ];
        for c in same {
            assert_eq!(shell_command(c), "ls -a -l src", "{c}");
        }
        assert_eq!(
            shell_command("find . -name '*.py' -type f"),
            shell_command("find ./ -type  f -name \"*.py\"")
        );
    }

    #[test]
    fn numbers_are_masked_but_names_with_digits_are_kept() {
        assert_eq!(shell_command("head -n 20 a.txt"), "head -n # a.txt");
        assert_eq!(shell_command("head -n20 a.txt"), "head -n# a.txt");
        assert_eq!(shell_command("head -5 a.txt"), "head -# a.txt");
        assert_eq!(
            shell_command("tail --lines=30 a.txt"),
            "tail --lines=# a.txt"
        );
        assert_eq!(shell_command("sed -n '1,50p' a.txt"), "sed -n #,#p a.txt");
        assert_eq!(shell_command("sleep 2.5"), "sleep #");
        assert_eq!(shell_command("cat file2.py"), "cat file2.py");
        assert_ne!(shell_command("cat file2.py"), shell_command("cat file3.py"));
        assert_ne!(
            shell_command("curl localhost:8080"),
            shell_command("curl localhost:8081")
        );
        for w in ["v1", "1a2", "12abcd", "1.2.3", "-", "--", "1,", "abc"] {
            assert_eq!(mask_number(w), None, "{w}");
        }
        for (w, m) in [
            ("0", "#"),
            ("-3", "-#"),
            ("50%", "#%"),
            ("10:20", "#:#"),
            ("3-7", "#-#"),
        ] {
            assert_eq!(mask_number(w).as_deref(), Some(m), "{w}");
        }
    }

    #[test]
    fn operands_are_a_bag_and_operators_separate_commands() {
        assert_eq!(shell_command("cp a b"), shell_command("cp b a"));
        assert_eq!(
            shell_command("cd /repo && ls -la src/"),
            shell_command("cd /repo&&ls -al ./src")
        );
        assert_ne!(
            shell_command("cat a | wc -l"),
            shell_command("cat a ; wc -l")
        );
        // Flags do not move across commands.
        assert_ne!(
            shell_command("ls -l | grep x"),
            shell_command("ls | grep -l x")
        );
        // After `--` everything is an operand.
        assert_eq!(shell_command("rm -- -f"), "rm -- -f");
        assert_ne!(shell_command("rm -- -f x"), shell_command("rm -f x"));
        // Blank lines and trailing separators say nothing.
        assert_eq!(shell_command("ls\n\n\npwd\n"), shell_command("ls; pwd"));
    }

    #[test]
    fn paths() {
        for (p, n) in [
            ("src/", "src"),
            ("./src", "src"),
            ("././src//a/./b/", "src/a/b"),
            ("/", "/"),
            ("//", "/"),
            ("/repo//src/", "/repo/src"),
            (".", "."),
            ("./", "."),
            ("../a/", "../a"),
            ("http://x//y/", "http://x//y/"),
        ] {
            assert_eq!(normalise_path(p), n, "{p}");
        }
    }

    #[test]
    fn json_arguments() {
        let a = normalise_args(
            "read",
            &json!({"path": "./src/app.ts", "offset": 0, "limit": 100}),
        );
        let b = normalise_args(
            "read",
            &json!({"limit": 2000, "offset": 400, "path": "src//app.ts"}),
        );
        assert_eq!(a, b);
        assert_ne!(
            normalise_args("read", &json!({"path": "a.ts"})),
            normalise_args("read", &json!({"path": "b.ts"}))
        );
        // Whitespace inside strings.
        assert_eq!(
            normalise_args("edit", &json!({"old_string": "  fn main() {", "path": "x"})),
            normalise_args(
                "edit",
                &json!({"old_string": "fn  main()  {", "path": "x/"})
            )
        );
        // A shell command given as a bare string or under `cmd`.
        assert_eq!(
            normalise_args("exec", &json!("ls -la src/")),
            json!("ls -a -l src")
        );
        assert_eq!(
            normalise_args("exec", &json!({"cmd": "ls -al ./src", "timeout": 30})),
            json!({"cmd": "ls -a -l src", "timeout": "#"})
        );
        // A `command` key of another tool is only a string.
        assert_eq!(
            normalise_args(
                "str_replace_editor",
                &json!({"command": "view", "path": "/a/"})
            ),
            json!({"command": "view", "path": "/a"})
        );
    }

    #[test]
    fn hostile_input_does_not_panic() {
        for c in [
            "", "\"", "'", "\\", "-", "--", "-é", "--=", "a\n\n", "|||", "ls -", "é -1é",
        ] {
            let _ = shell_command(c);
            let _ = normalise_args("exec", &json!({ "command": c }));
        }
        assert_eq!(shell_command("echo \"unbalanced  x"), "echo \"unbalanced x");
        let mut v = json!(1);
        for _ in 0..1000 {
            v = Value::Array(vec![v]);
        }
        let _ = normalise_args("read", &v);
    }

    proptest::proptest! {
        #[test]
        fn extra_spaces_outside_quotes_do_not_matter(cmd in "[a-z0-9 ./|;&>-]{0,60}") {
            let spaced = format!("  {}  ", cmd.replace(' ', "   "));
            proptest::prop_assert_eq!(shell_command(&spaced), shell_command(&cmd));
        }

        #[test]
        fn flag_permutations_normalise_alike(
            flags in proptest::collection::vec("-[a-z]", 1..6),
            file in "[a-z]{1,8}(/[a-z]{1,8}){0,2}",
            n in 0u32..100_000,
            m in 0u32..100_000,
        ) {
            let fwd = format!("tool {} -n {n} {file}/", flags.join(" "));
            let mut rev = flags.clone();
            rev.reverse();
            let back = format!("tool  {}  -n {m} ./{file}", rev.join(" "));
            proptest::prop_assert_eq!(shell_command(&fwd), shell_command(&back));
        }

        #[test]
        fn different_words_stay_apart(a in "[a-z]{1,8}", b in "[a-z]{1,8}") {
            proptest::prop_assume!(a != b);
            proptest::prop_assert_ne!(
                shell_command(&format!("cat {a}.txt")),
                shell_command(&format!("cat {b}.txt"))
            );
        }

        #[test]
        fn path_normalisation_is_idempotent(p in "[a-z./]{0,30}") {
            let once = normalise_path(&p);
            proptest::prop_assert_eq!(normalise_path(&once), once.clone());
        }
    }
}
