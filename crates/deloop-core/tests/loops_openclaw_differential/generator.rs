//! The random scenario generator: a deterministic RNG, and the calls, results,
//! lanes and segments it draws.

use serde_json::{json, Map, Value};

// ---------------------------------------------------------------------------
// The random scenario generator.

/// splitmix64: small, deterministic, good enough to draw test cases.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    pub(crate) fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// One call shape: the tool as written and its arguments.
#[derive(Clone, Debug)]
pub(crate) struct CallShape {
    pub(crate) tool: String,
    pub(crate) args: Value,
    /// What kind of result the call gets.
    pub(crate) kind: ResultKind,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ResultKind {
    Text,
    Plain,
    Exec,
    ExecFail,
    Poll,
    Log,
    Write,
    Send,
    Unknown,
    Scalar,
}

/// How a stretch of calls behaves.
#[derive(Clone, Debug)]
pub(crate) enum Segment {
    /// Calls drawn at random from the pool.
    Noise,
    /// The same call over and over.
    Repeat(CallShape),
    /// A, B, A, B, …
    PingPong(CallShape, CallShape),
    /// A fixed sequence of calls, lap after lap.
    Cycle(Vec<CallShape>),
    /// One tool cycling through a few argument variants.
    Churn(Vec<CallShape>),
}

/// Where a call runs: an agent and a run id.
#[derive(Clone, Debug)]
pub(crate) struct Lane {
    pub(crate) agent: Option<String>,
    pub(crate) run: Option<String>,
    pub(crate) segment: Segment,
    /// Calls left in the segment, and calls made in it.
    pub(crate) left: usize,
    pub(crate) pos: usize,
    /// Results of this lane's calls change on every call (progress).
    pub(crate) changing: bool,
}

pub(crate) struct Gen {
    pub(crate) rng: Rng,
    pub(crate) events: Vec<Value>,
    /// (due step, tie-breaker, result event).
    pub(crate) pending: Vec<(usize, u64, Value)>,
    pub(crate) step: usize,
    pub(crate) next_id: usize,
    pub(crate) ids: IdMode,
    pub(crate) p_immediate: f64,
    pub(crate) p_missing: f64,
    pub(crate) p_late: f64,
    pub(crate) p_very_late: f64,
    pub(crate) p_error: f64,
    pub(crate) version: u64,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum IdMode {
    Unique,
    Reused,
    Absent,
}

pub(crate) fn obj(pairs: &[(&str, Value)], rng: &mut Rng) -> Value {
    // Key order is random: it must not matter.
    let mut v: Vec<(&str, Value)> = pairs.to_vec();
    if rng.chance(0.3) {
        v.reverse();
    }
    let mut m = Map::new();
    for (k, x) in v {
        m.insert(k.to_string(), x);
    }
    Value::Object(m)
}

pub(crate) fn text(s: String) -> Value {
    json!({"content": [{"type": "text", "text": s}]})
}

impl Gen {
    pub(crate) fn shape(&mut self) -> CallShape {
        let r = &mut self.rng;
        let file = *r.pick(&["/a.txt", "/b.txt", "src/main.rs", "README.md", "/etc/hosts"]);
        match r.below(14) {
            0..=2 => {
                let tool = (*r.pick(&["read", "Read", "read ", "READ"])).to_string();
                let args = if r.chance(0.5) {
                    obj(&[("path", json!(file))], r)
                } else {
                    obj(
                        &[
                            ("path", json!(file)),
                            ("offset", json!(r.below(2))),
                            ("limit", json!(100.0)),
                        ],
                        r,
                    )
                };
                CallShape {
                    tool,
                    args,
                    kind: ResultKind::Text,
                }
            }
            3 => CallShape {
                tool: "grep".into(),
                args: obj(
                    &[
                        ("pattern", json!(*r.pick(&["foo", "bar", "TODO"]))),
                        ("path", json!("src/")),
                    ],
                    r,
                ),
                kind: ResultKind::Text,
            },
            4 | 5 => {
                let cmd = *r.pick(&["cargo build", "make test", "ls -la", "npm test", "cat x"]);
                let fail = r.chance(0.5);
                CallShape {
                    tool: (*r.pick(&["exec", "bash", "Bash"])).to_string(),
                    args: obj(&[("command", json!(cmd))], r),
                    kind: if fail {
                        ResultKind::ExecFail
                    } else {
                        ResultKind::Exec
                    },
                }
            }
            6 => {
                let log = r.chance(0.3);
                CallShape {
                    tool: "process".into(),
                    args: obj(
                        &[
                            ("action", json!(if log { "log" } else { "poll" })),
                            ("sessionId", json!(*r.pick(&["s1", "s2"]))),
                        ],
                        r,
                    ),
                    kind: if log {
                        ResultKind::Log
                    } else {
                        ResultKind::Poll
                    },
                }
            }
            7 => CallShape {
                tool: "command_status".into(),
                args: obj(&[("id", json!(*r.pick(&["j1", "j2"])))], r),
                kind: ResultKind::Poll,
            },
            8 => CallShape {
                tool: "write".into(),
                args: obj(&[("path", json!(file)), ("content", json!("x"))], r),
                kind: ResultKind::Write,
            },
            9 => CallShape {
                tool: "message".into(),
                args: obj(
                    &[
                        ("action", json!("send")),
                        ("to", json!(*r.pick(&["ana", "bo"]))),
                        ("text", json!("hi")),
                    ],
                    r,
                ),
                kind: ResultKind::Send,
            },
            10 => {
                let name = *r.pick(&["web_search", "browser_open", "code_interpreter"]);
                CallShape {
                    tool: name.into(),
                    args: obj(&[("q", json!(*r.pick(&["x", "y"])))], r),
                    kind: ResultKind::Unknown,
                }
            }
            11 => CallShape {
                tool: (*r.pick(&["job_status", "list_jobs"])).to_string(),
                args: obj(&[("job", json!(r.below(2)))], r),
                kind: ResultKind::Plain,
            },
            12 => CallShape {
                tool: "kv_get".into(),
                args: obj(&[("key", json!(*r.pick(&["a", "b"])))], r),
                kind: ResultKind::Scalar,
            },
            _ => CallShape {
                tool: "edit".into(),
                args: obj(
                    &[
                        ("path", json!(file)),
                        ("old", json!(*r.pick(&["a", "b", "c"]))),
                        ("new", json!("z")),
                    ],
                    r,
                ),
                kind: ResultKind::Text,
            },
        }
    }

