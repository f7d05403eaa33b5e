"""Early-stop rule and full-run prediction from the first steps of a training run.

The training container feeds step times into :class:`SteadyState` as it trains and stops as soon as the
steady-state step time is known to the stated precision (or at a cap); :func:`predict_run` turns that
estimate plus a few timed validation batches into the predicted time per epoch and for the requested
epochs, with a 90 % interval. :func:`replay` applies the same rule to a complete log (any dialect the
parser reads) so that the rule can be checked against what the rest of the log shows.

Method, in short:

* **Warm-up** is found, not assumed: step 1 and the last step of every epoch (the hand-off to
  validation) are never steady; beyond that, MSER (the marginal standard error rule of steady-state
  simulation) picks the truncation point that minimises the standard error of the remaining mean.
* **Outliers** (a GC pause, a checkpoint write) are kept out of the mean with a 4-MAD filter; they are
  rare, and a mean that includes them predicts later epochs worse.
* **Precision** is a batch-means confidence interval (ten consecutive blocks), so that correlated
  neighbouring steps do not make the interval look narrower than it is.
* **Interval** for an epoch combines the statistical uncertainty of the step mean with an
  epoch-to-epoch jitter (default 1 % relative standard deviation) that no single epoch can show:
  successive epochs of the same run differ by about that much on cloud GPUs.

This package is pure Python (no numpy, no torch) so that the container and the Lambdas share it.

Its modules: :mod:`~trainsweep.predict.steady` (the rule and its estimator),
:mod:`~trainsweep.predict.prediction` (the full-run prediction), :mod:`~trainsweep.predict.calibration`
(the interval's shipped calibration), :mod:`~trainsweep.predict.replays` (the rule on complete logs),
:mod:`~trainsweep.predict.scores` (figures over replays), :mod:`~trainsweep.predict.fitting` (fitting and
cross-validating the calibration).
"""

from trainsweep.predict.calibration import (
    CALIBRATION_FILE,
    CONTAINER_FAMILIES,
    COVERAGE_GOAL,
    FAMILY_KEYWORDS,
    MEDIAN_ERROR_GOAL,
    NOISE_FLOOR,
    Calibration,
    JitterCalibration,
    container_family,
    epoch_jitter_for,
    load_calibration,
    run_family,
    run_noise,
)
from trainsweep.predict.fitting import (
    calibrate,
    calibrated,
    conformal_quantile,
    cross_validate,
    cross_validations,
    family_multiples,
    fit_calibration,
    fit_multiple,
    needed_multiple,
)
from trainsweep.predict.prediction import PREDICTION_VERSION, Prediction, predict_run
from trainsweep.predict.replays import (
    BASELINE_FIRST,
    BASELINE_LAST,
    REFERENCE_EPOCHS,
    ReplayResult,
    baseline_step_s,
    replay,
    set_interval,
)
from trainsweep.predict.scores import class_summary, family_summary, group_summary, ranking_by_grid, summarize
from trainsweep.predict.steady import (
    BATCH_MEANS_BLOCKS,
    OUTLIER_MADS,
    SteadyEstimate,
    SteadyState,
    StopRule,
    mser_truncation,
    steady_estimate,
    t_quantile,
    without_outliers,
)

__all__ = [
    "BASELINE_FIRST",
    "BASELINE_LAST",
    "BATCH_MEANS_BLOCKS",
    "CALIBRATION_FILE",
    "CONTAINER_FAMILIES",
    "COVERAGE_GOAL",
    "FAMILY_KEYWORDS",
    "MEDIAN_ERROR_GOAL",
    "NOISE_FLOOR",
    "OUTLIER_MADS",
    "PREDICTION_VERSION",
    "REFERENCE_EPOCHS",
    "Calibration",
    "JitterCalibration",
    "Prediction",
    "ReplayResult",
    "SteadyEstimate",
    "SteadyState",
    "StopRule",
    "baseline_step_s",
    "calibrate",
    "calibrated",
    "class_summary",
    "conformal_quantile",
    "container_family",
    "cross_validate",
    "cross_validations",
    "epoch_jitter_for",
    "family_multiples",
    "family_summary",
    "fit_calibration",
    "fit_multiple",
    "group_summary",
    "load_calibration",
    "mser_truncation",
    "needed_multiple",
    "predict_run",
    "ranking_by_grid",
    "replay",
    "run_family",
    "run_noise",
    "set_interval",
    "steady_estimate",
    "summarize",
    "t_quantile",
    "without_outliers",
]
