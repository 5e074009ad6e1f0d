"""The kernel time model: the time of a kernel on a device, calibrated on measured GPUs.

One module a part: :mod:`~mlacalc.timemodel.kernel_time` predicts kernels and batches of them;
:mod:`~mlacalc.timemodel.terms` holds the parameters of the kernel classes and
:func:`~mlacalc.timemodel.terms.kernel_terms`, the one place a kernel becomes seconds; one
module per class holds its terms (``gemm_time``, ``attention_time``, ``mla_time``,
``moe_time``, ``comm_time``, ``elementwise_time``, and ``roofline_time``, the plain roofline
bound), :mod:`~mlacalc.timemodel.shared` what they share; :mod:`~mlacalc.timemodel.device` the
device figures they scale by; :mod:`~mlacalc.timemodel.profile` the calibration profiles;
:mod:`~mlacalc.timemodel.fit` fits a profile on observations;
:mod:`~mlacalc.timemodel.predict` times a model's step (:func:`mlacalc.predict_time`);
:mod:`~mlacalc.timemodel.insight` the ridge point and crossovers. Fitting on measured sets is
:func:`mlacalc.measured.calibrate.calibrate`.
"""
