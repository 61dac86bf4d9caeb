"""JSON Schema -> GBNF (`llmk json-schema-to-grammar`, src/json_schema.c), checked against
references llmk did not write: the `jsonschema` package decides validity, and the grammar is
read by tests/py/gbnf_match.py (a GBNF matcher written from the format's description).

- For each schema (together they use every converted keyword): hand-written instances that
  jsonschema calls valid match the grammar, printed compactly and indented; invalid ones do not
  (each is invalid through a constraint the grammar expresses).
- Soundness: strings drawn at random from the grammar are JSON that jsonschema accepts (formats
  checked with its FormatChecker).
- Refusals: every keyword the grammar cannot enforce is refused, naming the keyword and its JSON
  pointer; malformed schemas are refused; the output is deterministic.
- End to end: the default model generates under -j (greedy and seeded), and the output is JSON
  the schema accepts; batch's "json_schema" field too.
"""
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gbnf_match import Grammar  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
SAN_BIN = os.environ.get("LLMK_SAN_BIN")
MODEL = Path(os.environ.get("LLMK_MODELS", Path.home() / ".cache" / "llmk")) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def llmk(*args, binary=BIN, input=None, timeout=300):
    return subprocess.run([binary, *map(str, args)], capture_output=True, timeout=timeout, input=input)


def to_gbnf(schema, binary=BIN):
    r = llmk("json-schema-to-grammar", json.dumps(schema), binary=binary)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode()


def openapi(schema):
    """nullable (OpenAPI 3.0) as plain JSON Schema, for jsonschema, which does not know it."""
    if isinstance(schema, list):
        return [openapi(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: openapi(v) if k not in ("enum", "const", "required") else v for k, v in schema.items()}
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: openapi(v) for k, v in schema["properties"].items()}
    for defs in ("$defs", "definitions"):
        if isinstance(schema.get(defs), dict):
            out[defs] = {k: openapi(v) for k, v in schema[defs].items()}
    if out.pop("nullable", False):
        return {"anyOf": [out, {"type": "null"}]}
    return out


def validator(schema):
    s = openapi(schema)
    cls = jsonschema.Draft7Validator if isinstance(schema.get("items"), list) else jsonschema.Draft202012Validator
    return cls(s, format_checker=cls.FORMAT_CHECKER)


def texts(instance, ascii_ok=True):
    """The instance as JSON text, compact and pretty-printed (within the grammar's whitespace bound),
    with raw and \\u-escaped characters; not characters past U+FFFF escaped as surrogate pairs, which
    the grammar leaves out (its character count must be the decoded string's)."""
    out = {json.dumps(instance, separators=(",", ":"), ensure_ascii=False), json.dumps(instance, ensure_ascii=False)}
    astral = any(ord(c) > 0xFFFF for c in json.dumps(instance, ensure_ascii=False))
    out.add(json.dumps(instance, indent=2, ensure_ascii=not astral and ascii_ok))
    return out