    pub(crate) fn segment(&mut self) -> (Segment, usize) {
        let kind = self.rng.below(12);
        // Alternations and unknown tools need long stretches to reach
        // OpenClaw's thresholds.
        let long = self.rng.chance(if kind >= 10 { 0.7 } else { 0.25 });
        let len = if long {
            self.rng.range(18, 45)
        } else {
            self.rng.range(3, 14)
        };
        let seg = match kind {
            0..=2 => Segment::Noise,
            3..=5 => Segment::Repeat(self.shape()),
            6 | 10 => Segment::PingPong(self.shape(), self.shape()),
            11 => {
                let name = *self.rng.pick(&["web_search", "browser_open"]);
                let args = obj(&[("q", json!(*self.rng.pick(&["x", "y"])))], &mut self.rng);
                Segment::Repeat(CallShape {
                    tool: name.into(),
                    args,
                    kind: ResultKind::Unknown,
                })
            }
            7 => {
                let k = self.rng.range(3, 5);
                Segment::Cycle((0..k).map(|_| self.shape()).collect())
            }
            _ => {
                // 8 and 9: argument churn.
                let mut base = self.shape();
                if base.kind != ResultKind::ExecFail && base.kind != ResultKind::Write {
                    base = CallShape {
                        tool: "read".into(),
                        args: json!({}),
                        kind: ResultKind::Text,
                    };
                }
                let n = self.rng.range(2, 3);
                let variants = (0..n)
                    .map(|i| {
                        let mut s = base.clone();
                        if let Value::Object(m) = &mut s.args {
                            m.insert("variant".into(), json!(i));
                        } else {
                            s.args = json!({"variant": i});
                        }
                        s
                    })
                    .collect();
                Segment::Churn(variants)
            }
        };
        (seg, len)
    }

    pub(crate) fn result_for(&mut self, shape: &CallShape, changing: bool) -> Value {
        if changing {
            self.version += 1;
        }
        let ver = self.version;
        let r = &mut self.rng;
        let noise = r.below(100_000);
        match shape.kind {
            ResultKind::Text => text(format!("{} v{ver}", shape.args)),
            ResultKind::Plain => obj(&[("status", json!("running")), ("progress", json!(ver))], r),
            ResultKind::Scalar => match ver % 3 {
                0 => json!(format!("value {ver}")),
                1 => Value::Null,
                _ => json!(ver),
            },
            ResultKind::Exec => {
                let out = format!("ok {ver}");
                json!({
                    "content": [{"type": "text", "text": out}],
                    "details": {"status": "completed", "exitCode": 0, "aggregated": out,
                                "durationMs": noise, "pid": noise % 977, "cwd": "/w"}
                })
            }
            ResultKind::ExecFail => {
                let out = format!(
                    "error[E{}]: build failed at 12:{:02}:{:02} attempt {} after {}ms",
                    ver % 2,
                    noise % 60,
                    noise % 59,
                    noise % 7,
                    noise % 500
                );
                json!({
                    "content": [{"type": "text", "text": out}],
                    "details": {"status": "failed", "exitCode": 1, "aggregated": out,
                                "durationMs": noise, "timedOut": false}
                })
            }
            ResultKind::Poll => json!({
                "content": [{"type": "text", "text": format!("still running {ver}")}],
                "details": {"status": "running", "aggregated": format!("line {ver}"),
                            "elapsed": noise, "pid": noise % 31}
            }),
            ResultKind::Log => json!({
                "content": [{"type": "text", "text": format!("log {ver}")}],
                "details": {"status": "running", "totalLines": ver, "totalChars": 10 * ver,
                            "truncated": false, "elapsedMs": noise}
            }),
            ResultKind::Write => {
                if ver.is_multiple_of(4) {
                    json!({"content": [{"type": "text", "text": "wrote"}], "details": {"changed": true}})
                } else {
                    json!({"content": [{"type": "text", "text": "unchanged"}], "details": {"changed": false, "path": "/a"}})
                }
            }
            ResultKind::Send => json!({
                "content": [{"type": "text", "text": "sent"}],
                "details": {"ok": true, "messageId": format!("m{noise}"), "ts": noise, "n": ver % 2}
            }),
            ResultKind::Unknown => json!({"content": [{"type": "text", "text": "??"}]}),
        }
    }

