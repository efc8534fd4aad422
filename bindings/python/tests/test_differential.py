"""The built package against the `deloop` command line on the same inputs:
clamp (real model answers from shared/data), rescue and repair (the vendored
JSON corpora), check (the vendored OpenClaw scenarios and, from shared/data,
real agent trajectories)."""

import json

import pytest

import deloop
from conftest import corpus, run_cli, shared_data


def clamp_fields(c):
    return {
        "text": c.text,
        "clamped": c.clamped,
        "detector": c.detector,
        "period": c.period,
        "unit": c.unit,
        "start": c.start,
        "keep_bytes": c.keep_bytes,
        "removed_bytes": c.removed_bytes,
        "reports": [
            {
                "detector": r.detector,
                "period": r.period,
                "unit": r.unit,
                "start": r.start,
                "keep_bytes": r.keep_bytes,
                "removed_bytes": r.removed_bytes,
            }
            for r in c.reports
        ],
    }


def real_texts():
    path = shared_data("data/real-llm-text/cases.jsonl", "python clamp differential")
    return [json.loads(line)["text"] for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("seed", [False, True])
def test_clamp_matches_the_cli_on_real_answers(deloop_bin, seed):
    texts = real_texts()
    cut = 0
    for text in texts:
        args = ["clamp", "--json"] + (["--seed-compat"] if seed else [])
        code, out, err = run_cli(deloop_bin, args, text)
        assert code in (0, 3), err
        want = json.loads(out)
        got = clamp_fields(deloop.clamp(text, seed_compat=seed))
        assert got == want
        cut += got["clamped"]
    assert cut > 0, "the corpus holds loops"


def jsonrepair_inputs():
    inputs = []
    for name in ("jsonrepair", "json-repair-py"):
        for line in (corpus(name) / "cases.jsonl").read_text().splitlines():
            if line.strip():
                inputs.append(json.loads(line)["input"])
    return inputs


def test_repair_matches_the_cli_on_the_json_corpora(deloop_bin):
    inputs = jsonrepair_inputs()
    assert len(inputs) > 500
    for text in inputs:
        code, out, err = run_cli(deloop_bin, ["repair"], text)
        if code == 0:
            assert deloop.repair_json(text) + "\n" == out
            assert deloop.rescue_json(text) == json.loads(out)
        elif code == 1:
            with pytest.raises(deloop.NotFoundError) as e:
                deloop.repair_json(text)
            assert str(e.value) in err
        else:
            with pytest.raises(deloop.InputError) as e:
                deloop.repair_json(text)
            assert str(e.value) in err


def test_rescue_matches_the_cli_on_the_json_corpora(deloop_bin):
    checked = 0
    for text in jsonrepair_inputs():
        try:
            doc = json.loads(deloop.repair_json(text))
        except deloop.DeloopError:
            continue
        if not isinstance(doc, dict) or not doc:
            continue
        key = next(iter(doc))
        code, out, err = run_cli(deloop_bin, ["rescue", "--json", "--key", key], text)
        report = json.loads(out)
        if report["ok"]:
            assert deloop.rescue_json(text, key) == report["value"]
        else:
            with pytest.raises(deloop.DeloopError) as e:
                deloop.rescue_json(text, key)
            assert report["error"] in str(e.value)
        checked += 1
    assert checked > 100


def verdict_line(v):
    return {
        "index": v.index,
        "tool": v.tool,
        "level": v.level,
        "detector": v.detector,
        "count": v.count,
        "message": v.message,
        "fingerprint": v.fingerprint,
    }


def check_both(deloop_bin, transcript, profile):
    code, out, err = run_cli(deloop_bin, ["check", "--json", "--profile", profile], transcript)
    assert code in (0, 3), err
    lines = [json.loads(line) for line in out.splitlines()]
    want = [line for line in lines if "summary" not in line]
    got = [verdict_line(v) for v in deloop.check(transcript, profile=profile)]
    assert got == want
    return len(want)


@pytest.mark.parametrize("profile", ["openclaw", "default", "strict"])
def test_check_matches_the_cli_on_the_openclaw_scenarios(deloop_bin, profile):
    scenarios = sorted((corpus("openclaw-loops") / "scenarios").glob("*.jsonl"))
    assert len(scenarios) > 50
    calls = sum(check_both(deloop_bin, p.read_bytes(), profile) for p in scenarios)
    assert calls > 1000


def test_check_matches_the_cli_on_real_trajectories(deloop_bin):
    folder = shared_data("data/trajectories/traj", "python check differential")
    files = sorted(folder.glob("*.jsonl"))[::8]
    assert files
    for p in files:
        check_both(deloop_bin, p.read_bytes(), "default")
