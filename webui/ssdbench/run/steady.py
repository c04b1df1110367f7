"""Steady-state detection by the SNIA PTS rule, on rounds of a per-second series.

A round is ROUND_S seconds of the series, averaged. A window of WINDOW rounds passes when
- the range of the round averages is within 20% of the window's average, and
- the excursion of the least-squares line across the window (slope times the
  window's width) is within 10% of that average.

The window judged is the last one, the final WINDOW whole rounds: a fresh drive's early
plateau passes the rule too, so the first passing window can come before the write cliff.
Steady state is reached from the end of the earliest round at which a passing window
ends and every later window passes as well. A caller may also hold the judgement off until a given
round (the consistency test: until the drive has been written over once): no window that begins
before it counts, the final one included.
"""

from dataclasses import dataclass

ROUND_S = 60
WINDOW = 5
MAX_RANGE = 0.20
MAX_SLOPE_EXCURSION = 0.10


@dataclass(frozen=True)
class SteadyState:
    reached: bool
    round: int | None  # 1-based round from which every window ending there or later passes
    t_s: int | None  # seconds from the start at the end of that round
    window_average: float | None  # of the final window


def rounds(values, round_s=ROUND_S):
    """Averages of whole rounds of a once-a-second series; a partial last round is left out."""
    return [sum(values[i : i + round_s]) / round_s for i in range(0, len(values) - round_s + 1, round_s)]


def slope(ys):
    n = len(ys)
    mean_x, mean_y = (n - 1) / 2, sum(ys) / n
    return sum((x - mean_x) * (y - mean_y) for x, y in enumerate(ys)) / sum((x - mean_x) ** 2 for x in range(n))


def window_is_steady(window):
    avg = sum(window) / len(window)
    if avg <= 0:
        return False
    return (max(window) - min(window)) <= MAX_RANGE * avg and abs(
        slope(window) * (len(window) - 1)
    ) <= MAX_SLOPE_EXCURSION * avg


def detect(values, round_s=ROUND_S, first_round=0):
    """The rule on `values`, judging only windows that begin at round index `first_round` or later."""
    avgs = rounds(values, round_s)
    if len(avgs) - WINDOW < first_round or not window_is_steady(avgs[-WINDOW:]):
        return SteadyState(False, None, None, None)
    end = len(avgs)
    while end - 1 - WINDOW >= first_round and window_is_steady(avgs[end - 1 - WINDOW : end - 1]):
        end -= 1
    return SteadyState(True, end, end * round_s, sum(avgs[-WINDOW:]) / WINDOW)
