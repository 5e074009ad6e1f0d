"""The exceptions mlacalc raises.

Every error a user can cause derives from :class:`MlacalcError`, and each one
says in one line what was wrong, where, and how to fix it. They also subclass
the matching built-in (``ValueError``, ``KeyError``) so that generic handlers
keep working.
"""

from __future__ import annotations

from difflib import get_close_matches

__all__ = [
    "ConfigError",
    "InvalidArgumentError",
    "MlacalcError",
    "MlacalcWarning",
    "UnknownDtypeError",
    "UnknownModelError",
]


class MlacalcError(Exception):
    """Base class of every error raised by mlacalc."""


class MlacalcWarning(UserWarning):
    """Something valid but likely not meant, said as a Python warning where a library call
    has no other place to say it (a model with routed experts and no MoE layer); the command
    line prints the same sentence as ``mlacalc: warning: ...``."""


class ConfigError(ValueError, MlacalcError):
    """A model configuration is missing a field, has a wrong value, or cannot be read.

    Parameters
    ----------
    message
        What is wrong, in words.
    source
        The file (or ``"<dict>"``) the configuration came from.
    field
        The offending field, if one can be named.
    fix
        How to fix it.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        field: str | None = None,
        fix: str | None = None,
    ):
        self.message = message
        self.source = source
        self.field = field
        self.fix = fix
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.source:
            where.append(self.source)
        if self.field:
            where.append(f"field '{self.field}'")
        head = ": ".join(where)
        text = f"{head}: {self.message}" if head else self.message
        if self.fix and f"({self.fix})" not in self.message:  # said once, where it was put
            text += f" ({self.fix})"
        return text


class UnknownModelError(KeyError, MlacalcError):
    """A model name that is neither shipped nor an existing file."""

    def __init__(self, name: str, known: list[str]):
        self.name = name
        self.known = sorted(known)
        super().__init__(name)

    def __str__(self) -> str:
        close = get_close_matches(self.name.lower(), self.known, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        return (
            f"unknown model '{self.name}'.{hint} Known models: {', '.join(self.known)}; "
            "or pass the path of a YAML file or a Hugging Face config.json."
        )


class UnknownDtypeError(ValueError, MlacalcError):
    """A dtype or KV-cache layout name mlacalc does not know.

    ``argument`` names the API argument or flag that carried it, where one is known.
    """

    def __init__(
        self, name: object, known: list[str], what: str = "dtype", argument: str | None = None
    ):
        self.name = name
        self.known = list(known)
        self.what = what
        self.argument = argument
        super().__init__(str(self))

    def __str__(self) -> str:
        head = f"{self.argument}: " if self.argument else ""
        name = self.name if isinstance(self.name, str) else repr(self.name)
        hint = ""
        formats = self.what == "dtype" and isinstance(self.name, str)
        if formats and self.name.strip().lower() in _STORAGE_FORMATS:
            # a storage format where a dtype is asked (--weight-dtype nvfp4)
            hint = (
                f" ({name} is a storage format with scales: give a plain dtype here (fp4: 4 "
                "bits every weight, no scales), or the format per component to size its scales: "
                f"plan takes --expert-dtype {name} --attention-dtype {name}, search "
                f"--component-choice experts={name},attention={name}, the Python API "
                "component_dtypes=)"
            )
        if formats and self.name.strip().lower() in ("fp8_block", "fp8-block", "fp8_blockwise"):
            # block-scaled fp8 is a checkpoint's format, not a dtype a flag sizes (a trial
            # reached for --weight-dtype fp8_block to time vLLM's block-scaled kernels)
            hint = (
                " (block-scaled fp8 is a format per component: plan takes "
                "--attention-dtype fp8_block --dense-ffn-dtype fp8_block --expert-dtype "
                "fp8_block, search --component-choice "
                "attention=fp8_block,dense_ffn=fp8_block,experts=fp8_block, the Python API "
                "component_dtypes=; a checkpoint declaring it "
                "(quant_method fp8 with weight_block_size [128, 128], as DeepSeek-V3's and "
                "the -FP8 checkpoints do) is read as stored; fp8 here is per-tensor fp8)"
            )
        return f"{head}unknown {self.what} '{name[:40]}'; use one of: {', '.join(self.known)}{hint}"


#: storage formats whose scales a plain dtype does not carry (mlacalc.serving.precision)
_STORAGE_FORMATS = ("nvfp4", "mxfp4", "mxfp4_mxfp8", "w4a16_nvfp4")


class InvalidArgumentError(ValueError, MlacalcError):
    """An argument of an API call is out of range or of the wrong kind."""

    def __init__(self, argument: str, message: str):
        self.argument = argument
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self.argument}: {self.message}"


class UnknownHardwareError(KeyError, MlacalcError):
    """A hardware name that is neither in the catalogue, a YAML file, nor a measured set."""

    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, sorted(known)
        super().__init__(name)

    def __str__(self) -> str:
        upper = [k.upper() for k in self.known]
        close = get_close_matches(str(self.name).upper(), upper, n=3, cutoff=0.4)
        # in the order of closeness; a name the typed one begins (mi300 -> MI300X) first
        typed = str(self.name).upper()
        close = [self.known[upper.index(c)] for c in close]
        close.sort(key=lambda k: not k.upper().startswith(typed))
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        return (
            f"unknown hardware '{self.name}'.{hint} Known: {', '.join(self.known)}; "
            "or a YAML file, or measured:<set> for a committed measured set, or the path of a "
            "microbenchmark .json (mlacalc bench wrote it)."
        )


class AmbiguousHardwareError(InvalidArgumentError):
    """A family name (``"A100"``) that fits several catalogue entries; lists them."""

    def __init__(self, name: str, candidates: tuple[str, ...]):
        self.name, self.candidates = name, tuple(candidates)
        super().__init__(
            "hardware",
            f"'{name}' names several catalogue entries: {', '.join(candidates)}; give one of them",
        )


class DoesNotFitError(ValueError, MlacalcError):
    """The weights alone exceed the memory a GPU has for them."""


class FormulaBindingError(KeyError, MlacalcError):
    """A generated evaluator was called without a symbol it needs: a defect in mlacalc
    itself (the caller's values miss a dimension), never a user error; please report it."""

    def __init__(self, symbol: str, evaluator: str):
        self.symbol, self.evaluator = symbol, evaluator
        super().__init__(symbol)

    def __str__(self) -> str:
        return (
            f"internal error: {self.evaluator} needs the symbol '{self.symbol}', which was not "
            "given a value (please report this)"
        )
