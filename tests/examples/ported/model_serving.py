"""Model serving with model versions, as PyFlink code: an ``MLModel`` with ``predict()`` kept in
broadcast state under ``Types.PICKLED_BYTE_ARRAY()``, the current version under a second key; a
request for a version that is not there goes to the unprocessed events (a ``UserEvent`` object
yielded to a typed side output)."""

from sparkcast import BroadcastProcessFunction, MapStateDescriptor, OutputTag, Types


class UserEvent:
    def __init__(self, request_id, features, version):
        self.request_id = request_id
        self.features = features
        self.version = version


unprocessed_tag = OutputTag("unprocessed", Types.ROW_NAMED(
    ["request_id", "features", "version"],
    [Types.STRING(), Types.LIST(Types.DOUBLE()), Types.INT()]))


class MLModel:
    def __init__(self, version, weights, bias):
        self.version = version
        self.weights = weights
        self.bias = bias

    def predict(self, features):
        return sum(w * x for w, x in zip(self.weights, features, strict=True)) + self.bias


model_state_descriptor = MapStateDescriptor(
    "model_state", Types.STRING(), Types.PICKLED_BYTE_ARRAY())


class ModelServingFunction(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        model = MLModel(value.version, list(value.weights), value.bias)
        state = ctx.get_broadcast_state(model_state_descriptor)
        state.put("model_" + str(model.version), model)
        current = state.get("current")
        if current is None or model.version > current.version:
            state.put("current", model)

    def process_element(self, value, ctx):
        state = ctx.get_broadcast_state(model_state_descriptor)
        model = state.get("current")
        if value.version is not None:
            model = state.get("model_" + str(value.version))
        if model is None:
            yield unprocessed_tag, UserEvent(value.request_id, list(value.features),
                                              value.version)
        else:
            yield value.request_id, model.predict(list(value.features)), model.version
