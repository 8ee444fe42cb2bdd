"""The YAML reader of configuration files: safe, bounded, and strict about keys.

It refuses what `yaml.safe_load` would accept silently or could not bound:
duplicate keys, non-string keys, alias cycles, and files too large, too deep or
with too many nodes once aliases are expanded. Plain scalars follow YAML 1.2's
core schema, so a value means what it looks like (`1:30`, `yes` and dates are
strings, `017` is 17). Every refusal is a `ConfigError` naming the file, the
line or key path, and the text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from yaml._yaml import CParser

from langchain_ragbudget.config._data import Shown, dotted
from langchain_ragbudget.config._weak_model import TREE_MODEL_GONE
from langchain_ragbudget.errors import ConfigError

# Bounds for hostile files, far above any real configuration, so any file is
# parsed or refused in a fraction of a second. The node bound counts each alias's
# expansion too ("billion laughs"): validating and copying walk every node.
MAX_CONFIG_BYTES = 256 * 1024
MAX_YAML_DEPTH = 32
MAX_YAML_NODES = 10_000
# A boosted-tree weak-evidence model passes the node bound: it is named, not counted.
_TREE_MODEL = re.compile(r"^\s*kind:\s*trees\s*$", re.MULTILINE)

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_NULL_TAG = "tag:yaml.org,2002:null"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"

# The YAML 1.2 core schema (yaml.org/spec/1.2.2, 10.3.2), with the first characters
# each form can start with (PyYAML looks resolvers up by them).
_CORE_SCHEMA: list[tuple[str, str, str]] = [
    (_NULL_TAG, r"^(?:~|null|Null|NULL|)$", "~nN"),
    (_BOOL_TAG, r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    (_INT_TAG, r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        _FLOAT_TAG,
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+.0123456789",
    ),
]


def read_text(path: Path, file: str) -> str:
    """The file's text: at most MAX_CONFIG_BYTES of UTF-8 (a BOM is allowed)."""
    try:
        with path.open("rb") as stream:  # reads a pipe too, but never unbounded
            raw = stream.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        problem = f"cannot read: {exc.strerror or exc}"
        raise ConfigError(file, "<file>", file, problem) from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            file,
            "<file>",
            Shown(f"more than {MAX_CONFIG_BYTES} bytes"),
            f"too large for a configuration file (limit {MAX_CONFIG_BYTES} bytes)",
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        bad = raw[exc.start : exc.end]
        raise ConfigError(
            file, f"line {line}", bad, f"not UTF-8 text (byte {exc.start})"
        ) from None


