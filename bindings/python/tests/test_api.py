"""The package's API: settings, errors, hostile input, the GIL."""

import json
import threading

import pytest

import deloop

LOOP = "Intro sentence here. " + "the cat sat on the mat " * 40


def test_clamp_cuts_a_loop_and_reports_it():
    out = deloop.clamp(LOOP)
    assert out.clamped
    assert out.detector == "word_period"
    assert out.text.endswith(" […]")
    assert out.removed_bytes == len(LOOP.encode()) - out.keep_bytes
    assert [r.detector for r in out.reports] == ["word_period"]
    healthy = deloop.clamp("A short healthy answer.")
    assert not healthy.clamped
    assert healthy.text == "A short healthy answer."
    assert healthy.detector is None and healthy.reports == []


def test_settings_take_the_config_file_names_and_bounds():
    # A longer min_run lets this loop through.
    text = "Intro sentence here. " + "one two " * 12
    assert deloop.clamp(text).clamped
    assert not deloop.clamp(text, words={"min_run": 30}, substring={"min_copies": 50}).clamped
    with pytest.raises(deloop.InputError) as e:
        deloop.clamp(text, words={"max_period": 40})
    assert str(e.value) == (
        "guard setting words.max_period = 40 is out of range: expected 1 to 16 (short periods); "
        "change the flag or config value (the bounds are listed in docs/repetition.md)"
    )
    with pytest.raises(deloop.InputError, match="max_perod"):
        deloop.clamp(text, words={"max_perod": 4})
    with pytest.raises(deloop.InputError, match="use one of them"):
        deloop.clamp(text, seed_compat=True, words={"min_run": 30})
    with pytest.raises(ValueError, match="substring.min_copies = 1"):
        deloop.StreamGuard(substring={"min_copies": 1})


def test_the_cli_gives_the_same_bound_message(deloop_bin):
    from conftest import run_cli

    code, _, err = run_cli(deloop_bin, ["clamp", "--max-period", "40"], "text")
    assert code == 2
    with pytest.raises(deloop.InputError) as e:
        deloop.clamp("text", words={"max_period": 40})
    assert str(e.value) in err


def test_invalid_utf8_bytes_are_refused_or_replaced():
    bad = b"Intro. " + b"\xff\xfe" + b" the cat sat on the mat" * 40
    with pytest.raises(deloop.InputError, match="offset 7"):
        deloop.clamp(bad)
    out = deloop.clamp(bad, lossy=True)
    assert out.clamped and "\ufffd" in out.text
    with pytest.raises(deloop.InputError, match="not valid UTF-8"):
        deloop.rescue_json(b'{"a": "\xff"}', "a")
    with pytest.raises(deloop.InputError, match="not valid UTF-8"):
        deloop.check(b'{"type":"call","tool":"\xff"}\n')
    # Lone surrogates cannot be UTF-8: a TypeError naming the encoding
    # error, not a crash.
    with pytest.raises(TypeError, match="surrogates not allowed"):
        deloop.clamp("a\ud800b")


def test_a_100_mb_string():
    text = "The quick brown fox jumps over the lazy dog. " * (100_000_000 // 45)
    out = deloop.clamp(text)
    assert out.clamped and out.detector == "word_period"
    assert len(out.text) < 200
    with pytest.raises(deloop.InputError, match="over the limit"):
        deloop.repair_json(text)


def test_deeply_nested_json_is_an_error_not_a_crash():
    with pytest.raises(deloop.InputError, match="nested deeper"):
        deloop.repair_json("[" * 100_000)
    with pytest.raises(deloop.InputError, match="nested deeper"):
        deloop.rescue_json('{"a": ' + "[" * 100_000, "a")
    # Within the limit, the value comes back whole.
    value = deloop.rescue_json("[" * 900 + "]" * 900)
    depth = 0
    while isinstance(value, list) and value:
        value, depth = value[0], depth + 1
    assert depth == 899
    deep_args = [[]]
    for _ in range(200):
        deep_args = [deep_args]
    with pytest.raises(deloop.InputError, match="args is not JSON"):
        deloop.ToolLoopGuard().call("read", deep_args)


def test_rescue_and_repair():
    assert deloop.rescue_json('Sure! {"answer": "yes", "n": 2,}', "answer") == "yes"
    assert deloop.rescue_json('```json\n{"a": [1, 2,]}\n```') == {"a": [1, 2]}
    assert deloop.repair_json("{'a': True}") == '{"a":true}'
    with pytest.raises(deloop.NotFoundError, match="nothing rescued"):
        deloop.rescue_json('{"a": 1}', "b")
    with pytest.raises(deloop.NotFoundError, match="no JSON value to repair"):
        deloop.repair_json("just prose")


def test_stream_guard_exact_matches_the_batch_guard():
    g = deloop.StreamGuard()
    shown = ""
    for i in range(0, len(LOOP), 7):
        shown += g.push(LOOP[i : i + 7])
        if g.cut:
            break
    assert g.cut is not None and g.cut.detector == "word_period"
    assert g.cut.late_bytes == 0
    assert shown == deloop.clamp(LOOP[: g.received]).text or shown.endswith(g.cut.marker)
    assert g.push("more") == ""
    # Bytes in, bytes out; a str stream stays str.
    b = deloop.StreamGuard()
    out = b.push(b"hello ") + b.finish()
    assert out == b"hello "
    with pytest.raises(deloop.InputError, match="not both"):
        g2 = deloop.StreamGuard()
        g2.push("a")
        g2.push(b"b")


def test_tool_loop_guard_judges_live_and_check_replays():
    guard = deloop.ToolLoopGuard("openclaw")
    lines = []
    levels = []
    for i in range(25):
        v = guard.call("read", {"path": "/a"}, id=f"c{i}")
        levels.append(v.level)
        assert v.id == f"c{i}" and v.index == i
        assert guard.result(f"c{i}", {"content": "same"}) is None
        lines.append(json.dumps({"type": "call", "id": f"c{i}", "tool": "read", "args": {"path": "/a"}}))
        lines.append(json.dumps({"type": "result", "id": f"c{i}", "result": {"content": "same"}}))
    assert "critical" in levels
    verdicts = deloop.check("\n".join(lines), profile="openclaw")
    assert [v.level for v in verdicts] == levels
    assert verdicts[-1].tool == "read"
    with pytest.raises(deloop.InputError, match="unknown profile"):
        deloop.ToolLoopGuard("nope")
    with pytest.raises(deloop.InputError, match="no call with id"):
        guard.result("zz", 1)
    with pytest.raises(deloop.InputError, match="line 1"):
        deloop.check('{"type":"result","id":"x","result":1}\n')
    guard.compaction()
    g = deloop.ToolLoopGuard(config={"tools": {"loopDetection": {"historySize": 5}}})
    assert g.call("ls").level == "ok"


def test_large_inputs_release_the_gil():
    text = "The quick brown fox jumps over the lazy dog. " * 400_000  # 18 MB
    state = {"in_native": False, "done": False, "ticks": 0}

    def work():
        state["in_native"] = True
        deloop.clamp(text)
        state["done"] = True

    t = threading.Thread(target=work)
    t.start()
    while not state["done"]:
        if state["in_native"]:
            state["ticks"] += 1
    t.join()
    # This thread ran Python code while the other one was guarding.
    assert state["ticks"] > 0
