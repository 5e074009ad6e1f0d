"""The vocabulary every layer speaks: names, dtypes, kernel records, errors, units, defaults
and argument checks."""
