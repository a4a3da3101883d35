"""Feature flags with configuration, as PyFlink code: a ``FeatureFlag`` holding a nested
``FlagConfig`` (plain classes), a ``Rollout`` enum; each request sees the flags enabled for it."""

import zlib
from enum import Enum

from sparkcast import BroadcastProcessFunction, MapStateDescriptor, Types


class Rollout(Enum):
    OFF = 0
    PERCENT = 1
    ALL = 2


class FlagConfig:
    def __init__(self, percent, allowed_regions):
        self.percent = percent
        self.allowed_regions = allowed_regions


class FeatureFlag:
    def __init__(self, name, rollout, config):
        self.name = name
        self.rollout = rollout
        self.config = config

    def is_enabled_for(self, user_id, region):
        if self.rollout == Rollout.OFF:
            return False
        if self.config.allowed_regions and region not in self.config.allowed_regions:
            return False
        if self.rollout == Rollout.ALL:
            return True
        return zlib.crc32(user_id.encode()) % 100 < self.config.percent


flags_descriptor = MapStateDescriptor("feature_flags", Types.STRING(),
                                      Types.PICKLED_BYTE_ARRAY())


class FeatureFlagFunction(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        config = FlagConfig(value.percent, set(value.regions))
        flag = FeatureFlag(value.name, Rollout[value.rollout], config)
        ctx.get_broadcast_state(flags_descriptor).put(flag.name, flag)

    def process_element(self, value, ctx):
        enabled = sorted(name for name, flag in ctx.get_broadcast_state(flags_descriptor).items()
                         if flag.is_enabled_for(value.user_id, value.region))
        yield value.user_id, ",".join(enabled)
