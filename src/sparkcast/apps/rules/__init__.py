"""The fraud rules' language: conditions that arrive as text on a stream, run as pandas.

Rules are data, never code. :mod:`~sparkcast.apps.rules.parser` turns the text into a typed tree
(a hand-written lexer and recursive-descent parser; the grammar is in its docstring), with errors
that name the column; :mod:`~sparkcast.apps.rules.compiler` checks the tree against the known
fields and compiles it into a closure over pandas Series. Nothing calls ``eval``, ``exec`` or
``compile``.

>>> FIELDS = {"amount": "num", "ip_country": "str", "card_country": "str"}
>>> rule = compile_rule("amount > 5000 AND ip_country != card_country", FIELDS)
>>> sorted(rule.fields)
['amount', 'card_country', 'ip_country']
"""

from sparkcast.apps.rules.compiler import CompiledRule, Kind, compile_rule
from sparkcast.apps.rules.parser import RuleError, parse

__all__ = ["CompiledRule", "Kind", "RuleError", "compile_rule", "parse"]
