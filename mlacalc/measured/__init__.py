"""Measured sets: GPU and microbenchmark kernel timings, read, mapped onto kernels, checked.

* :mod:`~mlacalc.measured.tables` reads aiconfigurator tables (parquet, optional ``measured``
  extra) and the microbenchmark's CSV/JSON into :class:`MeasuredTable` objects;
* :mod:`~mlacalc.measured.mapping` turns every row into the kernels it timed;
* :mod:`~mlacalc.measured.quirks` holds the stated rules for the data's known quirks;
* :mod:`~mlacalc.measured.moe_routing` gives the expected expert loads of MoE rows;
* :mod:`~mlacalc.measured.observations` turns mapped tables into the fitter's observations;
* :mod:`~mlacalc.measured.calibrate` fits a profile on measured sets (``mlacalc.calibrate``);
* :mod:`~mlacalc.measured.validate` and :mod:`~mlacalc.measured.validate_tables` predict a
  measured set and report its errors (``mlacalc.validate``).
"""
