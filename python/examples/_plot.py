"""Loss plots for the examples, when matplotlib is installed."""


def save_loss_plot(path, losses, title, baseline=None, baseline_label=None):
    """Writes the per-epoch losses to path (a PNG); returns False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(range(len(losses)), losses, label="training loss")
    if baseline is not None:
        ax.axhline(baseline, color="gray", linestyle="--", label=baseline_label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss (nats)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
