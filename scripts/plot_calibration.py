#!/usr/bin/env python3
"""Plots the statistics of a `kascade calibrate` file: layer x layer similarity and layer importance.

Usage: python3 scripts/plot_calibration.py CALIBRATION.json OUT_DIR [--num-anchors K]

Writes OUT_DIR/similarity.png: the heat map of Sim(a, b) = mean over reuse KV heads gb of the max
over anchor KV heads ga of sim[a][b][ga][gb] (a = anchor layer, rows; b = reuse layer, columns;
a > b left blank), i.e. the head-aware similarity the anchor DP weighs (DESIGN.md §2.5); and
OUT_DIR/importance.png: w_l = 1 - cos(x_l, x_l + attn_l) per layer, with the anchors of the file's
default anchor count (or --num-anchors K) marked.
Needs matplotlib (pip install matplotlib); exits with status 3 and a message when it is missing, 2 on
bad input (not a calibration file, or an imported file without statistics).
Run by `kascade calibrate --plots DIR`.
"""
import argparse
import json
import os
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    if data.get("format") != "kascade-calibration" or data.get("version") != 1:
        raise ValueError("%s is not a kascade-calibration version 1 file" % path)
    stats = data.get("statistics")
    if not isinstance(stats, dict):
        raise ValueError("%s has no statistics (an imported head map has none to plot)" % path)
    return data


def layer_similarity(values):
    """[N][N] of None (a > b) or [G][G] -> [N][N] of mean_gb max_ga, None where a > b."""
    out = []
    for row in values:
        out_row = []
        for block in row:
            if block is None:
                out_row.append(None)
                continue
            heads = len(block)
            out_row.append(sum(max(block[ga][gb] for ga in range(heads)) for gb in range(heads)) / heads)
        out.append(out_row)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("calibration")
    ap.add_argument("out_dir")
    ap.add_argument("--num-anchors", type=int, default=None)
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_calibration: matplotlib is not installed (pip install matplotlib); no plot written",
              file=sys.stderr)
        return 3
    try:
        data = load(args.calibration)
    except (OSError, ValueError) as e:
        print("plot_calibration: %s" % e, file=sys.stderr)
        return 2

    model = data["model"]["name"]
    stats = data["statistics"]
    sim = layer_similarity(stats["similarity"]["values"])
    w = stats["importance"]["values"]
    n = len(w)
    k = args.num_anchors or data.get("default_num_anchors")
    anchors = next((s["anchors"] for s in data["anchor_sets"] if s["num_anchors"] == k), [])
    subtitle = "%s, %d prompts, k_cal %s, %s forward" % (model, stats["num_prompts"],
                                                         data["collection"]["k_cal"], data["collection"]["forward"])
    os.makedirs(args.out_dir, exist_ok=True)

    fig, ax = plt.subplots(figsize=(1.6 + 0.38 * n, 1.2 + 0.34 * n))
    masked = [[float("nan") if v is None else v for v in row] for row in sim]
    image = ax.imshow(masked, cmap="viridis", vmin=0.0, vmax=1.0, origin="upper")
    ax.set_xlabel("reuse layer b")
    ax.set_ylabel("anchor layer a")
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.tick_params(labelsize=7)
    if n <= 16:
        for a in range(n):
            for b in range(a, n):
                ax.text(b, a, "%.2f" % sim[a][b], ha="center", va="center", fontsize=6,
                        color="white" if sim[a][b] < 0.6 else "black")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="mean_gb max_ga sim")
    ax.set_title("cross-layer Top-k similarity\n" + subtitle, fontsize=9)
    fig.tight_layout()
    sim_path = os.path.join(args.out_dir, "similarity.png")
    fig.savefig(sim_path, dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(max(4.0, 0.35 * n + 2.0), 3.0))
    colors = ["tab:red" if l in anchors else "tab:blue" for l in range(n)]
    ax.bar(range(n), w, color=colors)
    ax.set_xlabel("layer")
    ax.set_ylabel("w_l = 1 - cos(x, x + attn)")
    ax.set_xticks(range(n))
    ax.tick_params(labelsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    label = ("red: the %d anchors %s" % (len(anchors), ",".join(str(a) for a in anchors))) if anchors else ""
    ax.set_title("layer importance\n" + subtitle + ("\n" + label if label else ""), fontsize=9)
    fig.tight_layout()
    imp_path = os.path.join(args.out_dir, "importance.png")
    fig.savefig(imp_path, dpi=120)
    plt.close(fig)
    print("plot_calibration: wrote %s and %s" % (sim_path, imp_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
