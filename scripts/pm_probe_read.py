"""What each Nsight Compute report given holds of PM sampling and timed warp samples:
per launch, the metrics with more than one instance by name prefix, the PM sampler's own
metrics, and what IAction.timed_warp_samples() returns. Used by scripts/gpu-pm-probe.sh;
runs wherever an ncu_report module imports (the PyPI ncu-report, or an install's own)."""

import collections
import sys

import ncu_report


def main(paths: list[str]) -> None:
    print(f"# ncu_report from {ncu_report.__file__}")
    for path in paths:
        ctx = ncu_report.load_report(path)
        print(f"## {path.rsplit('/', 1)[-1]}")
        for ri in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(ri)
            for ai in range(rng.num_actions()):
                a = rng.action_by_idx(ai)
                names = list(a.metric_names())
                many = {n: a.metric_by_name(n).num_instances() for n in names}
                many = {n: k for n, k in many.items() if k > 1}
                prefix = collections.Counter(n.split(":")[0] + ":" if ":" in n else n.split(".")[0] for n in many)
                print(f"launch {ri}/{ai} {a.name()}: {len(names)} metrics, {len(many)} with >1 instance, by prefix "
                      f"{dict(prefix)}")
                sampled = sorted(n for n in many if n.startswith("pmsampling:") or ".TriageCompute." in n)
                if sampled:
                    print(f"   PM-sampled: {len(sampled)} metrics, {min(many[n] for n in sampled)}-"
                          f"{max(many[n] for n in sampled)} samples each; e.g. {sampled[0]}")
                fn = getattr(a, "timed_warp_samples", None)
                print(f"   timed_warp_samples(): {'not in this ncu_report' if fn is None else len(fn())}")


if __name__ == "__main__":
    main(sys.argv[1:])
