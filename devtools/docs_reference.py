"""The reference pages of the documentation site, generated from the code so they cannot drift.

Three generators, each returning Markdown (``docs/hooks/reference.py`` puts them into
``docs/reference/{config,cli,metrics}.md`` when MkDocs builds the site):

* :func:`config_markdown`: every packaged config group and its options, and every config key
  (walked from :class:`rag_experiments.config.Settings`) with its type, default, the values the
  packaged options set, the allowed values and the check that rejects a bad value. The check is
  found by running it: each key is set to a few bad values of its type and the ``ConfigError``
  that the params dataclass (or ``Settings``) raises is quoted. Allowed values are read off
  those messages ("one of a, b, c").
* :func:`cli_markdown`: every ``rag-exp`` command, nested, and every option, from the argparse
  parser ``rag-exp --help`` prints (:func:`rag_experiments.cli.build_parser`).
* :func:`metrics_markdown`: every metric name a run logs, as families (``recall_at_<k>``,
  ``<metric>.<kind>``, ``embedding.cost_usd``, ...), and the diagnostics a run records beside
  them; :func:`metric_family` says which family a logged name belongs to.

Where the documentation text of a key comes from, first match wins (so it lives next to what
it documents, and a key without any is found by :func:`undocumented_config_keys`):

1. :data:`KEY_NOTES` below, for the few keys that no comment or docstring explains well enough
   (such a note belongs in a comment next to the field: move it there when that file is next edited);
2. the trailing comment of the key in the group's default option (``rag_experiments/conf/``) or
   in ``conf/config.yaml``, or the comment lines right above it;
3. the trailing comment of the field in its params dataclass, or the comment lines right above it;
4. the key's comment in another packaged option (each option's own comment is shown too);
5. the clause of the dataclass docstring that names the field as ````field````.

Commands and options are documented by their argparse ``help``/``description``; metric
families by their entries below. No MkDocs here: importable and testable on its own.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import math
import re
import tokenize
import types
import typing
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Iterable

import rag_experiments

CONF_DIR = Path(rag_experiments.__file__).resolve().parent / "conf"  # the packaged configs

#: keys that no comment or docstring explains well enough
KEY_NOTES: dict[str, str] = {
    "query.max_tokens": "output tokens allowed per LLM request of query.rewrite (at least 16).",
    "embedding.document_prefix": "text put before every document at ingest (e5 / bge on st:<model> or an "
                                 "OpenAI-compatible server: \"passage: \"); query_prefix is its query twin.",
    "retrieval.hnsw.m": "pgvector HNSW build parameter: links per node (higher: better recall, larger index).",
    "retrieval.hnsw.ef_construction": "pgvector HNSW build parameter: candidate list size while building.",
    "retrieval.use_cache": "re-use the legs' cached candidate lists (the candidate_cache table: a sweep point that "
                           "changes only fusion or rerank knobs re-runs no leg SQL); false searches every leg again.",
    "rerank.max_retries": "the reranker SDK's own retries on 429 / 5xx (voyage, cohere).",
    "run_name": "the MLflow run name (default: the command-line overrides, else '<variant> (<chunking>)').",
    "progress": "show progress bars (ingest, embedding, retrieval); false for logs and CI.",
    "retrieval.keyword.fb_docs": "RM3 (retrieval.keyword.rm3=true): top documents of the first BM25 pass that "
                                 "the expansion terms are drawn from.",
    "retrieval.keyword.fb_terms": "RM3: expansion terms added to the query.",
    "retrieval.keyword.original_query_weight": "RM3: weight of the original query against the expansion terms (0..1).",
}

_BAD_STR = "not valid!"


# -- YAML comments --------------------------------------------------------------------------------
@dataclass(frozen=True)
class YamlDoc:
    """One YAML file's comments: its leading comment block, and a comment per key path."""

    header: str
    keys: dict[str, str]
    values: dict[str, Any]
    examples: tuple[str, ...] = ()  # indented comment lines of the header: commands to type


_KEY_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z_][\w\-]*|\([^)]*\))\s*:(?P<rest>.*)$")


def _split_comment(rest: str) -> tuple[str, str]:
    """``value   # comment`` -> (value, comment), a ``#`` inside quotes is part of the value."""
    quote = None
    for i, ch in enumerate(rest):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or rest[i - 1].isspace()):
            return rest[:i].strip(), rest[i + 1:].strip()
    return rest.strip(), ""


