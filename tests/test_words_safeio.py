"""The bounded reader: every bound fails fast with a one-line ConfigError naming the file."""

import pytest

from mlacalc import ConfigError
from mlacalc.words import safeio


def laughs(levels: int = 9) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def error(text: str, origin: str = "m.yaml") -> str:
    with pytest.raises(ConfigError) as info:
        safeio.parse_data(text, origin)
    message = str(info.value)
    assert message.startswith(origin) and "\n" not in message and len(message) < 300
    return message


def test_plain_documents_read_as_before():
    assert safeio.parse_data("a: 1\nb: [1, 2]\nc: {d: e}\n", "m.yaml") == {
        "a": 1,
        "b": [1, 2],
        "c": {"d": "e"},
    }
    assert safeio.parse_data('{"a": [1, 2.5, null, true]}', "c.json") == {"a": [1, 2.5, None, True]}
    # aliases and merge keys that do not multiply the document are fine
    merged = safeio.parse_data("x: &x {a: 1}\ny:\n  <<: *x\n  b: 2\n", "m.yaml")
    assert merged["y"] == {"a": 1, "b": 2}
    assert safeio.parse_data("- a\n- a\n", "m.yaml") == ["a", "a"]


def test_alias_expansion_is_bounded_before_it_happens():
    assert "aliases" in error(laughs())
    small = laughs(3)  # 9 x 9 x 9 values: far below the bound
    assert len(safeio.parse_data(small, "m.yaml")["c"]) == 9


@pytest.mark.parametrize(
    "text,origin",
    [
        ("a: " + "[" * 100_000 + "]" * 100_000, "m.yaml"),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "c.json"),
        (
            "a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 80)) + "  " * 80 + "v: 1\n",
            "m.yaml",
        ),
    ],
)
def test_nesting_depth_is_bounded(text, origin):
    assert f"nests deeper than {safeio.MAX_DEPTH} levels" in error(text, origin)


@pytest.mark.parametrize(
    "text,origin",
    [
        ("a: " + "9" * 5000, "m.yaml"),
        ("a: !!int '" + "9" * 5000 + "'", "m.yaml"),
        ('{"a": -' + "9" * 5000 + "}", "c.json"),
    ],
)
def test_integer_length_is_bounded(text, origin):
    assert "5,000 digits" in error(text, origin)


def test_long_strings_of_digits_stay_strings():
    assert safeio.parse_data("a: '" + "9" * 5000 + "'", "m.yaml")["a"] == "9" * 5000


@pytest.mark.parametrize(
    "text,origin",
    [
        ("a: 1\nb: 2\na: 3\n", "m.yaml"),
        ("outer:\n  a: 1\n  a: 1\n", "m.yaml"),
        ('{"a": 1, "b": {"c": 1, "c": 2}}', "c.json"),
    ],
)
def test_duplicate_keys_are_an_error(text, origin):
    assert "twice" in error(text, origin)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_nan_and_infinity_are_refused(constant):
    assert constant in error('{"a": ' + constant + "}", "c.json")


def test_object_tags_are_refused_never_run(tmp_path):
    marker = tmp_path / "ran"
    for text in (
        f"a: !!python/object/apply:os.system ['touch {marker}']",
        f"!!python/object/apply:os.system ['touch {marker}']",
        "a: !custom 1",
    ):
        assert "tag" in error(text)
    assert not marker.exists()


def test_unhashable_keys_and_malformed_text():
    assert "not a plain value" in error("? [a, b]\n: 1\n")
    assert "not valid YAML at line 3" in error("a: 1\nb: [1, 2\n")
    assert "not valid JSON at line 1" in error('{"a": ', "c.json")
    assert "is empty" in error("   \n")


def test_file_size_and_encoding(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * safeio.MAX_BYTES)
    with pytest.raises(ConfigError, match="1 MiB"):
        safeio.read_data(big)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"a: \xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        safeio.read_data(latin)
    with pytest.raises(ConfigError, match="cannot be read"):
        safeio.read_data(tmp_path / "absent.yaml")
    good = tmp_path / "c.json"
    good.write_text('{"a": 1}')
    assert safeio.read_data(good) == {"a": 1}


def test_hardware_files_use_the_bounded_reader(tmp_path):
    from mlacalc.hardware.catalogue import load_hardware

    path = tmp_path / "gpu.yaml"
    path.write_text("name: x\nname: y\n")
    with pytest.raises(ConfigError, match="twice"):
        load_hardware(path)
    path.write_text(laughs())
    with pytest.raises(ConfigError, match="aliases"):
        load_hardware(path)
