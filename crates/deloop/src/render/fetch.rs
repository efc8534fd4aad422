//! The progress bar of a model-file download (`deloop_index::fetch`):
//! drawn on stderr when it is a terminal, nothing otherwise.

use std::io::IsTerminal;
use std::sync::Mutex;

use deloop_index::FetchProgress;
use indicatif::{ProgressBar, ProgressStyle};

/// A byte-count bar per download.
struct FetchBar {
    bar: Mutex<Option<ProgressBar>>,
}

impl FetchProgress for FetchBar {
    fn start(&self, what: &str, bytes: u64) {
        let bar = ProgressBar::new(bytes);
        bar.set_style(
            ProgressStyle::with_template(
                "fetching {msg} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_message(what.to_string());
        *self.bar.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar);
    }

    fn advance(&self, bytes: u64) {
        if let Some(bar) = &*self.bar.lock().unwrap_or_else(|p| p.into_inner()) {
            bar.inc(bytes);
        }
    }

    fn finish(&self) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|p| p.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}

/// Shows model downloads as a progress bar when stderr is a terminal.
pub fn install() {
    if std::io::stderr().is_terminal() {
        deloop_index::set_fetch_progress(Box::new(FetchBar {
            bar: Mutex::new(None),
        }));
    }
}
