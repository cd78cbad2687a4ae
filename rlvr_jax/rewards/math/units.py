"""Units of a normalised answer: the trailing unit word(s), their dimension and scale.

A unit is a product of known base units with integer powers: ``cm^2``, ``sq ft``,
``cubic meters``, ``km/h``, ``m/s^2``, ``L`` (= ``dm^3``). Two units compare when their
dimensions agree; the value is then scaled by the exact ratio of their factors. Angles are
apart: a degree is ``\\pi/180`` of a radian, an irrational factor, so :func:`angle_scale`
returns it as an expression string.
"""
from __future__ import annotations

import re
from fractions import Fraction

# name -> (base dimension, factor to the base unit, power of that dimension)
_BASE: dict[str, tuple[str, Fraction, int]] = {}
for _dim, _table in {
    "time": {"s": 1, "sec": 1, "second": 1, "min": 60, "minute": 60, "h": 3600, "hr": 3600,
             "hour": 3600, "day": 86400, "week": 604800},
    "length": {"mm": Fraction(1, 1000), "millimeter": Fraction(1, 1000), "cm": Fraction(1, 100),
               "centimeter": Fraction(1, 100), "dm": Fraction(1, 10), "m": 1, "meter": 1,
               "metre": 1, "km": 1000, "kilometer": 1000, "in": Fraction(254, 10000),
               "inch": Fraction(254, 10000), "inche": Fraction(254, 10000),
               "ft": Fraction(3048, 10000), "foot": Fraction(3048, 10000),
               "feet": Fraction(3048, 10000), "yd": Fraction(9144, 10000),
               "yard": Fraction(9144, 10000), "mile": Fraction(1609344, 1000),
               "mi": Fraction(1609344, 1000)},
    "mass": {"mg": Fraction(1, 1000), "milligram": Fraction(1, 1000), "g": 1, "gram": 1,
             "kg": 1000, "kilogram": 1000},
    "money": {"cent": Fraction(1, 100), "dollar": 1},
}.items():
    for _name, _factor in _table.items():
        _BASE[_name] = (_dim, Fraction(_factor), 1)
for _name, _factor in {"ml": Fraction(1, 10 ** 6), "milliliter": Fraction(1, 10 ** 6),
                       "l": Fraction(1, 1000), "liter": Fraction(1, 1000),
                       "litre": Fraction(1, 1000)}.items():
    _BASE[_name] = ("length", _factor, 3)  # a litre is a cubic decimetre
_ANGLES = {"degree": "(pi/180)", "deg": "(pi/180)", "rad": "1", "radian": "1"}

_UNIT_WORD = r"[a-zA-Z]+(?:\^?\d)?"
_UNIT_TAIL = re.compile(r"^(.*?[\d)}%])\s*(" + _UNIT_WORD + r"(?:(?:\s*/\s*|\s+)" + _UNIT_WORD
                        + r")*)$")
_NOT_UNITS = {"pi", "e", "i", "j", "sqrt", "ln", "log", "sin", "co", "cos", "tan", "exp", "inf",
              "or", "and"}
_POWER_WORDS = {"sq": 2, "square": 2, "squared": 2, "cubic": 3, "cubed": 3, "cu": 3}


def canonical_unit(unit: str) -> str:
    """Lower case, one space between words, plural ``s`` dropped (``Square Feet`` →
    ``square feet``, ``Minutes`` → ``minute``, ``km / h`` → ``km/h``)."""
    words = re.findall(r"/|[^\s/]+", unit.lower())
    words = [w[:-1] if len(w) > 2 and w.endswith("s") and w.isalpha() else w for w in words]
    return " ".join(words).replace(" / ", "/")


def _word(word: str) -> tuple[str, int]:
    m = re.fullmatch(r"([a-zA-Z]+)\^?(\d)?", word)
    return canonical_unit(m.group(1)), int(m.group(2) or 1)


def unit_dims(unit: str) -> tuple[frozenset, Fraction] | None:
    """``(dimension, factor to the base units)`` of a unit such as ``cm^2``, ``sq ft``,
    ``km/h`` or ``L``; ``None`` for an unknown word (or an angle: :func:`angle_scale`)."""
    dims: dict[str, int] = {}
    factor, sign, power = Fraction(1), 1, 1
    for tok in re.findall(r"/|[a-zA-Z]+(?:\^?\d)?", unit):
        if tok == "/":
            sign = -1
            continue
        name, p = _word(tok)
        if name in _POWER_WORDS and p == 1:
            power = _POWER_WORDS[name]
            continue
        if name not in _BASE:
            return None
        dim, f, d = _BASE[name]
        p *= power * sign
        dims[dim] = dims.get(dim, 0) + d * p
        factor *= f ** p
        power = 1
    if power != 1 or not dims:
        return None
    return frozenset((k, v) for k, v in dims.items() if v), factor


def angle_scale(unit: str) -> str | None:
    """The radians in one ``unit`` as an expression (``degree`` → ``(pi/180)``), else ``None``."""
    return _ANGLES.get(canonical_unit(unit))


def known_unit(unit: str) -> bool:
    """Whether ``unit`` is a unit we can convert (length, area, volume, time, speed, mass,
    money, angle)."""
    return unit_dims(unit) is not None or angle_scale(unit) is not None


def split_unit(s: str) -> tuple[str, str]:
    """``"5 cm"`` → ``("5", "cm")``; no unit → ``(s, "")``. Only trailing words count."""
    m = _UNIT_TAIL.match(s)
    if not m or re.search(r"\b(?:or|and)\b", m.group(2)):
        return s, ""
    unit = canonical_unit(m.group(2))
    known = known_unit(m.group(2))
    if unit in _NOT_UNITS or (len(unit) == 1 and not known):
        return s, ""  # "5 x", "2 pi": a variable or a constant, not a unit
    spaced = s[len(m.group(1)):len(m.group(1)) + 1].isspace()
    if spaced or (known and len(unit) >= 2):
        return m.group(1).strip(), unit
    return s, ""