class _ConfigLoader(
    yaml.composer.Composer,
    CParser,
    yaml.constructor.SafeConstructor,
    yaml.resolver.Resolver,
):
    """A safe loader: libyaml parses (fast), PyYAML's composer bounds size and nesting.

    libyaml's own composer recurses in C with no bound, so `[[[[...` would end
    in a crash instead of a message.
    """

    def __init__(self, text: str, file: str) -> None:
        CParser.__init__(self, text)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self.file = file
        self.file_text = text
        self.depth = 0
        self.nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        self.nodes += 1
        try:
            if self.nodes > MAX_YAML_NODES:  # refused before composing the rest
                tree_model = _TREE_MODEL.search(self.file_text)
                raise self._refusal(
                    f"more than {MAX_YAML_NODES} YAML nodes (values, lists and "
                    "mappings) in the file"
                    + (f"; it holds {TREE_MODEL_GONE}" if tree_model else "")
                )
            if self.depth > MAX_YAML_DEPTH:
                raise self._refusal(f"nested deeper than {MAX_YAML_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def _refusal(self, problem: str) -> ConfigError:
        """`problem` at the next event's line, showing that line."""
        event: Any = self.peek_event()
        line = event.start_mark.line
        return ConfigError(
            self.file,
            f"line {line + 1}",
            Shown.of(_line_at(self.file_text, line)),
            problem,
        )

    def construct_core_int(self, node: yaml.ScalarNode) -> int:
        """A YAML 1.2 core integer: decimal (`017` is 17), `0o` octal, `0x` hex."""
        text = str(self.construct_scalar(node))
        if text.startswith(("0o", "0x")):
            return int(text[2:], 8 if text[1] == "o" else 16)
        return int(text, 10)


def _core_schema_resolvers() -> dict[Any, list[tuple[str, re.Pattern[str]]]]:
    """SafeLoader's implicit resolvers with YAML 1.1's types swapped for 1.2 core.

    The merge key (`<<`) stays, so a file may share one surface's settings with
    another; what no resolver matches is a string.
    """
    resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {
        first: [(tag, regexp) for tag, regexp in pairs if tag == _MERGE_TAG]
        for first, pairs in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    for tag, pattern, firsts in _CORE_SCHEMA:
        regexp = re.compile(pattern)
        for first in [*firsts, *([""] if tag == _NULL_TAG else [])]:
            resolvers.setdefault(first, []).append((tag, regexp))
    return {first: pairs for first, pairs in resolvers.items() if pairs}


_ConfigLoader.yaml_implicit_resolvers = _core_schema_resolvers()
_ConfigLoader.add_constructor(  # type: ignore[type-var]
    _INT_TAG, _ConfigLoader.construct_core_int
)


def read_yaml(text: str, file: str) -> dict[str, Any]:
    """The top-level mapping of `text` (`{}` for an empty document), checked."""
    loader: _ConfigLoader | None = None
    try:
        loader = _ConfigLoader(text, file)  # the reader refuses control characters
        node = loader.get_single_node()
        if node is None:
            return {}
        _check_nodes(node, loader, file)
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            line: int | None = mark.line
        elif isinstance(exc, yaml.reader.ReaderError):  # libyaml: a byte offset
            line = text.encode("utf-8", "surrogatepass")[: exc.position].count(b"\n")
        else:
            line = None
        where = "<document>" if line is None else f"line {line + 1}"
        value = None if line is None else Shown.of(_line_at(text, line))
        problem = " ".join(str(exc).split()) + _tab_hint(text, mark)
        raise ConfigError(file, where, value, f"invalid YAML: {problem}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if data is None:  # "---" alone, or only `~`
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            file, "<root>", Shown.of(data), "the top level must be a mapping"
        )
    return data


def _tab_hint(text: str, mark: Any) -> str:
    """Why a tab breaks the file, when the parser stopped at one."""
    if mark is None or not 0 <= mark.index < len(text) or text[mark.index] != "\t":
        return ""
    return "; tabs are not allowed in YAML indentation: indent with spaces"


def _line_at(text: str, line: int) -> str:
    """Line `line` (0-based) of `text`, stripped: the value an error shows."""
    lines = text.splitlines()
    return lines[line].strip() if 0 <= line < len(lines) else ""


def _check_nodes(root: yaml.Node, loader: _ConfigLoader, file: str) -> None:
    """Refuse duplicate and non-string keys, alias cycles, and oversized expansions.

    Aliases stay legal; sizes are counted once per node, so checking a bomb
    costs its file size.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    active: set[int] = set()
    # (node, its path as nested (parent, part) pairs, its children once entered)
    stack: list[tuple[yaml.Node, Any, list[tuple[yaml.Node, str]] | None]] = [
        (root, None, None)
    ]
    while stack:
        node, path, children = stack.pop()
        if children is not None:  # leaving: every child is counted
            active.discard(id(node))
            size[id(node)] = 1 + sum(size[id(c)] for c, _ in children)
            depth[id(node)] = 1 + max((depth[id(c)] for c, _ in children), default=0)
            if size[id(node)] > MAX_YAML_NODES or depth[id(node)] > MAX_YAML_DEPTH:
                raise ConfigError(
                    file,
                    dotted(_parts(path)),
                    Shown(f"<{_kind(node)} at line {node.start_mark.line + 1}>"),
                    f"aliases expand to more than {MAX_YAML_NODES} nodes or "
                    f"{MAX_YAML_DEPTH} levels",
                )
            continue
        if id(node) in size:
            continue  # an alias to a node already checked
        if isinstance(node, yaml.ScalarNode):
            size[id(node)] = depth[id(node)] = 1
            continue
        if id(node) in active:
            raise ConfigError(
                file,
                dotted(_parts(path)),
                Shown(f"<alias at line {node.start_mark.line + 1}>"),
                "an alias refers to a node that contains it (a cycle)",
            )
        active.add(id(node))
        if isinstance(node, yaml.MappingNode):
            _check_keys(node, _parts(path), loader, file)
        children = _children(node)  # once per node: entering and leaving share it
        stack.append((node, path, children))
        stack.extend((c, (path, part), None) for c, part in reversed(children))


def _parts(path: Any) -> list[str]:
    parts: list[str] = []
    while path is not None:
        path, part = path
        parts.append(part)
    return parts[::-1]


def _children(node: yaml.Node) -> list[tuple[yaml.Node, str]]:
    if isinstance(node, yaml.MappingNode):
        pairs = []
        for key, value in node.value:
            part = key.value if isinstance(key, yaml.ScalarNode) else "<key>"
            pairs += [(key, part), (value, part)]
        return pairs
    if isinstance(node, yaml.SequenceNode):
        return [(item, str(i)) for i, item in enumerate(node.value)]
    return []


def _check_keys(
    node: yaml.MappingNode, path: list[str], loader: _ConfigLoader, file: str
) -> None:
    first: dict[str, yaml.Node] = {}
    for key, value in node.value:
        line = key.start_mark.line + 1
        if not isinstance(key, yaml.ScalarNode) or key.tag not in (
            _STR_TAG,
            _MERGE_TAG,
        ):
            raise ConfigError(
                file,
                dotted([*path, _key_text(key)]),
                _node_value(key, loader),
                f"line {line}: a key must be a string (YAML reads 1, true, "
                "null and [..] as other types; quote the key)",
            )
        if key.value in first:
            raise ConfigError(
                file,
                dotted([*path, key.value]),
                _node_value(value, loader),
                f"duplicate key: first at line {first[key.value].start_mark.line + 1}, "
                f"again at line {line} (YAML would silently keep the last one)",
            )
        first[key.value] = key


def _key_text(key: yaml.Node) -> str:
    if isinstance(key, yaml.ScalarNode):
        return str(key.value)
    return f"<{_kind(key)} key>"


def _node_value(node: yaml.Node, loader: _ConfigLoader) -> Any:
    """A scalar as YAML reads it; a collection by kind and line, never expanded."""
    if isinstance(node, yaml.ScalarNode):
        return Shown.of(loader.construct_object(node))
    return Shown(f"<{_kind(node)} at line {node.start_mark.line + 1}>")


def _kind(node: yaml.Node) -> str:
    return "mapping" if isinstance(node, yaml.MappingNode) else "sequence"