# (name, schema, valid instances, invalid instances)
CASES = [
    ("allOf_objects", {
        "$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
        "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"name": {"type": "string", "maxLength": 4}}, "required": ["name"]},
                  {"type": "object", "title": "extra", "properties": {"id": {"type": "integer"}, "ok": {"type": "boolean"}}}]},
     [{"id": 1, "name": "a"}, {"id": -3, "name": "", "ok": True}],
     [{"id": 1}, {"name": "a"}, {"id": "1", "name": "a"}, {"id": 1, "name": "abcde"}, {"id": 1, "name": "a", "ok": 1}, []]),
    ("object", {
        "type": "object", "title": "Person", "description": "ignored", "$schema": "https://json-schema.org/draft/2020-12/schema",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 8, "examples": ["Ann"]},
            "age": {"type": "integer", "default": 3},
            "score": {"type": "number"},
            "ok": {"type": "boolean"},
            "none": {"type": "null"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        },
        "required": ["name", "tags"]},
     [{"name": "A", "tags": ["x"]}, {"name": "Zoë 中", "age": -12, "tags": ["a", "b", "c"]},
      {"name": "x" * 8, "age": 0, "score": 1.5e-3, "ok": True, "none": None, "tags": [""]},
      {"name": "q\"\\\n", "score": -0.25, "tags": ["é", "\U0001F600"]}, {"name": "x", "score": 12, "ok": False, "tags": ["t"]}],
     [{"tags": ["x"]}, {"name": "", "tags": ["x"]}, {"name": "x" * 9, "tags": ["x"]}, {"name": "A", "tags": []},
      {"name": "A", "tags": ["a", "b", "c", "d"]}, {"name": "A", "age": 1.5, "tags": ["x"]},
      {"name": "A", "ok": "yes", "tags": ["x"]}, {"name": 5, "tags": ["x"]}, [], "x", None]),
    ("enum_const", {
        "type": "object", "properties": {
            "color": {"enum": ["red", "green", "a \"q\"", 7, 2.5, None, True, [1, "x"], {"k": False}]},
            "kind": {"const": "fixed"}, "num": {"type": "number", "enum": [1, "one", 3.25]}},
        "required": ["color", "kind"], "additionalProperties": False},
     [{"color": "red", "kind": "fixed"}, {"color": 7, "kind": "fixed", "num": 3.25}, {"color": None, "kind": "fixed"},
      {"color": [1, "x"], "kind": "fixed", "num": 1}, {"color": {"k": False}, "kind": "fixed"},
      {"color": 'a "q"', "kind": "fixed"}, {"color": 2.5, "kind": "fixed"}, {"color": True, "kind": "fixed"}],
     [{"color": "blue", "kind": "fixed"}, {"color": "red", "kind": "other"}, {"color": "red"},
      {"color": "red", "kind": "fixed", "num": "one"}, {"color": False, "kind": "fixed"}]),
    ("types_nullable", {
        "type": "object", "properties": {
            "a": {"type": ["string", "null"], "maxLength": 2}, "b": {"type": "integer", "nullable": True},
            "c": {"type": ["number", "boolean"]}, "d": {"type": ["array", "object"]}},
        "required": ["a", "b", "c", "d"]},
     [{"a": None, "b": None, "c": 1.5, "d": []}, {"a": "xy", "b": 4, "c": True, "d": {"k": [1, {"z": None}]}},
      {"a": "", "b": -1, "c": 0, "d": [1, "2", None, [True]]}],
     [{"a": "xyz", "b": 1, "c": 1, "d": []}, {"a": None, "b": "1", "c": 1, "d": []},
      {"a": None, "b": 1, "c": "1", "d": []}, {"a": None, "b": 1, "c": 1, "d": "x"}]),
    ("additional", {
        "type": "object", "properties": {
            "closed": {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": False},
            "open": {"type": "object", "properties": {"id": {"type": "integer"}, "i": {"type": "string"}},
                     "additionalProperties": True},
            "map": {"type": "object", "additionalProperties": {"type": "integer"}},
            "any": {"type": "object"},
            "never": False},
        "required": ["closed", "open", "map"]},
     [{"closed": {}, "open": {}, "map": {}}, {"closed": {"x": 1}, "open": {"id": 1, "extra": [1], "ix": None, "": 0},
                                              "map": {"a": 1, "b": -2}, "any": {"q": {"r": "s"}}},
      {"closed": {"x": 2}, "open": {"idd": "x", "j": True}, "map": {"\u00e9": 5}}],
     [{"closed": {"y": 1}, "open": {}, "map": {}}, {"closed": {}, "open": {"id": "x"}, "map": {}},
      {"closed": {}, "open": {}, "map": {"a": "x"}}, {"closed": {}, "open": {}, "map": {}, "never": 1},
      {"closed": {}, "open": {}, "map": {}, "any": []}]),
    ("combinators", {
        "type": "object", "properties": {
            "any": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 3}, {"type": "array", "items": {"type": "boolean"}}]},
            "one": {"oneOf": [
                {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"], "additionalProperties": False},
                {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}}, "required": ["kind", "side"], "additionalProperties": False},
                {"type": "string"}], "discriminator": {"propertyName": "kind"}},
            "all": {"allOf": [{"type": "string", "minLength": 2}]}},
        "required": ["any", "one", "all"]},
     [{"any": 5, "one": {"kind": "circle", "r": 1.5}, "all": "ab"}, {"any": "abc", "one": {"kind": "square", "side": 2}, "all": "xyz"},
      {"any": [True, False], "one": "just text", "all": "éé"}],
     [{"any": 1.5, "one": "x", "all": "ab"}, {"any": "abcd", "one": "x", "all": "ab"}, {"any": 1, "one": {"kind": "circle", "side": 1}, "all": "ab"},
      {"any": 1, "one": {"kind": "tri", "r": 1}, "all": "ab"}, {"any": 1, "one": "x", "all": "a"}, {"any": [1], "one": "x", "all": "ab"}]),
    ("refs", {
        "$defs": {
            "node": {"type": "object", "properties": {"value": {"type": "integer"},
                                                      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
                     "required": ["value"], "additionalProperties": False},
            "name": {"$ref": "#/definitions/str"}},
        "definitions": {"str": {"type": "string", "maxLength": 4}},
        "type": "object", "properties": {"tree": {"$ref": "#/$defs/node"}, "label": {"$ref": "#/$defs/name"},
                                         "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
        "required": ["tree", "next"]},
     [{"tree": {"value": 1}, "next": None}, {"tree": {"value": 1, "children": [{"value": 2}, {"value": 3, "children": []}]}, "label": "ab",
                                             "next": {"tree": {"value": 4}, "next": None}}],
     [{"tree": {"value": "1"}, "next": None}, {"tree": {"value": 1, "children": [{}]}, "next": None},
      {"tree": {"value": 1}, "label": "abcde", "next": None}, {"tree": {"value": 1}, "next": {"next": None}},
      {"tree": {"value": 1, "children": [{"value": 1}, {"value": 2}, {"value": 3}]}, "next": None}]),
    ("tuples", {
        "type": "object", "properties": {
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
            "head": {"type": "array", "prefixItems": [{"const": "cmd"}], "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
            "any3": {"type": "array", "minItems": 3, "maxItems": 3}},
        "required": ["pair", "head", "any3"]},
     [{"pair": [1, "a"], "head": ["cmd", 1], "any3": [1, "x", None]}, {"pair": [-5, ""], "head": ["cmd", 1, 2, 3], "any3": [[], {}, 0.5]}],
     [{"pair": [1, "a", 2], "head": ["cmd", 1], "any3": [1, 2, 3]},
      {"pair": [1, "a"], "head": ["cmd"], "any3": [1, 2, 3]}, {"pair": [1, "a"], "head": ["cmd", 1, 2, 3, 4], "any3": [1, 2, 3]},
      {"pair": [1, "a"], "head": ["x", 1], "any3": [1, 2, 3]}, {"pair": [1, "a"], "head": ["cmd", 1], "any3": [1, 2]}]),
    ("formats", {
        "type": "object", "properties": {
            "d": {"type": "string", "format": "date"}, "t": {"type": "string", "format": "time"},
            "dt": {"type": "string", "format": "date-time"}, "u": {"type": "string", "format": "uuid"},
            "ip": {"type": "string", "format": "ipv4"}},
        "required": ["d", "t", "dt", "u", "ip"]},
     [{"d": "2024-02-29", "t": "23:59:59Z", "dt": "2000-02-29T00:00:00.123+05:30", "u": "123e4567-e89b-12d3-a456-426614174000", "ip": "255.0.10.1"},
      {"d": "0001-12-31", "t": "00:00:00-01:00", "dt": "1999-11-30T12:30:45Z", "u": "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE", "ip": "0.0.0.0"}],
     [{"d": "2023-02-29", "t": "23:59:59Z", "dt": "2000-01-01T00:00:00Z", "u": "123e4567-e89b-12d3-a456-426614174000", "ip": "1.2.3.4"},
      {"d": "1900-02-29", "t": "23:59:59Z", "dt": "2000-01-01T00:00:00Z", "u": "123e4567-e89b-12d3-a456-426614174000", "ip": "1.2.3.4"},
      {"d": "2024-04-31", "t": "23:59:59Z", "dt": "2000-01-01T00:00:00Z", "u": "123e4567-e89b-12d3-a456-426614174000", "ip": "1.2.3.4"},
      {"d": "2024-01-01", "t": "24:00:00Z", "dt": "2000-01-01T00:00:00Z", "u": "123e4567-e89b-12d3-a456-426614174000", "ip": "1.2.3.4"},
      {"d": "2024-01-01", "t": "23:00:00Z", "dt": "2000-01-01T00:00:00Z", "u": "123e4567e89b12d3a456426614174000", "ip": "1.2.3.4"},
      {"d": "2024-01-01", "t": "23:00:00Z", "dt": "2000-01-01T00:00:00Z", "u": "123e4567-e89b-12d3-a456-426614174000", "ip": "256.2.3.4"},
      {"d": "2024-01-01", "t": "23:00:00Z", "dt": "2000-01-01T00:00:00Z", "u": "123e4567-e89b-12d3-a456-426614174000", "ip": "01.2.3.4"}]),
    ("any_object", {"type": "object"},
     [{}, {"a": [1, {"b": None}]}, {"x": "y", "z": 1e5}], [[], 1, "x", None]),
    ("any_value", {}, [0, "s", None, True, [], {"a": {}}, [[[]]], -1.5e-7], []),
    ("draft7_items", {"type": "array", "items": [{"type": "boolean"}, {"type": "null"}], "additionalItems": {"type": "integer"}},
     [[True, None], [False, None, 1, 2]], [[None, True], [True, None, "x"], [True, None, 1.5]]),
    ("keys", {"type": "object", "properties": {"a b": {"type": "integer"}, "q\"k": {"type": "integer"}, "ü~/": {"type": "integer"}},
              "required": ["a b"], "additionalProperties": {"type": "boolean"}},
     [{"a b": 1}, {"a b": 1, "q\"k": 2, "ü~/": 3, "ü": True, "a": False, "a bc": True}],
     [{"a b": 1, "ü~/x": 1}, {"a b": True}, {}]),
]


@pytest.fixture(scope="module")
def grammars():
    return {name: Grammar(to_gbnf(schema)) for name, schema, _, _ in CASES}


@pytest.mark.parametrize("name,schema,valid,invalid", CASES, ids=[c[0] for c in CASES])
def test_instances(grammars, name, schema, valid, invalid):
    g, v = grammars[name], validator(schema)
    for inst in valid:
        errors = list(v.iter_errors(inst))
        assert not errors, f"test data: {inst!r} should be valid: {errors[0].message}"
        for text in texts(inst, ascii_ok=name != "keys"):  # extra keys are written without escapes
            assert g.matches(text), f"{name}: valid instance not accepted by the grammar: {text!r}"
    for inst in invalid:
        assert list(v.iter_errors(inst)), f"test data: {inst!r} should be invalid"
        for text in texts(inst):
            assert not g.matches(text), f"{name}: invalid instance accepted by the grammar: {text!r}"


@pytest.mark.parametrize("name,schema", [(c[0], c[1]) for c in CASES], ids=[c[0] for c in CASES])
def test_grammar_strings_are_valid(grammars, name, schema):
    """Every string the grammar can produce is JSON the schema accepts (random derivations)."""
    g, v = grammars[name], validator(schema)
    rng = random.Random(1234)
    n = 0
    for _ in range(300):
        text = g.sample(rng)
        if text is None:
            continue
        n += 1
        try:
            inst = json.loads(text)
        except ValueError as e:
            pytest.fail(f"{name}: the grammar produced text that is not JSON ({e}): {text!r}")
        errors = list(v.iter_errors(inst))
        assert not errors, f"{name}: the grammar produced {text!r}, which the schema refuses: {errors[0].message}"
        assert g.matches(text)
    assert n >= 100, f"{name}: only {n} samples finished"


def test_whitespace_is_bounded(grammars):
    g = grammars["any_object"]
    assert g.matches("{" + " " * 20 + "}")
    assert not g.matches("{" + " " * 21 + "}")
    assert g.matches("\n{}") and g.matches('{\r\n\t"a":\n' + " " * 20 + "1}")
    assert not g.matches("\n\n{}") and not g.matches('{"a": \n\n1}')
    assert not g.matches("{} ")  # nothing after the value: generation ends where the JSON does


def test_string_length_counts_code_points():
    g = Grammar(to_gbnf({"type": "string", "minLength": 2, "maxLength": 2}))
    assert g.matches('"\U0001F600\u00e9"') and g.matches('"\\n\\u00e9"')
    assert not g.matches('"\\ud83d\\ude00"')  # a surrogate pair decodes to one character
    assert not g.matches('"a"') and not g.matches('"abc"')


REFUSED = [
    ({"type": "integer", "minimum": 0}, "minimum", "#"),
    ({"type": "number", "maximum": 1}, "maximum", "#"),
    ({"type": "number", "exclusiveMinimum": 1}, "exclusiveMinimum", "#"),
    ({"type": "number", "exclusiveMaximum": 1}, "exclusiveMaximum", "#"),
    ({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}, "multipleOf", "#/properties/n"),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}, "pattern", "#/properties/s"),
    ({"type": "array", "items": {"type": "array", "uniqueItems": True}}, "uniqueItems", "#/items"),
    ({"type": "array", "contains": {"type": "integer"}}, "contains", "#"),
    ({"not": {"type": "string"}}, "not", "#"),
    ({"if": {"type": "string"}, "then": {"maxLength": 2}}, "if", "#"),
    ({"type": "object", "patternProperties": {"^x": {}}}, "patternProperties", "#"),
    ({"type": "object", "minProperties": 1}, "minProperties", "#"),
    ({"type": "object", "propertyNames": {"maxLength": 3}}, "propertyNames", "#"),
    ({"type": "object", "dependentRequired": {"a": ["b"]}}, "dependentRequired", "#"),
    ({"type": "object", "unevaluatedProperties": False}, "unevaluatedProperties", "#"),
    ({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 3}]}, "minimum", "#/anyOf/1"),
    ({"$defs": {"a": {"type": "string", "format": "email"}}, "$ref": "#/$defs/a"}, "format", "#/$defs/a"),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, "oneOf", "#"),
    ({"allOf": [{"type": "string"}, {"maxLength": 3}]}, "allOf", "#/allOf/0"),
    ({"allOf": [{"type": "object"}, {"type": "object", "additionalProperties": False}]}, "allOf", "#/allOf/1"),
    ({"allOf": [{"properties": {"a": {}}}, {"properties": {"a": {"type": "null"}}}]}, "allOf", "#/allOf/1"),
    ({"allOf": [{"type": "object"}, {"$ref": "#/$defs/x", "title": "t"}], "$defs": {"x": {}}}, "allOf", "#/allOf/1"),
    ({"$ref": "https://example.com/s.json"}, "$ref", "#"),
    ({"type": "string", "maxLength": 100000}, "maxLength", "#"),
    ({"type": "object", "properties": {"a": {}}, "required": ["b"]}, "required", "#"),
    ({"$ref": "#/$defs/a", "type": "string", "$defs": {"a": {}}}, "type", "#"),
    ({"enum": ["a", "b"], "maxLength": 1}, "maxLength", "#"),
    ({"typo": 1}, "typo", "#"),
]


