"""Multi-model serving, as PyFlink code: a model per kind (a plain class per algorithm, an enum
naming the kind), each request scored by the model of its kind."""

from enum import Enum

from sparkcast import BroadcastProcessFunction, MapStateDescriptor, Types


class ModelType(Enum):
    LINEAR = "linear"
    THRESHOLD = "threshold"


class LinearModel:
    def __init__(self, name, coefficients):
        self.name = name
        self.coefficients = coefficients

    def predict(self, features):
        return sum(c * f for c, f in zip(self.coefficients, features, strict=True))


class ThresholdModel:
    __slots__ = ("name", "threshold")

    def __init__(self, name, threshold):
        self.name = name
        self.threshold = threshold

    def predict(self, features):
        return 1.0 if max(features) > self.threshold else 0.0


models_descriptor = MapStateDescriptor("models", Types.PICKLED_BYTE_ARRAY(),
                                       Types.PICKLED_BYTE_ARRAY())


class MultiModelFunction(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        kind = ModelType(value.kind)
        if kind == ModelType.LINEAR:
            model = LinearModel(value.name, list(value.params))
        else:
            model = ThresholdModel(value.name, value.params[0])
        ctx.get_broadcast_state(models_descriptor).put(kind, model)

    def process_element(self, value, ctx):
        model = ctx.get_broadcast_state(models_descriptor).get(ModelType(value.kind))
        if model is not None:
            yield value.request_id, model.name, model.predict(list(value.features))
