"""experiments/assimilation/noise_scan.py: its Laplace evidence of the position noise peaks at the true noise where
the tracks determine it (a dense noisy K = 9 benchmark flow), and its sigma-marginal estimate is a mean of the MAPs."""


import numpy as np


def _scan():
    from experiments.assimilation import noise_scan

    return noise_scan


def test_laplace_evidence_of_the_noise_peaks_at_the_true_noise_of_dense_noisy_tracks(monkeypatch):
    scan = _scan()
    model = scan.bench.default_model(quick=True)
    regime = scan.bench.REGIMES["dense-noisy"]  # 200 positions of one drifter, noise 1e-3
    tracks = scan.bench.regime_tracks(model, regime, 200, 1, [0])
    sigmas = np.array([2.5e-4, 1e-3, 4e-3])
    fits, log_evidence = scan.sigma_fits(tracks, model, sigmas)
    # scan_flow fits the same flow at the same sigmas (a deterministic fit): it takes these fits, not three more
    calls = []
    monkeypatch.setattr(scan, "sigma_fits", lambda *args: calls.append(args) or (fits, log_evidence))
    assert [f.sigma for f in fits] == list(sigmas)
    # 400 data: a 4x wrong sigma costs hundreds in log evidence either way
    assert np.argmax(log_evidence) == 1
    assert log_evidence[1] - max(log_evidence[0], log_evidence[2]) > 50.0
    row = scan.scan_flow(tracks, model, sigmas)
    assert len(calls) == 1 and calls[0][0] is tracks and calls[0][2] is sigmas
    # the marginal mean is dominated by the true sigma's MAP: its error is that MAP's
    np.testing.assert_allclose(row["marginal"], row["sigma=0.001"], rtol=1e-6)
    assert 1e-4 < row["sigma_estimated"] < 1e-2