@pytest.mark.parametrize("schema,keyword,path", REFUSED, ids=[r[1] + ":" + r[2] for r in REFUSED])
def test_refused_keywords(schema, keyword, path):
    r = llmk("json-schema-to-grammar", json.dumps(schema))
    err = r.stderr.decode()
    assert r.returncode == 1 and r.stdout == b"", err
    assert f'"{keyword}"' in err and f"JSON Schema {path}:" in err, err
    assert "llmk_unsupported" in err


MALFORMED = [
    ("{", "invalid JSON"), ('{"type": "strin"}', "unknown type"), ('{"type": 5}', "type"),
    ('{"properties": []}', "properties"), ('{"required": "a"}', "required"), ('{"enum": []}', "enum"),
    ('{"minLength": -1}', "minLength"), ('{"minItems": 2, "maxItems": 1}', "minItems"),
    ('{"$ref": "#/$defs/missing"}', "names nothing"), ('{"const": "a\\u0000b"}', "NUL"),
    ('{"anyOf": [{"$ref": "#"}, {"type": "null"}]}', "left recursion"), ('{} x', "unexpected text"),
    ('{"type": "object", "properties": {"a": {}, "a": {}}}', "twice"), ("false", "matches nothing"),
    ('{"const": 9007199254740993}', "2^53"),
]


