"""The error tree: one root, each subclass also the built-in a Python user would catch, and no
``raise`` in the package that names anything else."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import sparkcast
from sparkcast import errors
from sparkcast.errors import (
    AppError,
    ArgumentTypeError,
    BrokerError,
    ConfigError,
    ContextError,
    DatabaseError,
    HarnessError,
    IncompatibleCheckpointError,
    JavaNotFoundError,
    KeyedStateError,
    MissingAttributeError,
    MissingDependencyError,
    MissingKeyError,
    ModelError,
    OutputTypeError,
    PipelineError,
    QueryFailedError,
    ReadOnlyStateError,
    RuleError,
    SparkcastError,
    StateError,
    StateSerializationError,
    StateTypeError,
    TimerError,
    UndefinedMethodError,
    UnknownStateError,
    UnknownTypeError,
    UnsupportedSparkError,
    UserFunctionError,
)

SRC = Path(sparkcast.__file__).parent
# The only built-in a ``raise`` may name: the command line ends the process with a message, as
# argparse does; SystemExit is not an error for a caller to catch (and must not be an Exception).
ALLOWED = (SystemExit,)


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(p for p in SRC.rglob("*.py") if p.name != "__main__.py")  # runs a command


def _resolve(node: ast.expr, namespace: dict[str, Any], owner: type | None) -> Any:
    """What a raised name or dotted name refers to at module level (``self.x`` through the
    enclosing class), or None for a local value (``raise exc``, a caught exception)."""
    if isinstance(node, ast.Name):
        if node.id in namespace:
            return namespace[node.id]
        if node.id in ("self", "cls"):
            return owner
        return getattr(builtins, node.id, None)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, namespace, owner)
        return None if base is None else getattr(base, node.attr, None)
    return None


def _raises_ours(target: Any) -> bool:
    """A sparkcast error class, or a function annotated to return one (an error factory)."""
    if isinstance(target, type):
        return issubclass(target, SparkcastError) or issubclass(target, ALLOWED)
    returned = typing.get_type_hints(target).get("return") if callable(target) else None
    return isinstance(returned, type) and issubclass(returned, SparkcastError)


def violations(source: str, namespace: dict[str, Any], where: str) -> list[str]:
    """Every ``raise`` that names a built-in exception, or any class (or factory) that is not a
    ``SparkcastError``."""
    found: list[tuple[int, str]] = []
    classes: dict[int, type | None] = {}
    tree = ast.parse(source)
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for inner in ast.walk(cls):
            classes[id(inner)] = namespace.get(cls.name)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        named = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        target = _resolve(named, namespace, classes.get(id(node)))
        if target is not None and not _raises_ours(target):
            found.append((node.lineno, f"{where}:{node.lineno} raises {ast.unparse(named)}"))
    return [text for _, text in sorted(found)]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_every_raise_names_a_sparkcast_error(path: Path) -> None:
    module: ModuleType = importlib.import_module(_module_name(path))
    assert violations(path.read_text(), vars(module), str(path.relative_to(SRC))) == []


def test_the_raise_checker_sees_builtins_foreign_classes_and_untyped_factories():
    source = (
        "import json\n"
        "from sparkcast.errors import PipelineError\n"
        "def bad_factory(): return ValueError('x')\n"
        "def good_factory() -> PipelineError: return PipelineError('x')\n"
        "class Table:\n"
        "    def _unknown(self) -> PipelineError: ...\n"
        "    def get(self, key):\n"
        "        if key: raise KeyError(key)\n"
        "        raise self._unknown()\n"
        "def f(exc):\n"
        "    raise ValueError('bad')\n"
        "    raise json.JSONDecodeError('m', 'd', 0)\n"
        "    raise bad_factory()\n"
        "    raise good_factory()\n"
        "    raise PipelineError('fine')\n"
        "    raise exc\n"
        "    raise SystemExit('usage')\n"
    )
    namespace: dict[str, Any] = {}
    exec(compile(source, "m.py", "exec"), namespace)  # noqa: S102 - the checker's own fixture
    assert violations(source, namespace, "m.py") == [
        "m.py:8 raises KeyError", "m.py:11 raises ValueError",
        "m.py:12 raises json.JSONDecodeError", "m.py:13 raises bad_factory"]


@pytest.mark.parametrize(
    ("error", "parents"),
    [
        (PipelineError, (SparkcastError, ValueError)),
        (IncompatibleCheckpointError, (PipelineError, ValueError)),
        (ArgumentTypeError, (SparkcastError, TypeError)),
        (MissingKeyError, (SparkcastError, KeyError)),
        (MissingAttributeError, (SparkcastError, AttributeError)),
        (UndefinedMethodError, (SparkcastError, NotImplementedError)),
        (MissingDependencyError, (SparkcastError, ModuleNotFoundError)),
        (JavaNotFoundError, (SparkcastError, RuntimeError)),
        (UnsupportedSparkError, (SparkcastError, RuntimeError)),
        (DatabaseError, (SparkcastError, RuntimeError)),
        (BrokerError, (SparkcastError, RuntimeError)),
        (ReadOnlyStateError, (StateError, TypeError)),
        (UnknownStateError, (StateError, KeyError)),
        (KeyedStateError, (StateError, RuntimeError)),
        (StateTypeError, (StateError, TypeError)),
        (StateSerializationError, (StateError, ValueError)),
        (UnknownTypeError, (StateSerializationError, ValueError)),
        (OutputTypeError, (SparkcastError, TypeError)),
        (TimerError, (SparkcastError, RuntimeError)),
        (ContextError, (SparkcastError, RuntimeError)),
        (HarnessError, (SparkcastError, RuntimeError)),
        (QueryFailedError, (SparkcastError, RuntimeError)),
        (UserFunctionError, (SparkcastError, RuntimeError)),
        (StateError, (SparkcastError,)),
        (AppError, (SparkcastError, ValueError)),
        (ModelError, (SparkcastError, ValueError)),
        (RuleError, (SparkcastError, ValueError)),
        (ConfigError, (SparkcastError, ValueError)),
    ],
)
def test_hierarchy(error, parents):
    assert issubclass(error, parents)


def _subclasses(cls: type) -> set[type]:
    return {sub for direct in cls.__subclasses__() for sub in {direct, *_subclasses(direct)}}


def _defined_errors() -> set[type]:
    """Every ``SparkcastError`` class the package defines, wherever it is defined."""
    for path in MODULES:
        importlib.import_module(_module_name(path))
    return {SparkcastError, *(cls for cls in _subclasses(SparkcastError)
                              if cls.__module__.startswith("sparkcast."))}


def test_every_error_class_is_importable_from_sparkcast_errors():
    """The docs say so: one place to import any error from, the applications' included."""
    defined = _defined_errors()
    assert len(defined) >= 25
    for cls in defined:
        assert cls.__module__ == "sparkcast.errors", f"{cls} is defined outside sparkcast.errors"
        assert getattr(errors, cls.__name__) is cls


