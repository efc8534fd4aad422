//! The `x-deloop-*` headers a guarded response gains: the tool-loop
//! check's verdicts and actions, and what was cut of the reply's calls.

use axum::http::HeaderValue;
use axum::response::Response;

/// The `x-deloop-*` headers of the tool-loop check.
#[derive(Default)]
pub(crate) struct LoopMarks {
    headers: Vec<(&'static str, String)>,
    actions: Vec<&'static str>,
}

impl LoopMarks {
    pub(crate) fn header(&mut self, name: &'static str, value: &str) {
        self.headers.push((name, value.to_string()));
    }

    pub(crate) fn action(&mut self, a: &'static str) {
        if !self.actions.contains(&a) {
            self.actions.push(a);
        }
    }

    pub(crate) fn apply(self, mut res: Response) -> Response {
        let h = res.headers_mut();
        for (name, value) in self.headers {
            if let Ok(v) = HeaderValue::from_str(&value) {
                h.insert(name, v);
            }
        }
        if !self.actions.is_empty() {
            if let Ok(v) = HeaderValue::from_str(&self.actions.join(", ")) {
                h.insert("x-deloop-loop-action", v);
            }
        }
        res
    }
}