@pytest.mark.parametrize("text,needle", MALFORMED, ids=[m[1] for m in MALFORMED])
def test_malformed_schemas(text, needle):
    r = llmk("json-schema-to-grammar", text)
    err = r.stderr.decode()
    assert r.returncode == 1 and r.stdout == b"" and needle in err, err


def test_cli_forms(tmp_path):
    schema = CASES[0][1]
    text = to_gbnf(schema)
    assert text == to_gbnf(schema), "the output is a function of the schema"
    f = tmp_path / "s.json"
    f.write_text(json.dumps(schema, indent=4))
    r = llmk("json-schema-to-grammar", "-f", f)
    assert r.returncode == 0 and r.stdout.decode() == text
    r = llmk("json-schema-to-grammar", "-f", "-", input=json.dumps(schema).encode())
    assert r.returncode == 0 and r.stdout.decode() == text
    r = llmk("json-schema-to-grammar", "--any-object")
    assert r.returncode == 0 and r.stdout.decode() == to_gbnf({"type": "object"})
    assert llmk("json-schema-to-grammar").returncode == 2
    assert llmk("json-schema-to-grammar", "{}", "-f", f).returncode == 2


@pytest.mark.skipif(not SAN_BIN, reason="LLMK_SAN_BIN not set")
def test_sanitized_build_same_output():
    for _, schema, _, _ in CASES:
        assert to_gbnf(schema, binary=SAN_BIN) == to_gbnf(schema)
    for schema, _, _ in REFUSED[:5]:
        assert llmk("json-schema-to-grammar", json.dumps(schema), binary=SAN_BIN).returncode == 1


