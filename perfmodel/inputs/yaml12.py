"""A safe YAML loader for plan files: YAML 1.2's core schema, no duplicate keys, bounded aliases and
depth.

PyYAML implements YAML 1.1, which reads ``yes``/``on`` as true, ``01000`` as octal 512, ``8:32`` as
base 60 and ``0b1000000000`` as binary; YAML 1.2 reads all of them as strings (and so perfmodel
rejects them where a number or a boolean belongs). A repeated key silently wins in PyYAML; here it
is an error. An alias (``*a``) that would expand a document past MAX_NODES values (the "billion
laughs") and nesting deeper than MAX_DEPTH are errors too, found before anything formats the
expanded value.
"""

from __future__ import annotations

import re

import yaml

MAX_DEPTH = 64
MAX_NODES = 100_000


class YamlError(ValueError):
    """A document perfmodel will not read; the message says why and where."""


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalars and duplicate keys refused."""


# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution): only these forms are
# booleans and numbers; anything else is a string
_Loader.yaml_implicit_resolvers = {
    k: [
        (tag, rx)
        for tag, rx in v
        if tag not in (
            "tag:yaml.org,2002:bool",
            "tag:yaml.org,2002:int",
            "tag:yaml.org,2002:float",
            "tag:yaml.org,2002:timestamp",
        )
    ]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def _int(loader, node):
    text = loader.construct_scalar(node)
    if text.startswith(("0o", "0x")):
        return int(text, 8 if text[1] == "o" else 16)
    return int(text)


def _float(loader, node):
    return float(
        loader.construct_scalar(node)
        .replace(".inf", "inf")
        .replace(".Inf", "inf")
        .replace(".INF", "inf")
        .replace(".nan", "nan")
        .replace(".NaN", "nan")
        .replace(".NAN", "nan")
    )


def _mapping(loader, node, deep=False):
    keys = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in keys
        except TypeError:
            raise YamlError(
                f"line {key_node.start_mark.line + 1}: a mapping key must be a plain value"
            ) from None
        if duplicate:
            raise YamlError(
                f"line {key_node.start_mark.line + 1}: key {str(key)[:60]!r} appears twice in one "
                "mapping; keep one"
            )
        keys.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_Loader.add_constructor("tag:yaml.org,2002:int", _int)
_Loader.add_constructor("tag:yaml.org,2002:float", _float)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


class _BundledLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """_Loader's rules (the same resolvers and constructors) over libyaml's parser where PyYAML
    has it: for the files perfmodel ships (configs/), which it reads at every start and whose
    syntax its tests hold; a user's file goes through _Loader, whose errors say more."""


_BundledLoader.yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers
_BundledLoader.yaml_constructors = _Loader.yaml_constructors


class _OmegaConfLoader(yaml.SafeLoader):
    """How OmegaConf reads a config (omegaconf/_utils.py, get_yaml_loader): PyYAML's SafeLoader,
    so YAML 1.1 (off, no, yes are booleans), with floats written without a dot (1e-5) read as
    floats, and a key given twice an error. NeMo reads its recipes through it."""


_OmegaConfLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)
_OmegaConfLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _measure(node, depth: int, memo: dict) -> int:
    """Values the node expands to (aliases counted each time they are used), bounded."""
    if depth > MAX_DEPTH:
        raise YamlError(f"line {node.start_mark.line + 1}: nesting deeper than {MAX_DEPTH} levels")
    key = id(node)
    if key in memo:
        return memo[key]
    if isinstance(node, yaml.MappingNode):
        n = 1 + sum(
            _measure(k, depth + 1, memo) + _measure(v, depth + 1, memo) for k, v in node.value
        )
    elif isinstance(node, yaml.SequenceNode):
        n = 1 + sum(_measure(v, depth + 1, memo) for v in node.value)
    else:
        n = 1
    if n > MAX_NODES:
        raise YamlError(
            f"line {node.start_mark.line + 1}: the document expands to more than {MAX_NODES:,}"
            " values (aliases reused many times?); write the values out"
        )
    memo[key] = n
    return n


def load(text: str, omegaconf: bool = False, bundled: bool = False):
    """Parse one YAML document under the rules above (with ``omegaconf``, as OmegaConf reads it:
    YAML 1.1; ``bundled``: a file perfmodel ships, by libyaml where present); YamlError or
    yaml.YAMLError on bad input."""
    if text.startswith("\ufeff"):
        text = text[1:]  # a UTF-8 byte-order mark is not part of the document
    loader = (
        _OmegaConfLoader(text)
        if omegaconf
        else (_BundledLoader(text) if bundled else _Loader(text))
    )
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _measure(node, 0, {})
        return loader.construct_document(node)
    except RecursionError:
        raise YamlError(
            f"nesting deeper than the parser can follow (limit {MAX_DEPTH} levels)"
        ) from None
    finally:
        loader.dispose()
