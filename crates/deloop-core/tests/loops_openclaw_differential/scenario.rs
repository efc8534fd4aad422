//! One random scenario: a transcript in deloop's events format, drawn from one
//! seed.

use crate::generator::*;
use serde_json::{json, Map, Value};

/// One random scenario (a transcript in deloop's events format, as JSON values).
pub(crate) fn scenario(seed: u64) -> Vec<Value> {
    let mut rng = Rng::new(seed);
    let ids = match rng.below(10) {
        0..=6 => IdMode::Unique,
        7 | 8 => IdMode::Reused,
        _ => IdMode::Absent,
    };
    let pipelined = rng.chance(0.4);
    let p_immediate = if pipelined { 0.35 } else { 0.85 };
    let mut g = Gen {
        rng,
        events: Vec::new(),
        pending: Vec::new(),
        step: 0,
        next_id: 0,
        ids,
        p_immediate,
        p_missing: *[0.0, 0.05, 0.2].get(seed as usize % 3).unwrap(),
        p_late: 0.8,
        p_very_late: if pipelined { 0.08 } else { 0.01 },
        p_error: *[0.02, 0.1, 0.3].get((seed as usize / 3) % 3).unwrap(),
        version: 0,
    };
    let two_agents = g.rng.chance(0.3);
    let run_mode = g.rng.below(5); // 0: no runs; 1: one run; else several
    let agents: Vec<Option<String>> = if two_agents {
        vec![
            None,
            Some((*g.rng.pick(&["helper", " helper", "main"])).to_string()),
        ]
    } else {
        vec![if g.rng.chance(0.2) {
            Some("main".into())
        } else {
            None
        }]
    };
    let runs: Vec<Option<String>> = match run_mode {
        0 => vec![None],
        1 => vec![Some("r1".into())],
        _ => {
            let mut v: Vec<Option<String>> = vec![Some("r1".into()), Some(" r2".into())];
            if g.rng.chance(0.5) {
                v.push(Some("r3 ".into()));
            }
            if g.rng.chance(0.3) {
                v.push(None);
            }
            if g.rng.chance(0.2) {
                v.push(Some("r1 ".into()));
            }
            v
        }
    };
    let mut lanes: Vec<Lane> = Vec::new();
    for a in &agents {
        for r in &runs {
            lanes.push(Lane {
                agent: a.clone(),
                run: r.clone(),
                segment: Segment::Noise,
                left: 0,
                pos: 0,
                changing: false,
            });
        }
    }
    let long = g.rng.chance(0.15);
    let calls = if long {
        g.rng.range(150, 400)
    } else {
        g.rng.range(10, 120)
    };
    // Interleaving: stay on a lane for a while, or switch on every call.
    let stickiness = *g.rng.pick(&[0.0, 0.5, 0.9]);
    let mut current = 0usize;
    for _ in 0..calls {
        g.emit_due();
        if g.rng.chance(0.015) {
            let lane = &lanes[g.rng.below(lanes.len())];
            let mut ev = Map::new();
            ev.insert("type".into(), json!("compaction"));
            if let Some(r) = &lane.run {
                ev.insert("run".into(), json!(r));
            }
            if let Some(a) = &lane.agent {
                ev.insert("agent".into(), json!(a));
            }
            g.events.push(Value::Object(ev));
        }
        if g.rng.chance(0.01) {
            let lane = &lanes[g.rng.below(lanes.len())];
            let mut ev = Map::new();
            ev.insert("type".into(), json!("user"));
            if let Some(r) = &lane.run {
                ev.insert("run".into(), json!(r));
            }
            g.events.push(Value::Object(ev));
        }
        if !g.rng.chance(stickiness) {
            current = g.rng.below(lanes.len());
        }
        let mut lane = lanes[current].clone();
        g.lane_call(&mut lane);
        lanes[current] = lane;
        g.step += 1;
    }
    // Results still in flight: most arrive at the end, some never.
    g.step = usize::MAX;
    let keep_all = g.rng.chance(0.5);
    g.pending.retain(|_| keep_all);
    g.emit_due();
    g.events
}
