"""The README example; also draws the README figure (python docs/readme_example.py)."""
from bayesdrop import DropoutLogisticRegression, diagnostics
from bayesdrop.studies.datasets import load_breast_cancer

X, y = load_breast_cancer()                                   # 569 x 30, standardised
clf = DropoutLogisticRegression(C=0.1, noise_level=0.3).fit(X, y)
print(f"train accuracy {clf.score(X, y):.3f} after {clf.n_iter_[0]} {clf.solver_[0]} steps")
idata = clf.sample_posterior(X, y, draws=1000, chains=4, random_state=0, progressbar=False)
table = diagnostics.compare_with_mode(idata, clf)
print(table[["mode", "mean", "sd", "ess_bulk", "r_hat", "z"]].head(4).round(3))
print(diagnostics.check_mode(idata, clf).round(3))

if __name__ == "__main__":
    import matplotlib

    matplotlib.use("Agg")
    axes = diagnostics.plot_posterior_vs_mode(idata, clf, max_plots=6)
    fig = axes.ravel()[0].figure
    fig.set_size_inches(10, 4.5)
    fig.suptitle("Dropout-LR on breast cancer: Gibbs posterior marginals, point estimate marked")
    fig.tight_layout()
    fig.savefig("docs/_static/posterior_vs_mode.png", dpi=100)
