"""llmcpu_vulkan_probe on this machine's Vulkan device (lavapipe where there is no GPU).

`devices` and `gemm --quick` must each print exactly one JSON object on stdout that parses (NaN and
Infinity refused, as JSON has neither), holds only finite numbers, names a chosen device that is in
its list and usable, and (gemm) reports that the GEMM shader passed its check against the CPU, with
a timing for every GEMM. A bad argument must exit 2 with an error naming it. Exits 77 (ctest's skip)
where the loader finds no Vulkan device at all, as the Vulkan suites skip there.

usage: check_vulkan_probe.py PATH_TO_llmcpu_vulkan_probe
"""

import json
import math
import re
import subprocess
import sys

SKIP = 77
PRODUCTS = ("forward", "input gradient", "weight gradient")
LAYERS = ("qkv", "attention projection", "fc", "fc projection", "lm_head")


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def run(probe, *args):
    """The exit code, the parsed stdout and stderr of one probe run."""
    p = subprocess.run([probe, *args], capture_output=True, text=True, timeout=120)
    try:
        doc = json.loads(p.stdout, parse_constant=refuse_constant)
    except ValueError as e:
        fail(f"{' '.join(args)}: stdout is not one JSON object ({e}): {p.stdout[:300]!r}\n"
             f"{p.stderr}")
    if not isinstance(doc, dict):
        fail(f"{' '.join(args)}: stdout is JSON but not an object")
    return p.returncode, doc, p.stderr


def numbers(value, path="$"):
    """Every number in a JSON value, with its path (booleans are not numbers here)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from numbers(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from numbers(v, f"{path}[{i}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, value


def expect_finite(doc, what):
    for path, v in numbers(doc):
        if not math.isfinite(v):
            fail(f"{what}: {path} = {v} is not finite")


def check_devices(probe):
    code, doc, err = run(probe, "devices")
    if code == 3 and doc.get("devices") == []:
        print(f"SKIPPED: no Vulkan device: {doc.get('error')}")
        sys.exit(SKIP)
    if code != 0:
        fail(f"devices exited {code}: {doc}\n{err}")
    expect_finite(doc, "devices")
    devices = doc["devices"]
    if not devices:
        fail("devices: an empty list with exit code 0")
    for d in devices:
        for key in ("name", "type", "vendorID", "deviceID", "apiVersion", "driverName",
                    "device_local_heap_bytes", "subgroupSize", "maxStorageBufferRange",
                    "timestampPeriod", "queue_families", "dedicated_transfer", "shaderFloat64",
                    "storageBuffer16BitAccess", "usable", "cooperative_matrix"):
            if key not in d:
                fail(f"devices: device {d.get('index')} has no {key}")
        if d["type"] not in ("discrete", "integrated", "virtual", "cpu", "other"):
            fail(f"devices: unknown type {d['type']}")
        if not re.fullmatch(r"\d+\.\d+\.\d+", d["apiVersion"]):
            fail(f"devices: apiVersion {d['apiVersion']!r} is not major.minor.patch")
        if not d["queue_families"] or any(f["count"] < 1 for f in d["queue_families"]):
            fail(f"devices: device {d['index']} has no queues")
    by_index = {d["index"]: d for d in devices}
    chosen = doc.get("chosen")
    if chosen not in by_index:
        fail(f"devices: chosen {chosen} is not among the indices {sorted(by_index)}")
    if not by_index[chosen]["usable"]:
        fail(f"devices: the chosen device {chosen} is not usable by the plugin")
    return by_index[chosen]


def check_gemm(probe, chosen):
    code, doc, err = run(probe, "gemm", "--quick")
    if code != 0:
        fail(f"gemm --quick exited {code}: {doc}\n{err}")
    expect_finite(doc, "gemm --quick")
    if doc.get("device_index") != chosen["index"] or doc.get("device") != chosen["name"]:
        fail(f"gemm ran on {doc.get('device_index')} {doc.get('device')!r}, devices chose "
             f"{chosen['index']} {chosen['name']!r}")
    if doc.get("quick") is not True or doc.get("timer") not in ("gpu", "wall"):
        fail(f"gemm: quick {doc.get('quick')}, timer {doc.get('timer')}")
    check = doc["check"]
    if check.get("checked") is not True:
        fail(f"gemm: the GEMM shader failed its check against the CPU: {check}")
    if not doc["roof_fp32_gflops"] or doc["roof_fp32_gflops"] <= 0:
        fail(f"gemm: roof_fp32_gflops {doc['roof_fp32_gflops']}")
    precisions = ["fp32"] + ([] if "bf16_skipped" in doc else ["bf16"])
    wanted = {(f"{layer} {p}", prec) for layer in LAYERS for p in PRODUCTS for prec in precisions}
    got = {(g["name"], g["precision"]) for g in doc["gemms"]}
    if got != wanted or len(doc["gemms"]) != len(wanted):
        fail(f"gemm: timed {sorted(got)}, expected {sorted(wanted)}")
    for g in doc["gemms"]:
        if min(g["M"], g["N"], g["K"]) < 1 or not (g["ms"] > 0 and g["gflops"] > 0):
            fail(f"gemm: {g}")
        flops = 2 * g["M"] * g["N"] * g["K"]
        if abs(flops / (g["ms"] * 1e6) - g["gflops"]) > 1e-3 * g["gflops"]:
            fail(f"gemm: {g['name']}: gflops is not 2 M N K / time")
        if abs(g["gflops"] / doc["roof_fp32_gflops"] - g["roof_share"]) > 1e-3 * g["roof_share"]:
            fail(f"gemm: {g['name']}: roof_share is not gflops / roof")
    if not doc.get("capped"):
        fail("gemm --quick: no record of what was capped")
    print(f"gemm --quick on {doc['device']}: checked (max relative error "
          f"{check['max_rel_error']:.3g}), roof {doc['roof_fp32_gflops']:.1f} GFLOP/s, "
          f"{len(doc['gemms'])} GEMMs in {doc['seconds']:.1f} s")


def check_usage(probe):
    code, doc, _ = run(probe, "gemm", "--reps", "0")
    if code != 2 or "--reps" not in doc.get("error", ""):
        fail(f"gemm --reps 0: exit {code}, {doc}; expected 2 and an error naming --reps")


def main():
    if len(sys.argv) != 2:
        fail(__doc__)
    probe = sys.argv[1]
    chosen = check_devices(probe)
    check_usage(probe)
    check_gemm(probe, chosen)


if __name__ == "__main__":
    main()
