//! The connector list (`words.connectors`): dangling connectors are
//! trimmed from the end of the kept text. Their keys sit in an
//! open-addressing table. A guard is built per call, so the table of the
//! default list is built at compile time: hashing the list on every call
//! was a fifth of the cost of clamping a short text.

use std::borrow::Cow;

use crate::repetition::config::DEFAULT_CONNECTORS;
use crate::repetition::text::fold::{ascii_key, key_and_len};

/// The connectors' keys, open addressing (a power-of-two size at least
/// four times the count; 0 marks an empty slot, and a key of 0 is kept in
/// `zero`).
#[derive(Debug, Clone)]
pub(crate) struct Connectors {
    table: Cow<'static, [u64]>,
    zero: bool,
    /// Longest connector, in bytes of its fold (longer tokens are never
    /// looked up).
    max_bytes: u64,
}

const DEFAULT_SIZE: usize = table_size(DEFAULT_CONNECTORS.len());

/// The default list's table and longest fold, built at compile time.
static DEFAULT: ([u64; DEFAULT_SIZE], u64) = default_table();

const fn table_size(n: usize) -> usize {
    let size = (n * 4).next_power_of_two();
    if size < 64 {
        64
    } else {
        size
    }
}

/// Puts `key` (not 0) into `table` (a power-of-two size).
const fn insert(table: &mut [u64], key: u64) {
    let mask = table.len() - 1;
    let mut slot = (key >> 32) as usize & mask;
    while table[slot] != 0 && table[slot] != key {
        slot = (slot + 1) & mask;
    }
    table[slot] = key;
}

const fn default_table() -> ([u64; DEFAULT_SIZE], u64) {
    let mut table = [0u64; DEFAULT_SIZE];
    let mut max = 0;
    let mut i = 0;
    while i < DEFAULT_CONNECTORS.len() {
        let s = DEFAULT_CONNECTORS[i].as_bytes();
        // Every default connector is lowercase ASCII (checked by a test),
        // so its fold is itself.
        let key = ascii_key(s);
        if key != 0 {
            insert(&mut table, key);
        }
        if s.len() as u64 > max {
            max = s.len() as u64;
        }
        i += 1;
    }
    (table, max)
}

impl Connectors {
    /// The table of `list` (the default list's is not rebuilt).
    pub(crate) fn new(list: &[String]) -> Self {
        let is_default = list.len() == DEFAULT_CONNECTORS.len()
            && list.iter().zip(DEFAULT_CONNECTORS).all(|(a, b)| a == b);
        if is_default {
            return Connectors {
                table: Cow::Borrowed(&DEFAULT.0),
                zero: false,
                max_bytes: DEFAULT.1,
            };
        }
        let mut table = vec![0u64; table_size(list.len())];
        let mut zero = false;
        let mut max_bytes = 0;
        for c in list {
            let (key, len) = key_and_len(c);
            max_bytes = max_bytes.max(len);
            if key == 0 {
                zero = true;
            } else {
                insert(&mut table, key);
            }
        }
        Connectors {
            table: Cow::Owned(table),
            zero,
            max_bytes,
        }
    }

    /// True when the token of this key and fold length is a connector.
    #[inline]
    pub(crate) fn contains(&self, key: u64, folded_bytes: u64) -> bool {
        if folded_bytes > self.max_bytes {
            return false;
        }
        if key == 0 {
            return self.zero;
        }
        let mask = self.table.len() - 1;
        let mut slot = (key >> 32) as usize & mask;
        loop {
            match self.table[slot] {
                0 => return false,
                k if k == key => return true,
                _ => slot = (slot + 1) & mask,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_compile_time_table_is_the_runtime_one() {
        for c in DEFAULT_CONNECTORS {
            assert!(
                c.bytes()
                    .all(|b| b.is_ascii_lowercase() || !b.is_ascii_alphabetic())
                    && c.is_ascii(),
                "{c:?}: default connectors must be lowercase ASCII"
            );
        }
        let built = Connectors::new(&owned(DEFAULT_CONNECTORS));
        assert!(matches!(built.table, Cow::Borrowed(_)));
        // The same list one entry short, plus that entry again, is built at
        // run time: same set, same table.
        let mut list = owned(&DEFAULT_CONNECTORS[1..]);
        list.push(DEFAULT_CONNECTORS[0].to_string());
        let runtime = Connectors::new(&list);
        assert!(matches!(runtime.table, Cow::Owned(_)));
        assert_eq!(
            (runtime.zero, runtime.max_bytes),
            (built.zero, built.max_bytes)
        );
        for c in DEFAULT_CONNECTORS {
            let (key, len) = key_and_len(c);
            assert!(built.contains(key, len), "{c:?}");
            assert!(runtime.contains(key, len), "{c:?}");
        }
        for w in ["loop", "The", "zzz", "Con"] {
            let (key, len) = key_and_len(w);
            let want = DEFAULT_CONNECTORS.contains(&w.to_lowercase().as_str());
            assert_eq!(built.contains(key, len), want, "{w:?}");
            assert_eq!(runtime.contains(key, len), want, "{w:?}");
        }
    }

    #[test]
    fn a_custom_list_folds_case() {
        let c = Connectors::new(&owned(&["Und", "ÜBER"]));
        for w in ["und", "UND", "über", "Über"] {
            let (key, len) = key_and_len(w);
            assert!(c.contains(key, len), "{w:?}");
        }
        let (key, len) = key_and_len("de");
        assert!(!c.contains(key, len));
    }
}
