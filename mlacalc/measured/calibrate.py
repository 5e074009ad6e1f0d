"""Fit a calibration profile on measured sets: :func:`calibrate` (``mlacalc.calibrate``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mlacalc.measured.observations import observations_of
from mlacalc.timemodel.fit import Observations, fit_profile
from mlacalc.timemodel.observation_checks import usable_observations
from mlacalc.timemodel.profile import Profile
from mlacalc.words.arguments import one_or_many
from mlacalc.words.engines import check_engine
from mlacalc.words.errors import InvalidArgumentError


def _as_observations(item: Any, engine: str) -> list[Observations]:
    if isinstance(item, Observations):
        return [item]
    if isinstance(item, (list, tuple)):
        out: list[Observations] = []
        for sub in item:
            out += _as_observations(sub, engine)
        return out
    return observations_of(item, engine=engine)


def calibrate(
    measured_sets: Any,
    *,
    name: str = "custom",
    use_scipy: bool = True,
    notes: Iterable[str] = (),
    progress=None,
    engine: str | None = None,
) -> Profile:
    """Fit a profile on measured sets: :class:`~mlacalc.timemodel.fit.Observations`, measured
    sets read by :func:`mlacalc.measured.tables.load_measured`, or their paths. Records what it
    was fitted on and the residuals per device and kernel class, with the device's own fit and
    the pooled one. One path (a ``str`` or ``os.PathLike``) or one measured set is a list of one.
    ``engine`` (default ``trtllm``): the serving engine whose tables a folder gives (with the
    tables every engine shares, NCCL's and DeepEP's), recorded in the profile.
    """
    engine = check_engine(engine)
    obs: list[Observations] = []
    for item in one_or_many("measured_sets", measured_sets, what="measured sets or paths"):
        obs += _as_observations(item, engine)
    if not obs:
        raise InvalidArgumentError(
            "measured_sets",
            "no kernel rows to fit; give measured sets whose tables map onto single kernels",
        )
    # rows with no usable time or work, unknown kinds and underdetermined classes left out,
    # each said in the profile's notes
    obs, excluded = usable_observations(obs)
    notes = (*notes, *excluded)
    return fit_profile(
        obs, name=name, use_scipy=use_scipy, notes=notes, progress=progress, engine=engine
    )