# ---- end to end, with the default model -------------------------------------------------------

needs_model = pytest.mark.skipif(not MODEL.exists(), reason="default model not present")

E2E = [
    ("Describe a person as JSON.", {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}, "city": {"type": "string", "maxLength": 12}},
        "required": ["name", "age"], "additionalProperties": False}),
    ("List three fruits as JSON.", {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 3, "maxItems": 3}),
    ("Is the sky blue? Answer in JSON.", {"type": "object", "properties": {
        "answer": {"enum": ["yes", "no"]}, "confidence": {"type": "number"}}, "required": ["answer"]}),
    ("Give a date and a flag.", {"type": "object", "properties": {
        "when": {"type": "string", "format": "date"}, "flag": {"type": ["boolean", "null"]}}, "required": ["when", "flag"]}),
]


@needs_model
@pytest.mark.parametrize("prompt,schema", E2E, ids=["person", "fruits", "enum", "date"])
@pytest.mark.parametrize("seed", [None, 7])
def test_generation_follows_schema(prompt, schema, seed):
    args = ["run", "-m", MODEL, "-p", prompt, "-n", 160, "-j", json.dumps(schema), "--log-disable"]
    args += ["--temp", 0] if seed is None else ["--seed", seed, "--temp", 0.9]
    r = llmk(*args)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode().strip()
    inst = json.loads(out)  # the grammar only ends at the end of the JSON
    validator(schema).validate(inst)