def test_every_error_class_is_in_the_tree_drawn_in_the_docstring():
    ours = [v for v in vars(errors).values()
            if isinstance(v, type) and issubclass(v, SparkcastError)]
    assert len(ours) == 32
    defined = _defined_errors()
    assert set(ours) == defined
    for cls in defined:
        assert cls.__name__ in errors.__doc__, cls
        if cls not in (SparkcastError, StateError):
            builtin_bases = [b for b in inspect.getmro(cls) if b.__module__ == "builtins"]
            assert builtin_bases[0] is not Exception, f"{cls} has no specific built-in base"


def test_unknown_state_error_message_is_not_quoted():
    assert str(UnknownStateError("no such state")) == "no such state"
    assert str(UnknownStateError()) == ""


def test_user_function_error_names_function_callback_and_key():
    cause = ValueError("bad input")
    error = UserFunctionError("MatchRules", "process_element", "red", cause)
    assert str(error) == "MatchRules.process_element for key 'red' raised ValueError: bad input"
    assert (error.function, error.callback, error.key) == ("MatchRules", "process_element", "red")
    no_key = UserFunctionError("F", "open", None, cause)
    assert str(no_key) == "F.open raised ValueError: bad input"


def test_a_warning_names_the_users_line_on_one_line():
    """``warn`` skips sparkcast's own frames, however deep the call inside sparkcast."""
    with pytest.warns(UserWarning) as caught:
        errors.warn("first\nsecond")
    (found,) = caught
    assert found.filename == __file__ and str(found.message) == "first second"
