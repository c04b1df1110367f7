"""Steady-state detection by the SNIA PTS rule, on rounds of a per-second series.

A round is ROUND_S seconds of the series, averaged. A window of WINDOW rounds passes when
- the range of the round averages is within 20% of the window's average, and
- the excursion of the least-squares line across the window (slope times the
  window's width) is within 10% of that average, and
- the window is not declining: its line falls by no more than 1% of its average a round, or by no more than
  its rounds' scatter explains (ours: PTS's limits pass a drive that loses 2.5% a round, 10% across the window).

Windows are judged from the series' first round on (the consistency test, after its sequential
preconditioning). The window judged is the last one, the final WINDOW whole rounds, and it is the window
whose figures a step publishes: a fresh drive's early plateau passes the rule too, so the first passing
window can come before the write cliff. Steady state is reached from the end of the earliest round at which
a passing window ends and every later window passes as well.
"""

import math
from dataclasses import dataclass

ROUND_S = 60
WINDOW = 5
MAX_RANGE = 0.20
MAX_SLOPE_EXCURSION = 0.10
# A window declines when its line falls by more than this share of its average each round (1% a minute in 60 s
# rounds, 4% across the window)...
MAX_DECLINE = 0.01
# ... and the fall is beyond the scatter of the rounds about the line: the slope is below -T_DECLINE times its
# standard error. Student's t, one-sided 95%, with WINDOW - 2 = 3 degrees of freedom: a single short round
# at the window's end (one second 20% short in a 2 s round) is not a decline, a steady fall is.
T_DECLINE = 2.353


@dataclass(frozen=True)
class SteadyState:
    reached: bool
    round: int | None  # 1-based round from which every window ending there or later passes
    t_s: int | None  # seconds from the start at the end of that round
    window_average: float | None  # of the final window; None with fewer than WINDOW rounds
    rounds: int = 0  # whole rounds in the series
    range_ratio: float | None = None  # the final window's (max - min) / average
    excursion_ratio: float | None = None  # the final window's |slope x (WINDOW - 1)| / average
    slope_ratio: float | None = None  # the final window's slope a round / its average (below 0: it falls)
    declining: bool = False  # the final window falls beyond MAX_DECLINE and its scatter (declines())

    @property
    def window(self):
        """(first, last) 1-based rounds of the final window, the one judged; None with fewer than WINDOW."""
        return None if self.rounds < WINDOW else (self.rounds - WINDOW + 1, self.rounds)


def rounds(values, round_s=ROUND_S):
    """Averages of whole rounds of a once-a-second series; a partial last round is left out."""
    return [sum(values[i : i + round_s]) / round_s for i in range(0, len(values) - round_s + 1, round_s)]


def slope(ys):
    n = len(ys)
    mean_x, mean_y = (n - 1) / 2, sum(ys) / n
    return sum((x - mean_x) * (y - mean_y) for x, y in enumerate(ys)) / sum((x - mean_x) ** 2 for x in range(n))


def excursions(window):
    """(range, slope excursion) of a window of round averages, each over the window's average; None for a
    window whose average is not above 0."""
    avg = sum(window) / len(window)
    if avg <= 0:
        return None
    return (max(window) - min(window)) / avg, abs(slope(window) * (len(window) - 1)) / avg


def declines(window):
    """Whether a window of round averages (average above 0) falls by more than MAX_DECLINE of its average a round,
    and by more than T_DECLINE standard errors of its slope: a fall its rounds' scatter about the line does not
    explain. A rise is never a decline: a drive still recovering understates its steady state, and PTS's
    excursion bounds it."""
    n, b = len(window), slope(window)
    mean_x, mean_y = (n - 1) / 2, sum(window) / n
    residuals = sum((y - mean_y - b * (x - mean_x)) ** 2 for x, y in enumerate(window))
    error = math.sqrt(residuals / (n - 2) / sum((x - mean_x) ** 2 for x in range(n)))
    return b < -MAX_DECLINE * mean_y and b < -T_DECLINE * error


def window_is_steady(window):
    ratios = excursions(window)
    if ratios is None or ratios[0] > MAX_RANGE or ratios[1] > MAX_SLOPE_EXCURSION:
        return False
    return not declines(window)


def detect(values, round_s=ROUND_S):
    """The rule on `values`, every window from the first round on."""
    avgs = rounds(values, round_s)
    if len(avgs) < WINDOW:
        return SteadyState(False, None, None, None, len(avgs))
    final = avgs[-WINDOW:]
    ratios = excursions(final)
    average = sum(final) / WINDOW
    fall = (slope(final) / average, declines(final)) if ratios else (None, False)
    held = (average, len(avgs), *(ratios or (None, None)), *fall)
    if not window_is_steady(final):
        return SteadyState(False, None, None, *held)
    end = len(avgs)
    while end - 1 - WINDOW >= 0 and window_is_steady(avgs[end - 1 - WINDOW : end - 1]):
        end -= 1
    return SteadyState(True, end, end * round_s, *held)