def parse_yaml_comments(text: str, prefix: str = "") -> YamlDoc:
    """A small line parser of the packaged config files (block mappings, ``key: value  # text``).
    A key's text is its trailing comment, else the comment lines right above it."""
    import yaml

    header: list[str] = []
    examples: list[str] = []
    keys: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    seen_key = False
    in_bullet = False  # the header's last line is a "* item" (its indented lines continue it)
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            pending = []
            if not seen_key:
                seen_key = bool(header)  # a blank line ends the header block
            continue
        if stripped.startswith("#"):
            raw = stripped[1:]
            body = raw.strip()
            if body.startswith("@package"):
                continue
            if not seen_key:
                indented = len(raw) - len(raw.lstrip()) >= 2
                if indented and header and in_bullet:  # "#   ..." continuing a "# * ..." item
                    header[-1] += " " + body
                elif indented and examples and examples[-1].endswith("\\"):  # a command's next line
                    examples[-1] = examples[-1][:-1].rstrip() + " " + body
                elif indented:  # "#   python run.py ...": an example command
                    examples.append(body)
                else:
                    after_items = in_bullet
                    in_bullet = body.startswith(("* ", "- "))
                    header.append(("\n" if after_items and not in_bullet else "") + body)
            else:
                pending.append(body)
            continue
        m = _KEY_LINE.match(line)
        if not m:
            pending = []
            continue
        seen_key = True
        indent = len(m.group("indent"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([*(k for _, k in stack), m.group("key")])
        stack.append((indent, m.group("key")))
        _, comment = _split_comment(m.group("rest"))
        text_ = comment or " ".join(pending)
        if text_:
            keys[prefix + path] = text_
        pending = []
    try:
        values = _flatten(yaml.safe_load(text) or {}, prefix)
    except yaml.YAMLError:
        values = {}
    # a "* item" of the header starts a line of its own ("\n* "), the rest is one paragraph
    joined = ""
    for line in header:
        item = line.startswith(("* ", "- ", "\n"))
        joined += ("\n" if item else " ") + line.lstrip("\n") if joined else line
    return YamlDoc(joined.strip(), keys, values, tuple(examples))


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, dict) and v:
                out.update(_flatten(v, f"{prefix}{k}."))
            else:
                out[f"{prefix}{k}"] = v
    return out


@dataclass(frozen=True)
class GroupOption:
    group: str  # chunking, hydra/launcher, ...
    name: str  # the option: heading
    path: Path
    doc: YamlDoc


@cache
def group_options(conf_dir: Path = CONF_DIR) -> tuple[GroupOption, ...]:
    """Every packaged ``<group>/<option>.yaml`` (nested groups such as ``hydra/launcher`` too)."""
    out = []
    for path in sorted(conf_dir.rglob("*.yaml")):
        rel = path.relative_to(conf_dir)
        if len(rel.parts) < 2:
            continue
        group = "/".join(rel.parts[:-1])
        prefix = "" if group == "experiment" or group.startswith("hydra") else f"{group}."
        out.append(GroupOption(group, path.stem, path, parse_yaml_comments(path.read_text(), prefix)))
    return tuple(out)


@cache
def primary_config(conf_dir: Path = CONF_DIR) -> YamlDoc:
    return parse_yaml_comments((conf_dir / "config.yaml").read_text())


@cache
def default_options(conf_dir: Path = CONF_DIR) -> dict[str, str]:
    """group -> the option conf/config.yaml's defaults list chooses."""
    import yaml

    defaults = yaml.safe_load((conf_dir / "config.yaml").read_text()).get("defaults", [])
    return {k: v for d in defaults if isinstance(d, dict) for k, v in d.items() if isinstance(v, str)}


# -- dataclass comments ---------------------------------------------------------------------------
@cache
def _class_comments(cls: type) -> dict[str, str]:
    """field -> its trailing comment in the class source, else the comment lines right above it."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    source = inspect.cleandoc("\n" + source) if source.startswith((" ", "\t")) else source
    comments: dict[int, str] = {}
    code_lines: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok.string.lstrip("#").strip()
            elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                                  tokenize.ENDMARKER):
                code_lines.update(range(tok.start[0], tok.end[0] + 1))
    except (tokenize.TokenError, IndentationError):
        return {}
    lines = source.splitlines()
    out: dict[str, str] = {}
    field_line = re.compile(r"^    (\w+)\s*:")
    for i, line in enumerate(lines, 1):
        m = field_line.match(line)
        if not m or m.group(1) in out:
            continue
        text = comments.get(i, "")
        if not text:
            above, j = [], i - 1
            while j >= 1 and j in comments and j not in code_lines:
                above.insert(0, comments[j])
                j -= 1
            text = " ".join(above)
        if text and not text.startswith(("noqa", "type:")):
            out[m.group(1)] = re.sub(r"\s*noqa.*$", "", text)
    return out


def _roles(text: str) -> str:
    """Sphinx roles and double backticks as plain Markdown code: :class:`X` -> `X`."""
    text = re.sub(r":\w+:`~?\.?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _clauses(sentence: str) -> list[str]:
    """A sentence cut at "; " outside parentheses."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(sentence):
        depth += ch == "("
        depth -= ch == ")"
        if ch == ";" and depth == 0:
            out.append(sentence[start:i].strip())
            start = i + 1
    out.append(sentence[start:].strip())
    return [c for c in out if c]


def _docstring_sentence(cls: type, name: str) -> str:
    """The clause of the docstring of the class declaring ``name`` that names it as ````name````."""
    owner = next((k for k in cls.__mro__ if name in k.__dict__.get("__annotations__", {})), cls)
    doc = inspect.getdoc(owner) or ""
    if f"``{name}``" not in doc:
        return ""
    text = " ".join(doc.split())
    for sentence in re.split(r"(?<=\.)\s+(?=``|[A-Z])", text):
        for clause in _clauses(sentence):
            if f"``{name}``" in clause:
                return _roles(clause).rstrip(".") + "."
    return ""


# -- config keys ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigKey:
    path: str  # fusion.rrf_k
    group: str  # fusion ('' for top-level keys)
    type: str
    default: Any
    owner: type  # the dataclass that declares it
    doc: str
    doc_source: str  # yaml:<file> | dataclass | docstring | notes | ''
    option_values: tuple[tuple[str, Any], ...]  # (option, value) where a packaged option sets it
    rejections: tuple[tuple[Any, str], ...]  # (bad value, the error it raises)
    allowed: tuple[str, ...]
    free_mapping: bool = False
    option_docs: tuple[tuple[str, str], ...] = ()  # (option, its YAML comment) where it says more


def _annotation(cls: type, name: str) -> str:
    for klass in cls.__mro__:
        ann = klass.__dict__.get("__annotations__", {})
        if name in ann:
            a = ann[name]
            return a if isinstance(a, str) else getattr(a, "__name__", str(a))
    return "?"


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _walk(cls: type, prefix: str) -> Iterable[tuple[str, type, dataclasses.Field, Any]]:
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("omegaconf_ignore"):
            continue
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            yield from _walk(hint, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", cls, f, hint


def _yaml_docs(path: str) -> tuple[list[tuple[str, str]], int]:
    """(text, file) of each packaged YAML comment on ``path``: the group's default option first,
    then conf/config.yaml, then the other options."""
    group = path.split(".", 1)[0]
    default = default_options().get(group)
    found = []
    for opt in sorted(group_options(), key=lambda o: (o.name != default, o.name)):
        if opt.group == group and opt.doc.keys.get(path):
            found.append((opt.doc.keys[path], f"conf/{opt.group}/{opt.name}.yaml", opt.name == default))
    text = primary_config().keys.get(path)
    if text:
        found.insert(sum(1 for f in found if f[2]), (text, "conf/config.yaml", True))
    return [(t, f) for t, f, _ in found], sum(1 for f in found if f[2])


def _field_comment(cls: type, name: str) -> str:
    for klass in cls.__mro__:
        if dataclasses.is_dataclass(klass) and name in klass.__dict__.get("__annotations__", {}):
            return _roles(_class_comments(klass).get(name, ""))
    return ""


def key_documentation(path: str, owner: type, name: str) -> tuple[str, str, dict[str, str]]:
    """(text, where it comes from, {option: its own comment}) for one config key; first match:
    the default option's YAML comment (or conf/config.yaml's), the dataclass field's comment,
    another option's YAML comment, the docstring clause naming it (:data:`KEY_NOTES` before all)."""
    yaml_docs, n_default = _yaml_docs(path)
    per_option = {Path(f).stem: t for t, f in yaml_docs}
    if path in KEY_NOTES:
        text, source = KEY_NOTES[path], "notes"
    elif n_default:
        text, source = yaml_docs[0]
    elif text := _field_comment(owner, name):
        source = "dataclass"
        clause = _docstring_sentence(owner, name)
        if clause and len(text) < 25:  # "Anserini's defaults": the docstring says what it is
            text = f"{clause.rstrip('.')} ({text})."
    elif yaml_docs:
        text, source = yaml_docs[0]
    elif text := _docstring_sentence(owner, name):
        source = "docstring"
    else:
        text, source = "", ""
    return text, source, {o: t for o, t in per_option.items() if t != text}


def _probe_values(hint: Any) -> list[Any]:
    """Bad values of the key's type to run its checks on (a wrong type is OmegaConf's to reject)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) and args else hint
    if base is bool:
        return []
    if base is int:
        return [0, -1, 1, 100_000]
    if base is float:
        return [-1.0, 0.0, 1.5, 100_000.0, math.nan]
    if base is str:
        return [_BAD_STR]
    o = typing.get_origin(base)
    if o is tuple:
        inner = typing.get_args(base)[0] if typing.get_args(base) else str
        if inner is int:
            return [(), (0,)]
        if inner is float:
            return [(1.0,), (-1.0, 1.0)]
        return []
    if o is dict or base is dict:
        return [{"not an identifier": 1}]
    return []


def _settings_with(path: str, value: Any):
    """Build ``Settings`` with ``path`` set to ``value`` (every other key at its default)."""
    from rag_experiments.config import Settings

    parts = path.split(".")

    def rebuild(obj, rest):
        if len(rest) == 1:
            return dataclasses.replace(obj, **{rest[0]: value})
        return dataclasses.replace(obj, **{rest[0]: rebuild(getattr(obj, rest[0]), rest[1:])})

    if len(parts) == 1:
        return Settings(**{parts[0]: value})
    group = parts[0]
    default_group = {f.name: _default(f) for f in dataclasses.fields(Settings)}[group]
    return Settings(**{group: rebuild(default_group, parts[1:])})


def rejections(path: str, hint: Any, default: Any) -> list[tuple[Any, str]]:
    """(bad value, ConfigError message) for each probe of ``path`` that the checks reject, one per
    distinct message (the value itself masked)."""
    from rag_experiments.errors import ConfigError

    out, seen = [], set()
    for value in _probe_values(hint):
        if value == default:
            continue
        try:
            _settings_with(path, value)
        except ConfigError as exc:
            message = exc.message
            shape = message.replace(repr(value), "<v>") if isinstance(value, str) else message
            shape = re.sub(r"-?\d+(\.\d+)?(e[+-]?\d+)?|nan|\(\)|\[\]", "<n>", shape)
            if shape not in seen:
                seen.add(shape)
                out.append((value, message))
        except Exception:  # noqa: BLE001 - a probe the type cannot take (checked by OmegaConf instead)
            continue
    return out


_ONE_OF = re.compile(r"(?:one of|choose one of|use one of)\s+(?P<list>[^;()]+?)(?:,?\s+got\b|\s*\(|;|$)")
_EITHER = re.compile(r"must be '(?P<a>[^']+)' or '(?P<b>[^']+)'")


def allowed_values(messages: Iterable[str]) -> tuple[str, ...]:
    for message in messages:
        m = _EITHER.search(message)
        if m:
            return (m.group("a"), m.group("b"))
        m = _ONE_OF.search(message)
        if m:
            return tuple(v.strip().strip("'") for v in m.group("list").split(",") if v.strip())
    return ()


@cache
def config_keys() -> tuple[ConfigKey, ...]:
    """Every key of the config tree, in the order of :class:`~rag_experiments.config.Settings`."""
    from rag_experiments.config import FREE_MAPPINGS, Settings

    out = []
    for path, owner, f, hint in _walk(Settings, ""):
        group = path.split(".", 1)[0] if "." in path else ""
        default = _default(f)
        text, source, option_docs = key_documentation(path, owner, f.name)
        values = tuple((o.name, o.doc.values[path]) for o in group_options()
                       if o.group == group and path in o.doc.values)
        rej = tuple(rejections(path, hint, default))
        out.append(ConfigKey(path, group, _annotation(owner, f.name), default, owner, text, source, values, rej,
                             allowed_values(m for _, m in rej),
                             free_mapping=any(p.startswith(path + ".") for p in FREE_MAPPINGS),
                             option_docs=tuple(option_docs.items())))
    return tuple(out)


def value_texts(path: str) -> dict[str, str]:
    """What each allowed value of a key means, from the key's registry (``fusion.method``)."""
    if path == "fusion.method":
        from rag_experiments.retrieval.fusion_methods import registry

        return {name: m.summary for name, m in registry().items()}
    if path == "retrieval.variant":
        from rag_experiments.retrieval.systems import registry as systems

        return {name: s.summary for name, s in systems().items()}
    return {}


def undocumented_config_keys() -> list[str]:
    return [k.path for k in config_keys() if not k.doc.strip()]


def undocumented_group_options() -> list[str]:
    return [f"{o.group}/{o.name}" for o in group_options() if not o.doc.header.strip()]


def _yaml_value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, tuple):
        return "[" + ", ".join(_yaml_value(x) for x in v) + "]"
    if isinstance(v, list):
        return "[" + ", ".join(_yaml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_yaml_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, str):
        return '""' if v == "" else v
    return str(v)


def _code(text: str) -> str:
    """A Markdown code span (outside tables: a ``|`` in it needs no escape)."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _cell_code(text: str) -> str:
    """A code span inside a table cell. A ``|`` in it would end the cell on GitHub, and ``\\|``
    shows as a backslash on the site (Python-Markdown), so such a span is written as HTML with
    the pipe as ``&#124;``: both render ``|``."""
    text = str(text)
    if "|" not in text:
        return _code(text)
    import html

    return "<code>" + html.escape(text, quote=False).replace("|", "&#124;") + "</code>"


def _name_cell(text: str) -> str:
    """An option's name in its group's table as code that never wraps:
    the site's theme breaks code anywhere when a column is squeezed (``chunking_sw`` / ``eep``
    beside a long description). GitHub drops the style and does not break the name either."""
    import html

    return ('<code style="white-space: nowrap">' + html.escape(str(text), quote=False).replace("|", "&#124;")
            + "</code>")


def _plain(text: str) -> str:
    """Text outside code spans: no HTML, and ``*`` kept literal (a glob such as ``*.all.*`` is not
    emphasis, on the site or on GitHub)."""
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")


def _md(text: str) -> str:
    """Plain text for a Markdown paragraph: no HTML outside code spans."""
    parts = re.split(r"(`[^`]*`)", str(text))
    return "".join(p if p.startswith("`") else _plain(p) for p in parts)


def _cell(text: str) -> str:
    """Plain text for a table cell: no HTML outside code spans, no table breaks, one line
    (a line break of the text is ``<br>``)."""
    parts = re.split(r"(`[^`]*`)", str(text))
    out = "".join(_cell_code(p.strip("`")) if p.startswith("`") and "|" in p
                  else p if p.startswith("`")
                  else _plain(p).replace("|", "\\|") for p in parts)
    return out.replace("\n", "<br>")


def _prose(text: str) -> list[str]:
    """An argparse description or epilog (RawDescriptionHelpFormatter text) as Markdown lines: its
    indented lines (usage examples, commands to type) a ``text`` block each run of them, the
    rest paragraphs, so examples keep their lines and a ``>>`` stays ``>>``."""
    out: list[str] = []
    para: list[str] = []
    code: list[str] = []

    def flush() -> None:
        if para:
            out.extend([_md(" ".join(para)), ""])
            para.clear()
        if code:
            import textwrap

            out.extend(["```text", *textwrap.dedent("\n".join(code)).splitlines(), "```", ""])
            code.clear()

    for line in str(text).splitlines():
        if not line.strip():
            if code:  # a blank line inside the examples keeps them one block
                code.append("")
                continue
            flush()
        elif line.startswith(("  ", "\t")):
            if para:
                flush()
            code.append(line.rstrip())
        else:
            if code:
                while code and not code[-1]:
                    code.pop()
                flush()
            para.append(line.strip())
    while code and not code[-1]:
        code.pop()
    flush()
    return out


def _anchor(heading: str) -> str:
    """The id a heading gets, both on the site (Python-Markdown's toc slugify) and on GitHub, for
    the headings written here (ASCII, no repeated hyphens): ``rag-exp golden add`` ->
    ``rag-exp-golden-add``, ``fusion.rrf_k`` -> ``fusionrrf_k``."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def config_markdown() -> str:
    from rag_experiments.config import Settings

    keys = config_keys()
    options = group_options()
    lines: list[str] = []
    lines += ["## Config groups and their options", "",
              "Choose an option with `group=option` (`python run.py retrieval=vector`); sweep several "
              "with `-m group=a,b`. A project's own `conf/` (what `rag-exp init` writes) can add options.", ""]
    defaults = default_options()
    groups = list(dict.fromkeys(o.group for o in options))
    lines += ["Groups: " + ", ".join(f"[{_code(g)}](#{_anchor(g + ' options')})" for g in groups) + ".", ""]
    for group in groups:
        lines += [f"### `{group}` options", "", "| option | what it is |", "| --- | --- |"]
        for o in (o for o in options if o.group == group):
            mark = " (default)" if defaults.get(group) == o.name else ""
            examples = "".join(f"<br>{_cell_code(e)}" for e in o.doc.examples)
            lines.append(f"| {_name_cell(o.name)}{mark} | {_cell(o.doc.header)}{examples} |")
        lines.append("")
    lines += ["## Every key", "",
              "Every key below is a field of a frozen params dataclass (the tree is "
              "`rag_experiments.config.Settings`). OmegaConf rejects a value of the wrong type when the "
              "config is composed, an unknown key is an error naming the closest known one, and the "
              "check listed under a key is the one its dataclass runs (quoted from the code by setting "
              "the key to a bad value).", ""]
    top_doc = {f.name: f for f in dataclasses.fields(Settings)}
    key_groups = list(dict.fromkeys(k.group for k in keys))

    def title(group: str) -> str:
        return f"{_code(group)} keys" if group else "top-level keys"

    # a table of contents per group: every key one click away
    lines += ["| group | its keys |", "| --- | --- |"]
    for group in key_groups:
        links = ", ".join(f"[{_cell_code(k.path.removeprefix(group + '.'))}](#{_anchor(k.path)})"
                          for k in keys if k.group == group)
        lines.append(f"| [{_cell_code(group) if group else 'top level'}](#{_anchor(title(group))}) | {links} |")
    lines.append("")
    for group in key_groups:
        lines += [f"### {title(group)}", ""]
        if group and group in top_doc:
            owner_hint = typing.get_type_hints(Settings)[group]
            summary = (inspect.getdoc(owner_hint) or "").split("\n\n")[0]
            if summary and not summary.startswith(owner_hint.__name__ + "("):
                lines += [_md(_roles(" ".join(summary.split()))), ""]
        for k in (k for k in keys if k.group == group):
            lines += [f"#### {_code(k.path)}", "", _md(k.doc) or "(undocumented)", ""]
            lines.append(f"- type: {_code(k.type)}; default: {_code(_yaml_value(k.default))}")
            if k.free_mapping:
                lines.append("- a free mapping: any key below it is accepted (a team's own knobs)")
            if k.option_values:
                notes = dict(k.option_docs)
                vals = ", ".join(f"{_code(o)}: {_code(_yaml_value(v))}" + (f" ({_md(notes[o])})" if o in notes else "")
                                 for o, v in k.option_values)
                lines.append(f"- set by the packaged options: {vals}")
            if k.allowed:
                lines.append(f"- allowed values: {', '.join(_code(a) for a in k.allowed)}")
            for value, text in value_texts(k.path).items():
                lines.append(f"  - {_code(value)}: {_md(text)}")
            for value, message in k.rejections:
                lines.append(f"- rejected: {_code(_yaml_value(value))} → {_md(message)}")
            if not k.rejections and not k.allowed:
                lines.append("- checked: its type only")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# -- commands -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CommandDoc:
    name: str  # "rag-exp golden add"
    help: str  # the one line in the parent's list
    description: str
    usage: str
    options: tuple[tuple[str, str, Any, Any], ...]  # (flags, help, default, choices)
    subcommands: tuple[str, ...]
    epilog: str = ""


def _commands(parser, name: str, help_: str = "") -> list[CommandDoc]:
    import argparse

    formatter = parser._get_formatter()
    opts, subs, children = [], [], []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            done = set()
            for sub_name, sub in action.choices.items():
                if id(sub) in done:
                    continue
                done.add(id(sub))
                subs.append(sub_name)
                children += _commands(sub, f"{name} {sub_name}", helps.get(sub_name, ""))
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            flags = ", ".join(action.option_strings)
            if action.nargs != 0:
                flags += " " + formatter._format_args(action, action.dest.upper())
        else:
            flags = action.metavar if isinstance(action.metavar, str) else action.dest
        text = formatter._expand_help(action) if action.help else ""
        positional_default = action.nargs in ("?", "*")
        default = (None if action.default in (None, argparse.SUPPRESS, [])
                   or (not action.option_strings and not positional_default) else action.default)
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            default = None
        if action.required and action.option_strings:
            default = "(required)"
        opts.append((flags, text, default, action.choices))
    usage = " ".join(parser.format_usage().split())
    usage = usage.removeprefix("usage: ")
    me = CommandDoc(name, help_, parser.description or "", usage, tuple(opts), tuple(subs), parser.epilog or "")
    return [me, *children]


def commands() -> list[CommandDoc]:
    from rag_experiments.cli import build_parser

    return _commands(build_parser(), "rag-exp")


def undocumented_commands() -> list[str]:
    """Commands without help or description, options without help (``name: option``)."""
    out = []
    for c in commands():
        if c.name != "rag-exp" and not (c.help.strip() or c.description.strip()):
            out.append(c.name)
        out += [f"{c.name}: {flags}" for flags, text, _, _ in c.options if not text.strip()]
    return out


def cli_markdown() -> str:
    lines: list[str] = []
    cmds = commands()
    root = cmds[0]
    lines += ["## Commands", "", "| command | what it does |", "| --- | --- |"]
    for c in cmds[1:]:
        lines.append(f"| [{_cell_code(c.name)}](#{_anchor(c.name)}) | {_cell(c.help or c.description.split('. ')[0])} |")
    lines.append("")
    for c in cmds:
        depth = "##" if c is root else "###"
        lines += [f"{depth} {_code(c.name)}", ""]
        if c.help and c.help != c.description:
            lines += [_md(c.help[0].upper() + c.help[1:]) + ("" if c.help.endswith(".") else "."), ""]
        if c.description:
            lines += _prose(c.description)
        lines += ["```text", c.usage, "```", ""]
        if c.epilog:
            lines += _prose(c.epilog)
        if c.subcommands:
            lines += ["Subcommands: " + ", ".join(f"[{_code(s)}](#{_anchor(c.name + ' ' + s)})"
                                                  for s in c.subcommands) + ".", ""]
        if c.options:
            lines += ["| option | what it does | default | choices |", "| --- | --- | --- | --- |"]
            for flags, text, default, choices in c.options:
                d = ("required" if default == "(required)" else
                     _cell_code(_yaml_value(list(default) if isinstance(default, tuple) else default))
                     if default is not None else "")
                ch = ", ".join(_cell_code(str(x)) for x in choices) if choices else ""
                lines.append(f"| {_cell_code(flags)} | {_cell(text)} | {d} | {ch} |")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# -- metrics --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetricFamily:
    pattern: str  # as shown: recall_at_<k>
    regex: str  # matches the logged names
    text: str
    where: str = "metric"  # metric | sweep parent | history run | diagnostics.json | tag


#: the other names a run logs beside the quality measures (each one's meaning)
RESULT_TEXT = {
    "n_cases": "golden cases scored (cases whose relevant evidence is all stale, and failed queries, are not).",
    "latency_ms_p50": "median time to answer one query (ms), the retriever's own latency.",
    "latency_ms_p95": "95th percentile of the per-query latency (ms).",
}


def metric_families() -> list[MetricFamily]:
    from rag_experiments.evaluation.measures import REGISTRY
    from rag_experiments.evaluation.metric_key import MEASURES
    from rag_experiments.retrieval.placement import METHODS
    from rag_experiments.retrieval.retriever import CacheStats
    from rag_experiments.tracking.run_record import RESULT_EXTRAS

    cache_counters = [f.name for f in dataclasses.fields(CacheStats)]
    fam: list[MetricFamily] = []
    measure = "(?:" + "|".join(MEASURES) + ")(?:_at_\\d+)?"
    for m in REGISTRY.values():
        cut = m.cutoff is not None
        fam.append(MetricFamily(f"{m.name}" + ("_at_<k>" if cut else ""), m.name + (r"_at_\d+" if cut else ""),
                                m.description))
    fam += [
        MetricFamily("<measure>.<kind>", rf"{measure}\.(?!doc_type\.)(?!ci_)[^.]+",
                     "the measure on the cases of one query kind of the golden set (exact, paraphrase, ...)."),
        MetricFamily("<measure>.doc_type.<doc_type>", rf"{measure}\.doc_type\.[^.]+",
                     "the measure on the cases whose evidence is in documents of one type."),
        MetricFamily("<objective>.ci_low, <objective>.ci_high", rf"{measure}(?:\.doc_type\.[^.]+|\.[^.]+)?\.ci_(?:low|high)",
                     "the 95% bootstrap interval (`eval.bootstrap_samples` resamples of the cases, seed "
                     "`eval.seed`) of the objective; of every measure and segment with "
                     "`tracking.log_intervals=true` (always in the intervals.json artifact)."),
        MetricFamily("judge_corrected_<measure>, judge_corrected_<measure>.ci_low, judge_corrected_<measure>.ci_high",
                     rf"judge_corrected_{measure}(?:\.ci_(?:low|high))?",
                     "the headline measure corrected for the machine judges' errors by people's verdicts on every "
                     "machine-judged pair of a random sample of cases (`rag-exp golden spotcheck --cases N`, from 30 "
                     "cases), with its 95% interval (prediction-powered inference over cases); logged only when such "
                     "a sample exists; the sampled cases' values under people's labels are in judge_corrected.json."),
        MetricFamily("judge_corrected.cases", r"judge_corrected\.cases",
                     "the people-checked cases of that sample the run scored."),
        MetricFamily("ipw_recall_at_<k>, ipw_recall_at_<k>.ci_low, ipw_recall_at_<k>.ci_high, ipw_recall_at_<k>.se",
                     r"ipw_recall_at_\d+(?:\.ci_(?:low|high)|\.se)?",
                     "labels drawn by `rag-exp golden label --sample N` / `--budget USD`: recall@k as it would be "
                     "with the whole pool judged, estimated from the sample (whole cases: difference estimator; "
                     "pairs: inverse-probability weighting), with its 95% label-sampling interval; logged only "
                     "when judgements carry a sampling design."),
        MetricFamily("ipw.sampled_units, ipw.population", r"ipw\.(?:sampled_units|population)",
                     "that sample's drawn units (cases, or pairs) and the population they were drawn from; with a "
                     "whole-case sample, each case's part of the estimate is in sampled_labels.json, from which "
                     "compare, promote and the gate pair two runs on the same sample."),
    ]
    for name in RESULT_EXTRAS:
        fam.append(MetricFamily(name, re.escape(name), RESULT_TEXT.get(name, "")))
    fam += [
        MetricFamily("retrieval.failed_queries", r"retrieval\.failed_queries",
                     "queries whose retrieval failed (an API error of that query): excluded from the measures, "
                     "never scored as misses; listed in retrieval_failures.json."),
        MetricFamily("golden.unanswered_queries", r"golden\.unanswered_queries",
                     "production queries recorded without evidence (`rag-exp golden import-queries`) that no "
                     "label has found a relevant passage for yet: kept, not scored, listed in golden_excluded.json "
                     "(logged only when there are some)."),
        MetricFamily("retrieval.harness_ms_per_query", r"retrieval\.harness_ms_per_query",
                     "a team's system (retrieval=external/http/stored): the time this tool spent per query "
                     "around the system's own call (placing passages, caching)."),
        MetricFamily("alignment.<method>", r"alignment\.(?:" + "|".join((*METHODS, "duplicate")) + ")",
                     "a team's system: how many returned passages were placed in the corpus by each method ("
                     + ", ".join(METHODS) + ", duplicate); failed ones are not scored, a duplicate keeps its rank and earns nothing."),
        MetricFamily("alignment.missing_queries", r"alignment\.missing_queries",
                     "retrieval=stored: golden cases the run file has no ranked list for (scored 0, as trec_eval)."),
        MetricFamily("external.latency_ms_max, external.live_latency_ms_p50/p95/max, external.latency_cached_queries",
                     r"external\.(?:latency_ms_max|live_latency_ms_(?:p50|p95|max)|latency_cached_queries)",
                     "a team's system: the slowest query's latency (every query; a cached answer's is the time it "
                     "took when it was asked), the percentiles and maximum over the queries asked live this run, "
                     "and how many queries' latencies are cached ones."),
        MetricFamily("external.cache_check.<sampled|compared|asks|seconds>",
                     r"external\.cache_check\.(?:sampled|compared|asks|seconds)",
                     "a team's system with an answer cache: the live re-ask of a sample before the run "
                     "(retrieval.external.verify): queries sampled, of them with a cached answer to compare, live "
                     "asks made and their seconds (tags external.cache_check, external.nondeterministic)."),
        MetricFamily("embedding.tokens, embedding.requests, embedding.texts_sent",
                     r"embedding\.(?:tokens|requests|texts_sent)",
                     "a paid embedding API (embedding=voyage/openai): what the provider reported for this run."),
        MetricFamily("embedding.cost_usd", r"embedding\.cost_usd",
                     "the embedding cost of this run in USD (list price or `embedding.price_per_mtok`)."),
        MetricFamily("embedding.estimated_tokens, embedding.estimated_cost_usd",
                     r"embedding\.estimated_(?:tokens|cost_usd)",
                     "the estimate shown before paying to embed (the confirmation of `embedding.confirm`)."),
        MetricFamily("rerank.requests, rerank.input_tokens, rerank.output_tokens, rerank.tokens, rerank.search_units",
                     r"rerank\.(?:requests|input_tokens|output_tokens|tokens|search_units)",
                     "a paid reranker (rerank=llm/voyage/cohere): requests and the billed units (tokens, or "
                     "Cohere's searches)."),
        MetricFamily("rerank.malformed", r"rerank\.malformed",
                     "rerank=llm: answers that could not be read as scores (those candidates keep score 0)."),
        MetricFamily("rerank.cost_usd", r"rerank\.cost_usd", "the reranking cost of this run in USD."),
        MetricFamily("rewrite.requests, rewrite.cached, rewrite.input_tokens, rewrite.output_tokens",
                     r"rewrite\.(?:requests|cached|input_tokens|output_tokens)",
                     "query.rewrite: LLM requests made and answered from the cache, and their tokens."),
        MetricFamily("rewrite.cost_usd, rewrite.estimated_cost_usd", r"rewrite\.(?:estimated_)?cost_usd",
                     "query.rewrite: its cost in USD, and the estimate shown before paying."),
        MetricFamily("<objective>, <objective>.<segment>", rf"{measure}(?:\.doc_type\.[^.]+|\.[^.]+)?",
                     "a sweep's parent run: the best child's headline metrics and objective, on each segment too "
                     "(all from that one child, tagged sweep.best=true).", "sweep parent"),
        MetricFamily("optuna.best_value", r"optuna\.best_value",
                     "a sweep with hydra/sweeper=optuna: the study's best objective value.", "sweep parent"),
        MetricFamily("history.<metric>, history.<metric>.chained", r"history\..+",
                     "`rag-exp history`: the metric of each nightly gate run and promotion over time, as logged on "
                     "its own golden version, and chained: moved only by the deltas on the cases both neighbours "
                     "share, so a growing golden set does not bend the series.", "history run"),
        MetricFamily("time_s.<stage>", r"time_s\.\w+",
                     "seconds per stage of the run (load, db_connect, model_load, ingest, retrieval, evaluate, "
                     "ann_recall, total); time.total_s is also a tag.", "diagnostics.json"),
        MetricFamily("cache.<counter>", r"cache\.\w+",
                     "what the run computed and what it re-used (" + ", ".join(cache_counters) + "): a sweep point "
                     "that changes only fusion or rerank knobs computes no leg list.", "diagnostics.json"),
        MetricFamily("golden.anchors.<state>", r"golden\.anchors\.\w+",
                     "the relevant evidence spans by anchor status: ok (as labelled), moved, fuzzy (re-anchored "
                     "after corpus edits), stale (gone); golden.stale_spans is a tag when some are stale.",
                     "diagnostics.json"),
        MetricFamily("golden.drift.<state>", r"golden\.drift\.\w+",
                     "corpus drift since the spans were labelled: spans, unchanged, in_place (document changed, "
                     "passage still at its offsets), pending (needs `rag-exp golden reanchor`), pending_removed, "
                     "pending_cases, anchored, stale.", "diagnostics.json"),
        MetricFamily("golden.excluded_all_stale", r"golden\.excluded_all_stale",
                     "cases excluded because all their relevant evidence is stale (listed in golden_excluded.json).",
                     "diagnostics.json"),
        MetricFamily("golden.quality.*", r"golden\.quality(?:\..+)?",
                     "is the golden set any good: cases by kind and doc type, question/passage overlap by kind, "
                     "near duplicates, cases per document, warnings (`rag-exp golden stats` prints it).",
                     "diagnostics.json"),
        MetricFamily("ann_recall_at_depth", r"ann_recall_at_depth",
                     "the vector leg's HNSW result against exact KNN at the candidate depth (`eval.ann_recall_queries` "
                     "queries, 0 skips it): how much recall the approximate index loses. Also a tag.",
                     "diagnostics.json"),
    ]
    return fam


def metric_family(name: str, where: Iterable[str] = ("metric",)) -> MetricFamily | None:
    """The documented family a logged name belongs to (None: undocumented)."""
    wanted = set(where)
    for fam in metric_families():
        if fam.where in wanted and re.fullmatch(fam.regex, name):
            return fam
    return None


def flatten_diagnostics(diag: dict) -> list[str]:
    """diagnostics.json as dotted names (``time_s.total``, ``golden.anchors.exact``)."""
    out = []
    for key, value in diag.items():
        if isinstance(value, dict) and value:
            out += [f"{key}.{k}" for k in flatten_diagnostics(value)]
        else:
            out.append(key)
    return out


def metrics_markdown() -> str:
    from rag_experiments.evaluation.evaluate import EvalParams

    from rag_experiments.evaluation.measures import REGISTRY
    from rag_experiments.evaluation.metric_key import MetricKey

    names = EvalParams().metric_names()
    example = ", ".join(_code(n) for n in names if not REGISTRY[MetricKey.parse(n).metric].groups_only)
    grouped = ", ".join(_code(n) for n in names if REGISTRY[MetricKey.parse(n).metric].groups_only)
    lines = ["With the default `eval` settings a run logs " + example + ", each also per query kind and per "
             "document type, plus the objective's interval and the extras below"
             + (f" ({grouped} too when the golden set has a case with several evidence groups)." if grouped else "."),
             ""]
    titles = {"metric": "Metrics of a run", "sweep parent": "Metrics of a sweep's parent run",
              "history run": "Metrics of a history run", "diagnostics.json": "Diagnostics (diagnostics.json, not metrics)"}
    fams = metric_families()
    for where, title in titles.items():
        lines += [f"## {title}", "", "| name | what it is |", "| --- | --- |"]
        for f in (f for f in fams if f.where == where):
            names = ", ".join(_cell_code(p.strip()) for p in f.pattern.split(", "))
            lines.append(f"| {names} | {_cell(f.text)} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


GENERATORS = {"config": config_markdown, "cli": cli_markdown, "metrics": metrics_markdown}


def render(name: str) -> str:
    """The generated Markdown of one reference page (config, cli, metrics)."""
    return GENERATORS[name]()


#: the committed pages, each holding its generated part between these markers (so the page reads
#: on GitHub too); the site's hook (docs/hooks/reference.py) puts a fresh rendering there
PAGES = {"config": "docs/reference/config.md", "cli": "docs/reference/cli.md", "metrics": "docs/reference/metrics.md"}
REGION = re.compile(r"<!--\s*generated:\s*(?P<name>[\w-]+)\s*-->\n?(?:(?P<body>.*?)<!--\s*end generated:\s*(?P=name)\s*-->\n?)?",
                    re.DOTALL)


def fill(markdown: str, markers: bool = True, where: str = "") -> str:
    """``markdown`` with each generated region (or a bare ``<!-- generated: NAME -->``) holding a
    fresh rendering; ``markers=False`` drops the markers (the site's HTML has no comments)."""

    def one(m: re.Match) -> str:
        name = m.group("name")
        if name not in GENERATORS:
            raise KeyError(f"{where or 'page'}: no generator {name!r} (known: {', '.join(GENERATORS)})")
        body = render(name)
        if not markers:
            return body
        return (f"<!-- generated: {name} -->\n<!-- (written by python -m devtools.docs_reference --write:"
                f" do not edit by hand) -->\n\n{body}\n<!-- end generated: {name} -->\n")

    return REGION.sub(one, markdown)


def stale_pages(root: Path | None = None) -> list[str]:
    """The committed reference pages whose generated part differs from the code's rendering."""
    root = root or Path(__file__).resolve().parents[1]
    return [rel for rel in PAGES.values() if fill((root / rel).read_text(), where=rel) != (root / rel).read_text()]


def main(argv: list[str] | None = None) -> int:
    """``python -m devtools.docs_reference --write`` regenerates the committed reference
    pages; ``--check`` exits 1 naming the ones that drifted from the code."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m devtools.docs_reference", description=main.__doc__)
    ap.add_argument("--write", action="store_true", help="regenerate docs/reference/{config,cli,metrics}.md")
    ap.add_argument("--check", action="store_true", help="exit 1 when a committed page differs from the code")
    args = ap.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    if args.write:
        for rel in PAGES.values():
            path = root / rel
            text = path.read_text()
            new = fill(text, where=rel)
            if new != text:
                path.write_text(new)
                print(f"wrote {rel}")
        return 0
    stale = stale_pages(root)
    for rel in stale:
        print(f"{rel}: differs from the code; run python -m devtools.docs_reference --write")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
