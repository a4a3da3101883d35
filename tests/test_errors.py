"""The error tree: one root, each subclass also the built-in a Python user would catch."""

import pytest

from sparkcast import errors
from sparkcast.errors import (
    ContextError,
    IncompatibleCheckpointError,
    KeyedStateError,
    OutputTypeError,
    PipelineError,
    ReadOnlyStateError,
    SparkcastError,
    StateError,
    StateSerializationError,
    StateTypeError,
    TimerError,
    UnknownStateError,
    UserFunctionError,
)


@pytest.mark.parametrize(
    ("error", "parents"),
    [
        (PipelineError, (SparkcastError, ValueError)),
        (IncompatibleCheckpointError, (PipelineError, ValueError)),
        (ReadOnlyStateError, (StateError, TypeError)),
        (UnknownStateError, (StateError, KeyError)),
        (KeyedStateError, (StateError, RuntimeError)),
        (StateTypeError, (StateError, TypeError)),
        (StateSerializationError, (StateError, ValueError)),
        (OutputTypeError, (SparkcastError, TypeError)),
        (TimerError, (SparkcastError, RuntimeError)),
        (ContextError, (SparkcastError, RuntimeError)),
        (UserFunctionError, (SparkcastError, RuntimeError)),
        (StateError, (SparkcastError,)),
    ],
)
def test_hierarchy(error, parents):
    assert issubclass(error, parents)


def test_every_error_class_is_in_the_tree_drawn_in_the_docstring():
    classes = [v for v in vars(errors).values()
               if isinstance(v, type) and issubclass(v, SparkcastError)]
    assert len(classes) == 13
    for cls in classes:
        assert cls.__name__ in errors.__doc__


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
