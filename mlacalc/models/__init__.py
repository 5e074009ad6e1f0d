"""Model configurations: the schema, loading (YAML and Hugging Face ``config.json``), layer
patterns, and the family registry with one module per family.

Importing the package registers every family (:mod:`mlacalc.models.hf`), so the schema and the
loaders find them in :mod:`mlacalc.models.registry`.
"""

from mlacalc.models import hf  # noqa: F401  (registers the families)
