"""report.md of a held-back GRPO run: the figures of bench/heldback_report.py's build(), as tables."""

from __future__ import annotations

from pathlib import Path

CONVENTIONS = ("submitted", "graded")


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _ci(e: dict, key: str = "ci95_points") -> str:
    return f"{e[key][0]:+.1f} to {e[key][1]:+.1f}"


def render_evaluations(out: dict) -> list[str]:
    lines = [
        "| evaluation | episodes | submitted-only: resolved (rate) | graded at the limit: resolved (rate) "
        "| submit rate | format-error rate |",
        "|---|---|---|---|---|---|",
    ]
    for name, e in out["evaluations"].items():
        s, g = e["submitted"], e["graded"]
        lines.append(
            f"| {name}{'' if e['finished'] else ' (unfinished: in no difference)'} "
            f"| {e['episodes']} ({e['infra_errors']} infra errors) | {s['resolved']} ({_pct(s['rate'])}) "
            f"| {g['resolved']} ({_pct(g['rate'])}) | {_pct(e['submit_rate'])} | {_pct(e['format_error_rate'])} |"
        )
    return lines


def render_seeds(out: dict) -> list[str]:
    b = out["bootstrap"]
    lines = [
        "",
        f"Sampled, after minus before, per seed (points; 95 % intervals from a cluster bootstrap over "
        f"{out['heldback']['functions']} functions, {b['resamples']} resamples, RNG seed {b['rng_seed']}; "
        "'episodes' treats episodes as independent and is shown for contrast only):",
        "",
        "| seed | convention | difference | 95 % (functions) | eval noise sd | 95 % (episodes) | tasks up / down / same |",
        "|---|---|---|---|---|---|---|",
    ]
    for seed, entry in out["seeds"].items():
        for c in CONVENTIONS if "sampled" in entry else ():
            e = entry["sampled"][c]
            p = e["paired"]
            lines.append(
                f"| {seed} | {c} | {e['points']:+.1f} | {_ci(e)} | {e['bootstrap_sd_points']:.1f} "
                f"| {_ci(e, 'ci95_points_episodes')} | {p['tasks_up']} / {p['tasks_down']} / {p['tasks_same']} |"
            )
    greedy_rows = [(s, e["greedy"]) for s, e in out["seeds"].items() if "greedy" in e]
    if greedy_rows:
        lines += ["", "Greedy, tasks solved (submitted-only / graded at the limit):", ""]
        lines += ["| seed | before | after |", "|---|---|---|"]
        for seed, g in greedy_rows:
            bf, af = g["before"], g["after"]
            lines.append(
                f"| {seed} | {bf['submitted']} / {bf['graded']} of {bf['tasks']} "
                f"| {af['submitted']} / {af['graded']} of {af['tasks']} |"
            )
    return lines


def render_functions(out: dict) -> list[str]:
    functions = out["functions"]
    names = list(next(iter(functions.values()))["sampled"]) if functions else []
    if not names:
        return []
    lines = [
        "",
        "Sampled, per held-back function (results.json names each in full): resolved submitted-only / graded "
        "at the limit, of episodes:",
        "",
        "| function | tasks | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for f in functions.values():
        counts = [f["sampled"][e] for e in names]
        row = " | ".join(f"{c['submitted']} / {c['graded']} of {c['episodes']}" for c in counts)
        lines.append(f"| `{f['label']}` | {f['tasks']} | {row} |")
    return lines


def render_pooled(out: dict) -> list[str]:
    pool = out["pooled"]
    if not pool:
        return ["", out["goal"]["line"]]
    lines = [
        "",
        f"Pooled over {pool['seeds']} seed{'' if pool['seeds'] == 1 else 's'} (95 % from a two-level bootstrap: functions resampled, then seeds "
        "with replacement; the seed sd is the spread of the per-seed differences, the eval noise sd the mean "
        "bootstrap sd within a seed):",
        "",
        "| convention | mean difference | 95 % (two-level) | seeds min / max | seed sd | eval noise sd |",
        "|---|---|---|---|---|---|",
    ]
    for c in CONVENTIONS:
        e = pool[c]
        lines.append(
            f"| {c} | {e['points']:+.1f} | {_ci(e)} | {e['seed_min']:+.1f} / {e['seed_max']:+.1f} "
            f"| {e['seed_sd_points']:.1f} | {e['eval_noise_sd_points']:.1f} |"
        )
    return [*lines, "", out["goal"]["line"]]


def render_grpo(out: dict) -> list[str]:
    lines = []
    for seed, run in out["grpo"].items():
        lines += [
            "",
            f"GRPO seed {seed} ({'finished' if run['finished'] else 'not finished'}; unsubmitted episodes "
            f"rewarded as: {run['unsubmitted'] or 'not recorded'}), per step, its training episodes:",
            "",
        ]
        if not run["curve"]:
            lines.append("(no step has finished yet)")
            continue
        lines += [
            "| step | episodes | submit rate | submitted-only | graded | format errors | mean reward |",
            "|---|---|---|---|---|---|---|",
        ]
        for p in run["curve"]:
            reward = "-" if p["reward_mean"] is None else f"{p['reward_mean']:+.2f}"
            lines.append(
                f"| {p['step']} | {p['episodes']} | {p['submit_rate']:.2f} | {p['submitted']:.2f} "
                f"| {p['graded']:.2f} | {p['format_error_rate']:.2f} | {reward} |"
            )
    return lines


def render(w: Path, out: dict) -> str:
    h = out["heldback"]
    lines = [
        "# GRPO on held-back tasks: the run's report",
        "",
        f"Run directory: `{w}`. Figures: results.json. Held back: {h['tasks']} tasks in {h['functions']} "
        "functions. 'submitted' counts an episode resolved only when it submitted (mini-swe-agent's "
        "convention); 'graded' grades the working tree at the limit (SWE-agent's).",
        "",
    ]
    lines += render_evaluations(out) + render_seeds(out) + render_functions(out) + render_pooled(out)
    lines += render_grpo(out)
    return "\n".join(lines) + "\n"
