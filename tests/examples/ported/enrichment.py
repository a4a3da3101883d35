"""Enrichment and segmentation, as PyFlink code: ``Product`` objects (a dimension table) and
``UserSegment`` objects (with a ``Tier`` enum) in two broadcast states; each click is enriched
with its product and the user's segment."""

from enum import Enum

from sparkcast import BroadcastProcessFunction, MapStateDescriptor, Types


class Tier(Enum):
    BASIC = 1
    GOLD = 2


class Product:
    def __init__(self, product_id, name, price):
        self.product_id = product_id
        self.name = name
        self.price = price

    def discounted(self, tier):
        return round(self.price * (0.9 if tier == Tier.GOLD else 1.0), 2)


class UserSegment:
    def __init__(self, user_id, segment, tier):
        self.user_id = user_id
        self.segment = segment
        self.tier = tier


products_descriptor = MapStateDescriptor("products", Types.STRING(), Types.PICKLED_BYTE_ARRAY())
segments_descriptor = MapStateDescriptor("segments", Types.STRING(), Types.PICKLED_BYTE_ARRAY())


class EnrichFunction(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        if value.kind == "product":
            product = Product(value.id, value.name, value.price)
            ctx.get_broadcast_state(products_descriptor).put(product.product_id, product)
        else:
            segment = UserSegment(value.id, value.name, Tier[value.tier])
            ctx.get_broadcast_state(segments_descriptor).put(segment.user_id, segment)

    def process_element(self, value, ctx):
        product = ctx.get_broadcast_state(products_descriptor).get(value.product_id)
        segment = ctx.get_broadcast_state(segments_descriptor).get(value.user_id)
        tier = segment.tier if segment is not None else Tier.BASIC
        yield (value.user_id, product.name if product else None,
               segment.segment if segment else "unknown",
               product.discounted(tier) if product else None)
