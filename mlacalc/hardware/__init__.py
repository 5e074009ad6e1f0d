"""The GPU catalogue: one YAML per device (the only source of its figures) and the
alias/system table."""
