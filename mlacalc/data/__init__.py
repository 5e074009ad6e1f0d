"""Where the data shipped with mlacalc lives: one folder, read through these paths.

- ``models/``: one YAML per shipped model (``model_configs/`` at the repository's top is a link
  here, so the files are easy to find);
- ``hardware/``: one YAML per catalogue GPU, the only source of each device's figures;
- ``measurements/``: the companion microbenchmark's measured set of the committed CPU run;
- ``profiles/``: the shipped calibration profiles of the kernel time model;
- ``measured/``: published GPU kernel tables vendored with their license and source, the tables
  the shipped profiles were fitted on and that ``validate`` checks against.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent
MODELS = DATA / "models"
HARDWARE = DATA / "hardware"
MEASUREMENTS = DATA / "measurements"
PROFILES = DATA / "profiles"
MEASURED = DATA / "measured"
