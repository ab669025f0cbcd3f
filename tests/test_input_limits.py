"""The readers' limits: encodings, nesting, alias expansion, long integers, duplicate keys, conditions,
and request values that parse but cannot be real. One case per rule, each with its exact message."""

from __future__ import annotations

import codecs
import json

import pytest
import yaml
from click.testing import CliRunner

from optkit.catalog.conditions import MAX_NESTING, compile_condition
from optkit.catalog.jsonio import load_json_text
from optkit.catalog.textfile import MAX_BYTES, read_text
from optkit.catalog import yamlio
from optkit.catalog.yamlio import load_yaml_text
from optkit.cli.main import cli
from optkit.errors import ConditionError, ValidationFailed

UTF8 = "model: qwen3.5-35b\nvariant: é\n"


def _laughs(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


READ_CASES = [
    ("utf16-bom", UTF8.encode("utf-16"),
     "f.yaml:1: is UTF-16 encoded; optkit reads UTF-8 (convert it: iconv -f UTF-16 -t UTF-8 FILE > NEW)"),
    ("utf16-be-bom", codecs.BOM_UTF16_BE + UTF8.encode("utf-16-be"),
     "f.yaml:1: is UTF-16 encoded; optkit reads UTF-8 (convert it: iconv -f UTF-16 -t UTF-8 FILE > NEW)"),
    ("utf32-bom", UTF8.encode("utf-32"),
     "f.yaml:1: is UTF-32 encoded; optkit reads UTF-8 (convert it: iconv -f UTF-32 -t UTF-8 FILE > NEW)"),
    ("utf16-no-bom", UTF8.encode("utf-16-le"),
     "f.yaml:1: looks UTF-16 encoded (NUL bytes between the characters); optkit reads UTF-8 "
     "(convert it: iconv -f UTF-16LE -t UTF-8 FILE > NEW)"),
    ("latin-1", UTF8.encode("latin-1"),
     "f.yaml:2: not UTF-8: byte 0xe9 at column 10 cannot be decoded (save the file as UTF-8)"),
    ("binary", b"model: x\n\x89PNG\r\n\x1a\n\0\0\0", "f.yaml:4: holds binary data (a NUL byte), not text"),
]


@pytest.mark.parametrize("data, message", [c[1:] for c in READ_CASES], ids=[c[0] for c in READ_CASES])
def test_unreadable_text_is_located(tmp_path, data, message):
    (tmp_path / "f.yaml").write_bytes(data)
    with pytest.raises(ValidationFailed) as info:
        read_text(tmp_path / "f.yaml", "f.yaml")
    assert str(info.value) == message


def test_utf8_byte_order_mark_is_dropped(tmp_path):
    (tmp_path / "f.yaml").write_bytes(codecs.BOM_UTF8 + UTF8.encode())
    assert read_text(tmp_path / "f.yaml") == UTF8


def test_oversized_file_is_refused_without_reading_it_all(tmp_path):
    (tmp_path / "f.yaml").write_bytes(b"a" * (MAX_BYTES + 1))
    with pytest.raises(ValidationFailed, match="larger than 8 MiB"):
        read_text(tmp_path / "f.yaml")


YAML_CASES = [
    ("billion-laughs", _laughs(9), "f.yaml:5: holds more than 100,000 values once its aliases are expanded "
     "(write the values out, or use fewer aliases)"),
    ("alias-cycle", "a: &a [1, *a]\n", "f.yaml:1: the alias *a is inside the value &a it names (a cycle) "
     "(write the value out)"),
    ("deep-flow", "a: " + "[" * 5000 + "]" * 5000 + "\n", "f.yaml:1: nested more than 64 levels deep"),
    # libyaml's composer recurses in C: this document crashed the process (SIGSEGV) before the check
    ("deeper-than-the-c-stack", "[" * 100_000 + "]" * 100_000, "f.yaml:1: nested more than 64 levels deep"),
    ("deep-block", "".join(f"{'  ' * i}k{i}:\n" for i in range(70)) + "  " * 70 + "x: 1\n",
     "f.yaml:65: nested more than 64 levels deep"),
    ("5000-digit-int", "input_len: " + "9" * 5000 + "\n",
     "f.yaml:1: input_len: an integer of 5000 digits; no number optkit reads has more than 100"),
    ("duplicate-key", "model: a\ntp: 2\nmodel: b\n",
     "f.yaml:3: model: key 'model' appears twice, at lines 1 and 3 (keep one of them)"),
    ("duplicate-nested-key", "a:\n  b: 1\n  b: 2\n", "f.yaml:3: a.b: key 'b' appears twice, at lines 2 and 3 "
     "(keep one of them)"),
    ("impossible-date", "x:\n  when: 2026-13-45\n", "f.yaml:2: x.when: '2026-13-45' is not a valid date "
     "(month must be in 1..12) (quote it if it is meant as text)"),
    ("bad-int-tag", "n: !!int abc\n", "f.yaml:1: n: 'abc' is not a valid integer (invalid literal for int() "
     "with base 10: 'abc') (quote it if it is meant as text)"),
    ("control-character", "a: b\x07\n", "f.yaml:1: invalid YAML: control characters are not allowed "
     "(character #x0007)"),
    ("list-as-key", "? [a, b]\n: 1\n", "f.yaml:1: invalid YAML: found unhashable key"),
]


@pytest.mark.parametrize("text, data", [
    pytest.param("a: &x [1, 2]\nb: *x\n", {"a": [1, 2], "b": [1, 2]}, id="a-few-aliases"),
    pytest.param("base: &b {x: 1}\nmore:\n  <<: *b\n  x: 2\n", {"base": {"x": 1}, "more": {"x": 2}},
                 id="merge-key-overridden-is-no-duplicate"),
    pytest.param(_laughs(4), None, id="ten-thousand-values"),
    pytest.param("a: " + "[" * 63 + "]" * 63 + "\n", None, id="exactly-max-depth"),
])
def test_yaml_within_limits_loads(text, data):
    loaded, _ = load_yaml_text(text, "f.yaml")
    assert data is None or loaded == data


JSON_CASES = [
    ("duplicate-key", '{\n  "a": 1,\n  "b": {"c": 2,\n        "c": 3}\n}\n',
     "f.json:4: b.c: key 'c' appears twice, at lines 3 and 4 (keep one of them)"),
    ("deep", "[" * 5000 + "]" * 5000, "f.json:1: nested more than 64 levels deep"),
    ("deep-but-under-python-limit", '{"a":\n' + "[" * 500 + "]" * 500 + "}", "f.json:2: nested more than 64 levels deep"),
    ("5000-digit-int", '{\n "x": ' + "1" * 5000 + "}",
     "f.json:2: an integer of 5000 digits; no number optkit reads has more than 100"),
    ("nan", '{"x": NaN}', "f.json:1: NaN is not a JSON number"),
    ("lone-surrogate", '{"x": ["ok", "\\ud800"]}', "f.json: x[1]: holds an escaped lone surrogate "
     "(\\ud800-\\udfff), which is not a character (write the character itself)"),
    ("syntax", '{"a": 1,\n "b" 2}', "f.json:2: invalid JSON: Expecting ':' delimiter (line 2, column 6)"),
]


PARSER_CASES = [(f"yaml-{c[0]}", load_yaml_text, "f.yaml", *c[1:]) for c in YAML_CASES]
PARSER_CASES += [(f"json-{c[0]}", load_json_text, "f.json", *c[1:]) for c in JSON_CASES]


@pytest.mark.parametrize("load, name, text, message", [c[1:] for c in PARSER_CASES], ids=[c[0] for c in PARSER_CASES])
def test_parser_limits(load, name, text, message):
    with pytest.raises(ValidationFailed) as info:
        load(text, name)
    assert str(info.value) == message


class _StrictParser(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """A YAML library that refuses deep nesting on its own before the first event, with its own
    wording, at the last line it read (as libyaml's scanner does from PyYAML 6.0.4 on)."""

    def __init__(self, text):
        super().__init__(text)
        self.last_line = text.count("\n")

    def check_event(self, *choices):
        raise yaml.scanner.ScannerError("while increasing flow level", None, "some library wording",
                                        yaml.error.Mark("f.yaml", 0, self.last_line, 0, None, None))


DEEP = [case for case in YAML_CASES if case[0].startswith("deep")]


@pytest.mark.parametrize("parser", [pytest.param(_StrictParser, id="library-refuses-first"),
                                    pytest.param(yaml.SafeLoader, id="pure-python")])
@pytest.mark.parametrize("name, text, message", DEEP, ids=[case[0] for case in DEEP])
def test_optkits_depth_limit_comes_first_whatever_the_library(monkeypatch, parser, name, text, message):
    """optkit's own refusal, at its line, whichever YAML parser is installed and whatever it refuses."""
    monkeypatch.setattr(yamlio, "_Base", parser)
    monkeypatch.setattr(yamlio._check_events, "__defaults__", (parser,))
    with pytest.raises(ValidationFailed) as info:
        load_yaml_text(text, "f.yaml")
    assert str(info.value) == message


def test_json_lines_are_found_when_a_problem_needs_one():
    _, lines = load_json_text(json.dumps({"a": {"b": [1, {"c": 2}]}}, indent=2), "f.json")
    assert lines.location(("a", "b", 1, "c")).line == 6


CONDITION_CASES = [
    ("parentheses", "(" * 5000 + "spec.mtp" + ")" * 5000, f"nested more than {MAX_NESTING} levels deep (at column 33)"),
    ("not-chain", "not " * 5000 + "spec.mtp", f"nested more than {MAX_NESTING} levels deep (at column 129)"),
    ("lists", "spec.mtp in " + "[" * 5000, f"nested more than {MAX_NESTING} levels deep (at column 45)"),
]


@pytest.mark.parametrize("text, message", [c[1:] for c in CONDITION_CASES], ids=[c[0] for c in CONDITION_CASES])
def test_deep_conditions_are_errors_not_recursion(text, message):
    with pytest.raises(ConditionError) as info:
        compile_condition(text)
    assert info.value.message + f" (at column {info.value.column + 1})" == message
    assert len(str(info.value)) < 400  # the expression is shortened in the message


def test_long_flat_condition_compiles_in_linear_time():
    compile_condition(" and ".join(["spec.mtp"] * 20_000) + " " * 100_000)


REQUEST_CASES = [
    ("concurrency-2-63", "concurrency: [9223372036854775808]",
     "r.yaml:2: concurrency[0]: 9223372036854775808 is out of range: give an integer from 1 to 65536"),
    ("concurrency-true", "concurrency: true",
     "r.yaml:2: concurrency: expected levels such as [1, 4, 8], one level, or '1,4,8', got true"),
    ("concurrency-item-true", "concurrency: [1, true]",
     "r.yaml:2: concurrency[1]: expected an integer from 1 to 65536, got true"),
    ("concurrency-zero", "concurrency: '0,4'", "r.yaml:2: concurrency[0]: 0 is out of range: give an integer "
     "from 1 to 65536"),
    ("concurrency-words", "concurrency: 1,four", "r.yaml:2: concurrency: '1,four': give comma-separated "
     "integers, e.g. 1,4,8"),
    ("input-len-10-12", "input_len: 1000000000000",
     "r.yaml:2: input_len: 1000000000000 is out of range: give an integer from 1 to 1048576"),
    ("tp-true", "tp: true", "r.yaml:2: tp: expected an integer from 1 to 1024, got true"),
    ("tp-string", "tp: '2'", "r.yaml:2: tp: expected an integer from 1 to 1024, got '2'"),
    ("tp-float", "tp: 2.0", "r.yaml:2: tp: expected an integer from 1 to 1024, got 2.0"),
    ("mtp-one", "mtp: 1", "r.yaml:2: mtp: Input should be a valid boolean"),
    ("k-17", "mtp: true\nnum_speculative_tokens: 17",
     "r.yaml:3: num_speculative_tokens: 17 is out of range: give an integer from 1 to 16"),
    ("duplicate-key", "tp: 2\nmodel: qwen3.6-27b", "r.yaml:3: model: key 'model' appears twice, at lines 1 and 3 "
     "(keep one of them)"),
]
HUGE = "9" * 5000


@pytest.mark.parametrize("body, message", [c[1:] for c in REQUEST_CASES], ids=[c[0] for c in REQUEST_CASES])
def test_absurd_request_values_are_refused_with_the_range(tmp_path, monkeypatch, body, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text(f"model: qwen3.5-35b\n{body}\n")
    result = CliRunner().invoke(cli, ["plan", "--request", "r.yaml"], catch_exceptions=False)
    assert (result.exit_code, result.output) == (1, f"optkit: error: {message}\n")


@pytest.mark.parametrize("file_value, flag_value", [
    pytest.param("'1,4'", "1,4", id="comma-string"),
    pytest.param("[4, 1]", "4,1", id="list"),
    pytest.param("4", "4", id="one-level"),
])
def test_concurrency_has_one_grammar_in_files_and_flags(tmp_path, file_value, flag_value):
    (tmp_path / "r.yaml").write_text(f"model: qwen3.5-35b\nconcurrency: {file_value}\n")
    from_file = CliRunner().invoke(cli, ["plan", "--request", str(tmp_path / "r.yaml"), "--json"])
    from_flag = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--concurrency", flag_value, "--json"])
    assert from_file.exit_code == from_flag.exit_code == 0, from_file.output + from_flag.output
    assert json.loads(from_file.output)["request"]["concurrency"] == json.loads(from_flag.output)["request"]["concurrency"]


@pytest.mark.parametrize("flag, value, message", [
    pytest.param("--concurrency", "9223372036854775808", "9223372036854775808 is out of range: give an integer "
                 "from 1 to 65536", id="concurrency"),
    pytest.param("--input-len", "1000000000000", "1000000000000 is out of range: give an integer from 1 to 1048576",
                 id="input-len"),
    pytest.param("--tp", "0", "0 is out of range: give an integer from 1 to 1024", id="tp"),
])
def test_flags_have_the_request_files_ranges(flag, value, message):
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", flag, value])
    assert result.exit_code == 2
    assert f"Invalid value for '{flag}': {message}" in result.output


def test_version_too_long_for_int_is_a_request_error(tmp_path):
    """packaging raises ValueError (not InvalidVersion) when a number has more digits than int() takes."""
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--vllm-ascend-version", f"0.{HUGE}"])
    assert result.exit_code == 1 and f"--vllm-ascend-version '0.{HUGE}' is not a version" in result.output


@pytest.mark.parametrize("old, new, message", [
    pytest.param('vllm_ascend: ">=0.23.0,<0.24"', f'vllm_ascend: ">={HUGE}"',
                 f"versions.vllm_ascend: '>={HUGE}' is not a PEP 440 version specifier", id="specifier"),
    pytest.param('"parallel.tp == 2"', f'"parallel.tp == {HUGE}"',
                 "a number of 5000 characters; no fact is that large", id="condition-number"),
])
def test_recipe_numbers_too_long_for_int(tmp_path, old, new, message):
    from test_catalog_validation import VALID, errors_of, write_recipe

    assert old in VALID
    assert message in errors_of(write_recipe(tmp_path, VALID.replace(old, new)))
