"""The per-element and vectorized bodies of the workloads, shared by every system.

This module imports only numpy/pandas (lazily), never Spark or Flink: sparkcast, PyFlink and the
pandas/foreachBatch baselines call the *same* Python code per element or per batch, so the systems
differ only in what surrounds it.
"""

from __future__ import annotations

import math

# ---------------------------------------------------------------------------------------------
# W1 enrichment: (key, amount) x dimension {key: weight} -> (key, amount * weight)


def enrich(key, amount, dim):
    weight = dim.get(key)
    if weight is None:
        return None
    return key, amount * weight


def enrich_frame(frame, weights):
    """``weights``: a pandas Series indexed by key (inner join semantics, like enrich)."""
    import pandas as pd

    w = frame["key"].map(weights)
    keep = w.notna()
    return pd.DataFrame({"key": frame["key"][keep].astype("int32"),
                         "value": (frame["amount"][keep] * w[keep]).astype("float64")})


# ---------------------------------------------------------------------------------------------
# W2 rules: 100 rules, each a conjunction over 5 fields -> (user, number of rules matched)
# a rule: (rule_id, min_amount, country (-1 any), merchant_lo, merchant_hi, hour_lo, hour_hi,
#          device (-1 any))

RULE_FIELDS = ("rule_id", "min_amount", "country", "merchant_lo", "merchant_hi", "hour_lo",
               "hour_hi", "device")


def match_rules(amount, country, merchant, hour, device, rules):
    matched = 0
    for _rid, min_amount, r_country, m_lo, m_hi, h_lo, h_hi, r_device in rules:
        if (amount > min_amount and (r_country < 0 or country == r_country)
                and m_lo <= merchant <= m_hi and h_lo <= hour <= h_hi
                and (r_device < 0 or device == r_device)):
            matched += 1
    return matched


def match_rules_frame(frame, rules):
    """Vectorized: one numpy pass per rule over the whole batch."""
    import numpy as np
    import pandas as pd

    amount = frame["amount"].to_numpy()
    country = frame["country"].to_numpy()
    merchant = frame["merchant"].to_numpy()
    hour = frame["hour"].to_numpy()
    device = frame["device"].to_numpy()
    matched = np.zeros(len(frame), dtype=np.int32)
    for _rid, min_amount, r_country, m_lo, m_hi, h_lo, h_hi, r_device in rules:
        mask = (amount > min_amount) & (merchant >= m_lo) & (merchant <= m_hi)
        mask &= (hour >= h_lo) & (hour <= h_hi)
        if r_country >= 0:
            mask &= country == r_country
        if r_device >= 0:
            mask &= device == r_device
        matched += mask
    return pd.DataFrame({"user": frame["user"].astype("int32"), "matched": matched})


# ---------------------------------------------------------------------------------------------
# W3 keyed: per-user counter in keyed state, flag when it exceeds a broadcast threshold


def count_and_flag(count, threshold):
    count = (count or 0) + 1
    return count, threshold is not None and count > threshold


# ---------------------------------------------------------------------------------------------
# W4 model: logistic regression over 20 features, the model broadcast

N_FEATURES = 20
FEATURES = tuple(f"f{i}" for i in range(N_FEATURES))


def score(features, weights, bias):
    z = bias
    for x, w in zip(features, weights, strict=False):
        z += x * w
    return 1.0 / (1.0 + math.exp(-z))


def score_frame(frame, weights, bias):
    import numpy as np
    import pandas as pd

    x = frame[list(FEATURES)].to_numpy(dtype=np.float64)
    z = x @ np.asarray(weights, dtype=np.float64) + bias
    return pd.DataFrame({"user": frame["user"].astype("int32"), "score": 1.0 / (1.0 + np.exp(-z))})