    pub(crate) fn error_for(&mut self, shape: &CallShape) -> String {
        let tool = shape.tool.trim().to_lowercase();
        if shape.kind == ResultKind::Unknown {
            return match self.rng.below(4) {
                0 => format!("Unknown tool: {tool}"),
                1 => format!("tool '{tool}' is not available"),
                2 => format!("Tool {tool} not found"),
                _ => "Unknown tool: other_tool".into(),
            };
        }
        match self.rng.below(4) {
            0 => "ENOENT: no such file or directory".into(),
            1 => format!("permission denied ({})", self.version % 2),
            2 => "Unknown tool: ghost".into(),
            _ => "timeout".into(),
        }
    }

    pub(crate) fn next_call_id(&mut self) -> Option<String> {
        self.next_id += 1;
        match self.ids {
            IdMode::Unique => Some(format!("c{}", self.next_id)),
            IdMode::Reused => Some(format!("c{}", self.rng.below(6))),
            IdMode::Absent => None,
        }
    }

    pub(crate) fn emit_due(&mut self) {
        let step = self.step;
        let mut due: Vec<(usize, u64, Value)> = Vec::new();
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].0 <= step {
                due.push(self.pending.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|d| (d.0, d.1));
        self.events.extend(due.into_iter().map(|d| d.2));
    }

    pub(crate) fn call(&mut self, lane: &Lane, shape: &CallShape) {
        let id = self.next_call_id();
        let mut ev = Map::new();
        ev.insert("type".into(), json!("call"));
        if let Some(id) = &id {
            ev.insert("id".into(), json!(id));
        }
        ev.insert("tool".into(), json!(shape.tool));
        ev.insert("args".into(), shape.args.clone());
        if let Some(run) = &lane.run {
            ev.insert("run".into(), json!(run));
        }
        if let Some(agent) = &lane.agent {
            ev.insert("agent".into(), json!(agent));
        }
        self.events.push(Value::Object(ev));

        if self.rng.chance(self.p_missing) {
            return;
        }
        let mut res = Map::new();
        res.insert("type".into(), json!("result"));
        if let Some(id) = &id {
            res.insert("id".into(), json!(id));
        }
        let error = shape.kind == ResultKind::Unknown || self.rng.chance(self.p_error);
        if error {
            let e = self.error_for(shape);
            res.insert("error".into(), json!(e));
        } else if self.rng.chance(0.01) {
            // The runtime reports the guard's own veto.
            res.insert(
                "result".into(),
                json!({"details": {"status": "blocked", "deniedReason": "tool-loop"}}),
            );
        } else {
            let v = self.result_for(shape, lane.changing);
            res.insert("result".into(), v);
        }
        let delay = if self.rng.chance(self.p_immediate) {
            0
        } else if self.rng.chance(self.p_very_late) {
            self.rng.range(25, 70)
        } else if self.rng.chance(self.p_late) {
            self.rng.range(1, 8)
        } else {
            1
        };
        if delay == 0 {
            self.events.push(Value::Object(res));
        } else {
            let tie = self.rng.next();
            self.pending
                .push((self.step + delay, tie, Value::Object(res)));
        }
    }

    pub(crate) fn lane_call(&mut self, lane: &mut Lane) {
        if lane.left == 0 {
            let (seg, len) = self.segment();
            lane.segment = seg;
            lane.left = len;
            lane.pos = 0;
            lane.changing = self.rng.chance(0.25);
        }
        let pos = lane.pos;
        lane.pos += 1;
        let shape = match &lane.segment {
            Segment::Noise => self.shape(),
            Segment::Repeat(s) => s.clone(),
            Segment::PingPong(a, b) => {
                if pos.is_multiple_of(2) {
                    a.clone()
                } else {
                    b.clone()
                }
            }
            Segment::Cycle(v) => v[pos % v.len()].clone(),
            Segment::Churn(v) => v[self.rng.below(v.len())].clone(),
        };
        lane.left -= 1;
        self.call(lane, &shape);
    }
}
