"""The math family's registered ids (read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS = [{'id': 'llm/Math-v0',
  'source': 'envs_catalog.math.arithmetic:MathSource',
  'kwargs': {'digits': 2, 'operators': '+', 'num_operands': 2, 'allow_negative': False}},
 {'id': 'llm/MathMulti-v0',
  'source': 'envs_catalog.math.arithmetic:MathMultiSource',
  'kwargs': {'digits': 2, 'operators': '+-*', 'num_operands': 4, 'allow_negative': True}}]

# The math family's single-turn envs beyond arithmetic (envs_catalog/math/*.py).
SPECS += [
    {"id": "llm/Fractions-v0", "source": "envs_catalog.math.fractions_env:FractionsSource",
     "kwargs": {"max_denominator": 9, "num_operands": 2, "operators": "+-", "decimals": False}},
    {"id": "llm/LinearEquation-v0", "source": "envs_catalog.math.linear:LinearEquationSource",
     "kwargs": {"unknowns": 1, "max_coef": 9, "solution": "integer", "both_sides": False}},
    {"id": "llm/WordProblem-v0", "source": "envs_catalog.math.word_problems:WordProblemSource",
     "kwargs": {"steps": 1, "max_value": 20}},
    {"id": "llm/NumberTheory-v0", "source": "envs_catalog.math.number_theory:NumberTheorySource",
     "kwargs": {"kinds": ["gcd", "lcm", "mod", "powmod", "next_prime", "divisors"],
                "max_value": 100}},
    {"id": "llm/UnitConversion-v0", "source": "envs_catalog.math.units:UnitConversionSource",
     "kwargs": {"systems": "metric", "max_value": 100, "tolerance": 0.001}},
    {"id": "llm/Algebra-v0", "source": "envs_catalog.math.algebra:AlgebraSource",
     "kwargs": {"kinds": ["expand", "factor", "roots"], "max_coef": 9, "leading": "monic",
                "irrational": False},
     "requires": "math_verify"},
]
