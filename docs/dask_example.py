"""The README's dask example: fit, predict and sample on a LocalCluster
(python docs/dask_example.py; about a minute on 2 cores)."""
import arviz as az
import dask.array as da
from distributed import Client, LocalCluster

from bayesdrop import DropoutLogisticRegression

if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster):
        rng = da.random.default_rng(0)                     # data made on the workers
        X = rng.standard_normal((50_000, 20), chunks=(12_500, 20))
        noise = rng.logistic(size=50_000, chunks=12_500)
        y = (X[:, 0] - X[:, 1] + noise > 0).astype(int)
        X, y = X.persist(), y.persist()                    # and kept there

        clf = DropoutLogisticRegression(noise_level=0.3).fit(X, y)
        print(f"{clf.n_iter_[0]} Newton steps, {clf.n_passes_[0]} passes over the data")
        print("coef[:3]", clf.coef_[0, :3].round(3))
        pred = clf.predict(X)                              # a lazy dask array
        print("train accuracy", round(float((pred == y).mean().compute()), 4))

        idata = clf.sample_posterior(X, y, draws=300, tune=100, chains=4,
                                     random_state=0, progressbar=False)
        summary = az.summary(idata, var_names=["coef"], coords={"feature": ["x0", "x1"]})
        print(summary[["mean", "sd", "ess_bulk", "r_hat"]].round(3))
