"""Objects keep their class without pickle (issue 25): the codec stores a class's qualified name,
and decoding resolves it only against the classes the job knows."""

from __future__ import annotations

import collections
import copy

import pytest

import sparkcast
from sparkcast import BroadcastProcessFunction, MapStateDescriptor, Types
from sparkcast.api.options import ProcessOptions
from sparkcast.core import codec
from sparkcast.core.frozen import freeze
from sparkcast.core.type_registry import TypeRegistry, job_types
from sparkcast.errors import ReadOnlyStateError, UnknownTypeError
from sparkcast.testing import BroadcastHarness

ANY = MapStateDescriptor("any", Types.STRING(), Types.PICKLED_BYTE_ARRAY())


class Model:
    def __init__(self, weight):
        self.weight = weight
        self.calls = 0

    def predict(self, x):
        return self.weight * x

    def __reduce__(self):  # never run by sparkcast: decoding sets the stored attributes
        raise AssertionError("__reduce__ ran")


class Slotted:
    __slots__ = ("a", "__hidden")

    def __init__(self, a):
        self.a = a
        self.__hidden = a * 2

    def hidden(self):
        return self.__hidden


class Store(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(ANY).put(value[0], value[1])

    def process_element(self, value, ctx):
        yield ctx.get_broadcast_state(ANY).get(value).predict(2)


def test_objects_round_trip_as_their_class_with_slots_and_private_names():
    registry = job_types(Store(), [ANY])
    value = codec.decode(codec.encode([Model(3), Slotted(4)]), registry)
    assert isinstance(value[0], Model) and value[0].predict(2) == 6
    assert isinstance(value[1], Slotted) and value[1].hidden() == 8


def test_a_name_the_job_does_not_know_is_an_error_even_if_importable():
    with pytest.raises(codec.StateSerializationError, match="cannot store a type"):
        codec.encode(collections.OrderedDict)  # a class is code, not data
    stored = b'{"$c":"OrderedDict","v":{}}'  # a stdlib class, importable, not known to the job
    with pytest.raises(UnknownTypeError, match="OrderedDict, a class this job does not know"):
        codec.decode(stored, TypeRegistry())
    assert codec.decode(stored) == {}  # the tools' generic read: a Record, not an import


def test_registered_classes_travel_in_the_options():
    class Local:
        def __init__(self):
            self.x = 1

    with pytest.raises(UnknownTypeError):
        codec.decode(codec.encode(Local()), job_types(Store(), [ANY]))
    sparkcast.register_types(Local)
    options = ProcessOptions()  # built on the driver: pickled to the workers with the plan
    assert Local in options.types
    assert codec.decode(codec.encode(Local()), job_types(Store(), [ANY], options.types)).x == 1


def test_a_frozen_object_keeps_its_methods_and_refuses_mutating_ones():
    view = freeze(Model(3))
    assert isinstance(view, Model) and view.predict(2) == 6
    with pytest.raises(ReadOnlyStateError, match="main side must not modify broadcast state"):
        view.calls += 1
    mutable = copy.deepcopy(view)
    mutable.calls += 1
    assert type(mutable) is Model and mutable.calls == 1


def test_objects_as_broadcast_elements_on_the_harness():
    h = BroadcastHarness(Store(), [ANY], output_schema="y long")
    h.open()
    h.process_broadcast_element(("m", Model(5)))
    h.process_element("m")
    assert h.output() == [10]


def test_a_local_class_reads_by_its_bare_name_where_cloudpickle_renamed_it():
    """The driver writes a class made inside a function under its qualified name; Spark's
    workers get the class from cloudpickle, whose copy is named by its bare name alone."""

    def make() -> type:
        class Limit:
            def __init__(self, value: int) -> None:
                self.value = value

        return Limit

    limit = make()
    data = codec.encode(limit(3))
    assert "make.<locals>.Limit" in data.decode()
    shipped = type("Limit", (), {"__init__": limit.__init__})  # what a worker holds
    shipped.__module__ = limit.__module__
    value = codec.decode(data, TypeRegistry([shipped]))
    assert type(value) is shipped and value.value == 3
