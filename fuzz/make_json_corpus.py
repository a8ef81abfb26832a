#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_json (and of its replay test) from the report fixtures in tests/fixtures:
for each mode (0: diff two summaries, 1: diff two compare.json, 2: a report directory) the valid inputs, and
one of each corruption the readers must refuse or survive. Format: one mode byte, documents separated by NUL
(see fuzz/fuzz_json_body.h). Deterministic."""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "json")
fix = os.path.join(here, "..", "tests", "fixtures")
os.makedirs(out, exist_ok=True)


def load(d, name):
    with open(os.path.join(fix, d, name), encoding="utf-8") as f:
        return json.load(f)


def text(doc):
    return doc if isinstance(doc, (str, bytes)) else json.dumps(doc, separators=(",", ":"))


def seed(name, mode, *docs):
    parts = [d.encode("utf-8") if isinstance(d, str) else d for d in map(text, docs)]
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([mode]) + b"\0".join(parts))


cpu = {n: load("report", n) for n in ["compare.json", "naive.summary.json", "inplace.summary.json",
                                      "flash.summary.json", "sdpa_math.summary.json", "sweep.json",
                                      "roofline.json", "naive.trace.json"]}
gpu = {n: load("report-cuda", n) for n in ["compare.json", "naive.summary.json", "flash.summary.json"]}

# mode 0: two summaries
seed("diff_naive_inplace", 0, cpu["naive.summary.json"], cpu["inplace.summary.json"])
seed("diff_naive_flash", 0, cpu["naive.summary.json"], cpu["flash.summary.json"])
seed("diff_naive_sdpa_math", 0, cpu["naive.summary.json"], cpu["sdpa_math.summary.json"])
seed("diff_cuda_naive_flash", 0, gpu["naive.summary.json"], gpu["flash.summary.json"])
seed("diff_cpu_vs_cuda", 0, cpu["naive.summary.json"], gpu["naive.summary.json"])
seed("diff_not_a_summary", 0, cpu["compare.json"], cpu["naive.summary.json"])
bad = json.loads(json.dumps(cpu["naive.summary.json"]))
bad["rows"][2]["self_ns"] = "fast"
seed("diff_string_time", 0, bad, cpu["inplace.summary.json"])
bad = json.loads(json.dumps(cpu["naive.summary.json"]))
bad["rows"] = {"name": "matmul"}
seed("diff_rows_object", 0, bad, cpu["inplace.summary.json"])
bad = json.loads(json.dumps(cpu["naive.summary.json"]))
for r in bad["rows"]:
    r["calls"] = 0
seed("diff_zero_calls", 0, bad, cpu["flash.summary.json"])  # refused: every row has one call or more
bad = json.loads(json.dumps(cpu["inplace.summary.json"]))
bad["rows"][-1]["name"] = "\u00e9\u2028</script>" * 8
seed("diff_odd_names", 0, cpu["naive.summary.json"], bad)
bad = json.loads(json.dumps(cpu["inplace.summary.json"]))
bad["rows"][2]["self_mem_bytes"] = 18446744073709551615
seed("diff_huge_number", 0, cpu["naive.summary.json"], bad)
bad = json.loads(json.dumps(cpu["inplace.summary.json"]))
del bad["run"]
seed("diff_no_run", 0, cpu["naive.summary.json"], bad)  # refused: its figures would print as zeros
faster = json.loads(json.dumps(cpu["flash.summary.json"]))
for g in faster["op_items"][0]["groups"]:
    g["median_ns"] /= 2
faster["op_items"][0]["slowest"]["group_median_ns"] /= 2
seed("diff_flash_tiles", 0, cpu["flash.summary.json"], faster)  # the tile groups side by side
bad = json.loads(json.dumps(cpu["flash.summary.json"]))
bad["op_items"][0]["groups"][1]["median_ns"] = 1e12  # past its group's longest
seed("diff_bad_tiles", 0, cpu["flash.summary.json"], bad)  # refused: a median no run measured

# mode 1: two compare.json
seed("runs_cpu_cpu", 1, cpu["compare.json"], cpu["compare.json"])
seed("runs_cpu_cuda", 1, cpu["compare.json"], gpu["compare.json"])
bad = json.loads(json.dumps(cpu["compare.json"]))
bad["variants"][0]["ms"] = None
bad["variants"][1]["name"] = 7
seed("runs_bad_fields", 1, bad, cpu["compare.json"])
seed("runs_not_compare", 1, cpu["sweep.json"], cpu["compare.json"])
noisy = json.loads(json.dumps(cpu["compare.json"]))
for i, v in enumerate(noisy["variants"]):
    if v.get("ms") is not None:
        v["forward_ms"] = [v["ms"], v["ms"] * (2.0 if i == 0 else 1.01), v["ms"]]  # the first row noisy
seed("runs_noisy_forwards", 1, cpu["compare.json"], noisy)
bad = json.loads(json.dumps(noisy))
bad["variants"][0]["forward_ms"] = [1.0, "slow", None]
seed("runs_bad_forwards", 1, noisy, bad)
bad = json.loads(json.dumps(noisy))
bad["variants"][0]["spread"] = "x"
seed("runs_bad_spread", 1, noisy, bad)
bad = json.loads(json.dumps(cpu["compare.json"]))
bad["device"] = "tpu"
seed("runs_bad_device", 1, bad, cpu["compare.json"])

# mode 2: a report directory
order = ["compare.json", "naive.summary.json", "inplace.summary.json", "sweep.json", "roofline.json",
         "naive.trace.json", "flash.summary.json"]
seed("report_cpu", 2, *[cpu[n] for n in order])
seed("report_cuda", 2, gpu["compare.json"], gpu["naive.summary.json"], "", "", "", "", gpu["flash.summary.json"])
seed("report_truncated", 2, *[text(cpu[n])[: len(text(cpu[n])) // 2] for n in order])
seed("report_wrong_types", 2, {"kind": "compare", "variants": [{"name": "naive", "ms": "x"}, 3, None]},
     {"schema": "attnprof.summary/1", "rows": [{"name": 1}, {"name": "mul", "calls": -1, "self_ns": 1e308}]},
     [], {"kind": "sweep", "points": [{"variant": "naive", "seq": -5, "ms": 0}, {"variant": "naive", "seq": 0}]},
     {"kind": "roofline", "ops": "none"}, {"traceEvents": [{"ph": "C", "args": {"Allocated bytes": "a"}}]},
     "null")
huge = json.loads(json.dumps(cpu["compare.json"]))
huge["variants"][0]["peak_bytes"] = -1e308
seed("report_huge_numbers", 2, huge, cpu["naive.summary.json"], "", cpu["sweep.json"], "", "",
     '{"schema":"attnprof.summary/1","rows":[{"name":"mul","calls":1e300}]}')
noisy_sweep = json.loads(json.dumps(cpu["sweep.json"]))
for p in noisy_sweep["points"]:
    if p.get("ms") is not None:
        p["forward_ms"] = [p["ms"], p["ms"] * 1.5]
seed("report_noisy_forwards", 2, noisy, "", "", noisy_sweep, "", "", "")
seed("report_invalid_utf8", 2, b"{\"kind\":\"compare\",\"machine\":{\"cpu\":\"\xff\xfe\"}}", b"\xc3(", b"{")
print(f"wrote {len(os.listdir(out))} seeds to {out}")
