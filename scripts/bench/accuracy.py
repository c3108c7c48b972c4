#!/usr/bin/env python3
"""Sampled stacks against exact ones (issue 32's accuracy target): reads the JSON report of an
exact recording (`record --stacks`) and of sampled ones (`record --stack-sample R`) of the same
program, made with `report --format json --stacks --stacks-by allocated --stacks-top 0`, and
prints, per sampled report, how many of the exact top 10 sites by allocated bytes its own top 10
holds, and the error of its estimate for every exact site above 2 % of the bytes.

Sites are matched by their frames (module and offset of each): the same binaries give the same
frames whatever the recording's stack ids.

usage: accuracy.py EXACT.json SAMPLED.json [SAMPLED.json ...]
"""
import json
import sys


def sites(path):
    with open(path) as f:
        report = json.load(f)
    stacks = report["stacks"]
    out = {}
    for s in stacks["sites"]:
        key = tuple((fr["module"], fr["offset"]) for fr in s["frames"])
        prev = out.get(key, (0, ""))
        name = next((fr["function"] for fr in s["frames"][1:] if fr["function"]), "?")
        out[key] = (prev[0] + s["allocated_bytes"], name)
    return out, stacks.get("sampling")


def top(sites_by_key, n=10):
    ranked = sorted(sites_by_key.items(), key=lambda kv: -kv[1][0])
    return [k for k, _ in ranked[:n]]


def main():
    exact, sampling = sites(sys.argv[1])
    if sampling:
        sys.exit(f"{sys.argv[1]} is sampled: give the exact recording's report first")
    total = sum(v[0] for v in exact.values())
    big = [k for k, v in exact.items() if v[0] >= 0.02 * total]
    exact_top = set(top(exact))
    worst_all = 0.0
    for path in sys.argv[2:]:
        est, sampling = sites(path)
        if not sampling:
            sys.exit(f"{path} is not sampled")
        overlap = len(exact_top & set(top(est)))
        errors = []
        for k in big:
            e = est.get(k, (0, ""))[0]
            errors.append((abs(e - exact[k][0]) / exact[k][0], exact[k][1]))
        worst = max((e for e, _ in errors), default=0.0)
        worst_all = max(worst_all, worst)
        walked = sampling["sampled_allocations"]
        print(
            f"{path}: top-10 overlap {overlap}/10; {len(big)} sites above 2 %, worst error "
            f"{worst * 100:.1f} % ({max(errors, default=(0, '-'))[1]}); {walked} walks of "
            f"{sampling['allocations']} allocations, R = {sampling['mean_bytes']}"
        )
    print(f"worst error over all: {worst_all * 100:.1f} %")


if __name__ == "__main__":
    main()
