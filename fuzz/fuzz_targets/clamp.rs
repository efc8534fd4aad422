//! The repetition clamp: the streaming watcher, fed the whole text and
//! finished, gives the batch guard's verdict (`clamp`) — on the prefix
//! where it fired (as an unfinished text) or, after `finish`, on the whole
//! text — and no shorter prefix fires. Options (byte 0, low two bits):
//! 0 default guard, 1 the seed's rules, 2 and 3 the default guard with the
//! long-tail rule at 34 % and off.

use std::sync::OnceLock;

use deloop_core::repetition::{clamp, ClampConfig, StreamWatcher};
use deloop_fuzz::Input;

fn make_config(flags: u8) -> ClampConfig {
    match flags & 3 {
        0 => ClampConfig::default(),
        1 => ClampConfig::seed_compat(),
        2 => {
            let mut c = ClampConfig::default();
            c.words.tail_last_copy_percent = 34;
            c
        }
        _ => {
            let mut c = ClampConfig::default();
            c.words.tail_last_copy_percent = 100;
            c
        }
    }
}

/// The guard of each option and the same guard with the long-tail rule
/// off (for prefixes, which the stream judges as unfinished text), built
/// once per process and shared by every input.
fn configs(flags: u8) -> &'static (ClampConfig, ClampConfig) {
    static CONFIGS: OnceLock<Vec<(ClampConfig, ClampConfig)>> = OnceLock::new();
    let all = CONFIGS.get_or_init(|| {
        (0..4)
            .map(|f| {
                let config = make_config(f);
                let mut open = config.clone();
                open.words.tail_last_copy_percent = 100;
                (config, open)
            })
            .collect()
    });
    &all[usize::from(flags & 3)]
}

fn check(data: &[u8]) {
    let input = Input::read(data);
    let (config, open) = configs(input.flags);
    let exact_text = input.flags & 3 != 1;
    let text = String::from_utf8_lossy(input.payload);
    let text = text.as_ref();

    let mut w = StreamWatcher::new(config.clone());
    let (cut, at_end) = match w.feed(text.as_bytes()) {
        Some(cut) => (Some(cut), false),
        None => (w.finish(), true),
    };
    let batch_whole = clamp(text, config);
    match cut {
        Some(cut) => {
            let d = cut.detected_at;
            assert!(
                text.is_char_boundary(d),
                "detected_at {d} splits a character"
            );
            assert!(text.is_char_boundary(cut.keep_bytes));
            assert!(cut.keep_bytes <= d);
            let batch = if at_end {
                assert_eq!(d, text.len());
                batch_whole
            } else {
                clamp(&text[..d], open)
            };
            let r = batch
                .report()
                .expect("the batch guard fires where the stream cut");
            assert_eq!(r, &cut.report);
            if exact_text {
                assert_eq!(
                    batch.text,
                    format!("{}{}", &text[..cut.keep_bytes], cut.replacement_tail)
                );
            }
            // The character boundary just before `d` does not fire yet.
            if let Some((b, _)) = text[..d].char_indices().next_back() {
                assert!(
                    !clamp(&text[..b], open).is_clamped(),
                    "fires earlier at {b}"
                );
            }
        }
        None => {
            assert!(!batch_whole.is_clamped(), "batch cuts, stream does not");
            assert_eq!(batch_whole.text, text);
        }
    }
}

fn main() {
    afl::fuzz!(|data: &[u8]| check(data));
}
