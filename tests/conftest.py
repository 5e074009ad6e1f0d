import pytest

import mlacalc

SHIPPED = mlacalc.shipped_models()


@pytest.fixture(scope="session")
def v3():
    return mlacalc.load_model("deepseek-v3")