@needs_model
def test_json_schema_file_and_conflicts(tmp_path):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}
    f = tmp_path / "s.json"
    f.write_text(json.dumps(schema))
    r = llmk("run", "-m", MODEL, "-p", "Say ok.", "-n", 20, "-jf", f, "--temp", 0, "--log-disable")
    assert r.returncode == 0, r.stderr.decode()
    validator(schema).validate(json.loads(r.stdout.decode()))
    r = llmk("run", "-m", MODEL, "-p", "x", "-n", 4, "-j", "{}", "--grammar", 'root ::= "a"')
    assert r.returncode != 0 and b"one of" in r.stderr
    r = llmk("run", "-m", MODEL, "-p", "x", "-n", 4, "--json-schema", '{"type": "integer", "minimum": 1}')
    assert r.returncode == 1 and b'"minimum"' in r.stderr


@needs_model
def test_batch_json_schema_field():
    lines = [{"prompt": "A person in JSON:", "max_tokens": 160, "json_schema": E2E[0][1]},
             {"prompt": "Fruits:", "max_tokens": 160, "json_schema": E2E[1][1], "temperature": 0.8, "seed": 3},
             {"prompt": "Hello", "max_tokens": 5}]
    r = llmk("batch", "-m", MODEL, "-f", "-", input="\n".join(json.dumps(x) for x in lines).encode())
    assert r.returncode == 0, r.stderr.decode()
    outs = [json.loads(x) for x in r.stdout.decode().splitlines()]
    for line, out in zip(lines[:2], outs):
        validator(line["json_schema"]).validate(json.loads(out["text"]))
    bad = {"prompt": "x", "json_schema": {"type": "string", "pattern": "a"}}
    r = llmk("batch", "-m", MODEL, "-f", "-", input=json.dumps(bad).encode())
    assert r.returncode != 0 and b'"pattern"' in r.stderr


