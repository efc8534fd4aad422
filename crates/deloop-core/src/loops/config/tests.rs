//! Tests of the configuration loader.

use super::*;

#[test]
fn defaults_match_openclaw() {
    let (c, adj) = LoopConfig::from_json5("{}").unwrap();
    let s = c.base();
    assert!(adj.is_empty());
    assert_eq!(
        (
            s.history_size,
            s.warning_threshold,
            s.critical_threshold,
            s.unknown_tool_threshold,
            s.global_circuit_breaker_threshold,
            s.post_compaction_window
        ),
        (30, 10, 20, 10, 30, 3)
    );
    assert!(
        s.detectors.generic_repeat && s.detectors.known_poll_no_progress && s.detectors.ping_pong
    );
    assert_eq!(s.enabled, None);
}

#[test]
fn per_agent_merge_is_field_by_field_and_nested() {
    let (c, _) = LoopConfig::from_json5(
        r#"{
          tools: { loopDetection: { enabled: true, warningThreshold: 5, criticalThreshold: 12,
                   detectors: { pingPong: false, genericRepeat: true },
                   postCompactionGuard: { windowSize: 4 } } },
          agents: { list: [
            { id: "safe-runner", tools: { loopDetection: { warningThreshold: 8, criticalThreshold: 16,
                   detectors: { genericRepeat: false } } } },
            { id: "plain" },
          ] },
        }"#,
    )
    .unwrap();
    let a = c.settings_for(Some("safe-runner"));
    assert_eq!((a.warning_threshold, a.critical_threshold), (8, 16));
    assert!(!a.detectors.generic_repeat);
    assert!(
        !a.detectors.ping_pong,
        "inherited from the global nested block"
    );
    assert_eq!(a.post_compaction_window, 4);
    assert_eq!(a.enabled, Some(true));
    let p = c.settings_for(Some("plain"));
    assert_eq!((p.warning_threshold, p.critical_threshold), (5, 12));
    assert_eq!(c.settings_for(Some("nobody")).warning_threshold, 5);
}

#[test]
fn thresholds_normalised_and_reported() {
    let (c, adj) = LoopConfig::from_json5(
        "{ warningThreshold: 10, criticalThreshold: 5, globalCircuitBreakerThreshold: 3 }",
    )
    .unwrap();
    assert_eq!(c.base().critical_threshold, 11);
    assert_eq!(c.base().global_circuit_breaker_threshold, 12);
    assert_eq!(adj.len(), 2);
    assert_eq!(adj[0].key, "loopDetection.criticalThreshold");
    assert_eq!((adj[0].from, adj[0].to), (5, 11));
    assert_eq!(adj[1].key, "loopDetection.globalCircuitBreakerThreshold");
}

#[test]
fn invalid_values_name_the_key() {
    let cases = [
        ("{ tools: { loopDetection: { warningThreshold: 'ten' } } }", "tools.loopDetection.warningThreshold"),
        ("{ tools: { loopDetection: { historySize: 0 } } }", "tools.loopDetection.historySize"),
        ("{ tools: { loopDetection: { historySize: 2.5 } } }", "tools.loopDetection.historySize"),
        ("{ tools: { loopDetection: { enabled: 'yes' } } }", "tools.loopDetection.enabled"),
        ("{ tools: { loopDetection: { detectors: { pingPong: 1 } } } }", "tools.loopDetection.detectors.pingPong"),
        ("{ tools: { loopDetection: { postCompactionGuard: { windowSize: -1 } } } }", "tools.loopDetection.postCompactionGuard.windowSize"),
        ("{ tools: { loopDetection: { warningTreshold: 3 } } }", "tools.loopDetection.warningTreshold"),
        ("{ agents: { list: [ { id: 'a', tools: { loopDetection: { criticalThreshold: null } } } ] } }", "agents.list[0].tools.loopDetection.criticalThreshold"),
        ("{ normalizers: { exec: [ { pattern: '(' } ] } }", "loopDetection.normalizers.exec[0].pattern"),
        ("{ profile: 'fast' }", "loopDetection.profile"),
    ];
    for (text, key) in cases {
        match LoopConfig::from_json5(text) {
            Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key, "{text}"),
            other => panic!("{text}: expected an error naming {key}, got {other:?}"),
        }
    }
    assert!(matches!(
        LoopConfig::from_json5("{ oops"),
        Err(ConfigError::Syntax(_))
    ));
}

#[test]
fn deloop_keys_parse() {
    let (c, _) = LoopConfig::from_json5(
        r##"{ maxCycleLength: 5, streakThreshold: 6, pollTools: ["Wait_For"], pollActions: ["poll"],
             volatileKeys: { http_get: ["requestId"], "*": ["traceId"] },
             normalizers: { exec: [ { pattern: "\\d+ms", replace: "#ms" } ] }, profile: "strict" }"##,
    )
    .unwrap();
    let s = c.base();
    assert_eq!((s.max_cycle_length, s.streak_threshold), (5, 6));
    assert_eq!(s.poll_tools, vec!["wait_for"]);
    assert_eq!(s.profile, Some(Profile::Strict));
    assert_eq!(s.normalisers_for("http_get").len(), 2);
    assert_eq!(s.normalisers_for("exec").len(), 2);
    assert_eq!(s.normalisers_for("read").len(), 1);
}
