"""The YAML reader of configuration files: safe, bounded, and strict about keys.

`read_text` reads at most `MAX_CONFIG_BYTES` of UTF-8; `read_yaml` parses with
PyYAML's safe loader (no Python tags) and refuses what `yaml.safe_load` would accept
silently or could not bound: duplicate keys, keys that are not strings, alias
cycles, nesting deeper than `MAX_YAML_DEPTH` and aliases expanding past
`MAX_YAML_NODES` nodes. Every refusal is a `ConfigError` naming the file, the line
or key path, and the offending text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from langchain_ragbudget._config_data import Shown, dotted
from langchain_ragbudget.errors import ConfigError

# Bounds for hostile files. A real configuration is a few kilobytes, ~150 YAML nodes
# and 5 levels deep; these leave room for long `placeholders` lists and `options`.
MAX_CONFIG_BYTES = 1 << 20
MAX_YAML_DEPTH = 32
MAX_YAML_NODES = 100_000

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"


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


class _ConfigLoader(yaml.SafeLoader):
    """`yaml.safe_load`'s loader (no Python tags) that bounds nesting while composing.

    The composer recurses once per level, so a file of `[[[[...` would otherwise
    end in RecursionError instead of a message.
    """

    def __init__(self, text: str, file: str) -> None:
        super().__init__(text)
        self.file = file
        self.file_text = text
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise ConfigError(
                    self.file,
                    f"line {mark.line + 1}",
                    Shown.of(_line_at(self.file_text, mark.line)),
                    f"nested deeper than {MAX_YAML_DEPTH} levels",
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


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
        elif isinstance(exc, yaml.reader.ReaderError):
            line = text[: exc.position].count("\n")
        else:
            line = None
        where = "<document>" if line is None else f"line {line + 1}"
        value = None if line is None else Shown.of(_line_at(text, line))
        problem = " ".join(str(exc).split())
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


def _line_at(text: str, line: int) -> str:
    """Line `line` (0-based) of `text`, stripped: the value an error shows."""
    lines = text.splitlines()
    return lines[line].strip() if 0 <= line < len(lines) else ""


def _check_nodes(root: yaml.Node, loader: _ConfigLoader, file: str) -> None:
    """Refuse what safe_load would accept silently or could not bound.

    - a duplicate key (safe_load keeps the last value without a word);
    - a key that is not a string (`1:`, `yes:`, `null:`, `[a]:`);
    - an alias cycle (`a: &x [*x]`);
    - aliases that expand past MAX_YAML_NODES nodes or MAX_YAML_DEPTH levels
      ("billion laughs"): PyYAML builds shared objects cheaply, but validating,
      copying or printing them walks every expanded node.

    Aliases themselves stay legal (sharing one surface's settings is a fair use);
    sizes are counted once per node, so checking a bomb costs its file size.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, list[str], bool]] = [(root, [], False)]
    while stack:
        node, path, leaving = stack.pop()
        children = _children(node)
        if leaving:
            active.discard(id(node))
            size[id(node)] = 1 + sum(size[id(c)] for c, _ in children)
            depth[id(node)] = 1 + max((depth[id(c)] for c, _ in children), default=0)
            if size[id(node)] > MAX_YAML_NODES or depth[id(node)] > MAX_YAML_DEPTH:
                raise ConfigError(
                    file,
                    dotted(path),
                    Shown(f"<{_kind(node)} at line {node.start_mark.line + 1}>"),
                    f"aliases expand to more than {MAX_YAML_NODES} nodes or "
                    f"{MAX_YAML_DEPTH} levels",
                )
            continue
        if id(node) in size:
            continue  # an alias to a node already checked
        if id(node) in active:
            raise ConfigError(
                file,
                dotted(path),
                Shown(f"<alias at line {node.start_mark.line + 1}>"),
                "an alias refers to a node that contains it (a cycle)",
            )
        active.add(id(node))
        if isinstance(node, yaml.MappingNode):
            _check_keys(node, path, loader, file)
        stack.append((node, path, True))
        stack.extend((c, [*path, part], False) for c, part in reversed(children))


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
                f"line {line}: a key must be a string (YAML reads 1, yes, no, "
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