@needs_model
def test_server_response_format():
    """llmk serve: OpenAI's response_format (json_schema with strict, json_object) and
    llama-server's json_schema field, through the official openai client; a refused schema is a
    400 naming the keyword."""
    openai = pytest.importorskip("openai")
    from test_serve import Server, error_of, http_req

    s = Server("-np", 2, "-c", 1024)
    try:
        client = s.client()
        schema = E2E[0][1]
        msgs = [{"role": "user", "content": "Describe a person as JSON."}]
        for seed in (None, 5):
            extra = {"temperature": 0} if seed is None else {"temperature": 0.9, "seed": seed}
            r = client.chat.completions.create(model=MODEL.name, messages=msgs, max_tokens=160, **extra, response_format={
                "type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}})
            validator(schema).validate(json.loads(r.choices[0].message.content))
            assert r.choices[0].finish_reason == "stop"
            if seed is None:
                greedy = r.choices[0].message.content
        # streamed under the same grammar: the deltas join into the same greedy text
        chunks = list(client.chat.completions.create(
            model=MODEL.name, messages=msgs, max_tokens=160, temperature=0, stream=True, response_format={
                "type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == greedy
        assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
        # any JSON object: the model may still be writing it when the budget ends; a finished one parses
        r = client.chat.completions.create(model=MODEL.name, messages=msgs, max_tokens=160, temperature=0,
                                           response_format={"type": "json_object"})
        content = r.choices[0].message.content
        any_object = Grammar(to_gbnf({"type": "object"}))
        if r.choices[0].finish_reason == "stop":
            assert isinstance(json.loads(content), dict) and any_object.matches(content)
        else:
            assert content.lstrip().startswith("{") and not any_object.matches(content)
        r = client.completions.create(model=MODEL.name, prompt="Fruits as JSON:", max_tokens=160, temperature=0,
                                      extra_body={"json_schema": E2E[1][1]})
        validator(E2E[1][1]).validate(json.loads(r.choices[0].text))
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=MODEL.name, messages=msgs, max_tokens=8, response_format={
                "type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer", "minimum": 3}}})
        assert '"minimum"' in str(e.value) and "#:" in str(e.value)
        body = {"messages": msgs, "max_tokens": 4}
        error_of(http_req(s, "POST", "/v1/chat/completions", {**body, "response_format": {"type": "xml"}}), 400, "response_format")
        error_of(http_req(s, "POST", "/v1/chat/completions", {**body, "grammar": 'root ::= "a"',
                                                              "json_schema": {"type": "string"}}), 400, "json_schema")
        error_of(http_req(s, "POST", "/v1/completions", {"prompt": "x", "json_schema": {"type": "string", "pattern": "a"}}),
                 400, "json_schema")
        r = client.chat.completions.create(model=MODEL.name, messages=msgs, max_tokens=4, temperature=0,
                                           response_format={"type": "text"})
        assert r.choices[0].message.content is not None
    finally:
        assert s.stop() == 0, s.err()
