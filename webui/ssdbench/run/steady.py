"""Steady-state detection by the SNIA PTS rule, on rounds of a per-second series.

A round is ROUND_S seconds of the series, averaged. A window of WINDOW rounds passes when
- the range of the round averages is within 20% of the window's average, and
- the excursion of the least-squares line across the window (slope times the
  window's width) is within 10% of that average.

Windows are judged from the series' first round on (the consistency test, after its sequential
preconditioning). The window judged is the last one, the final WINDOW whole rounds, and it is the window
whose figures a step publishes: a fresh drive's early plateau passes the rule too, so the first passing
window can come before the write cliff. Steady state is reached from the end of the earliest round at which
a passing window ends and every later window passes as well.
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
    window_average: float | None  # of the final window; None with fewer than WINDOW rounds
    rounds: int = 0  # whole rounds in the series
    range_ratio: float | None = None  # the final window's (max - min) / average
    excursion_ratio: float | None = None  # the final window's |slope x (WINDOW - 1)| / average

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


def window_is_steady(window):
    ratios = excursions(window)
    return ratios is not None and ratios[0] <= MAX_RANGE and ratios[1] <= MAX_SLOPE_EXCURSION


def detect(values, round_s=ROUND_S):
    """The rule on `values`, every window from the first round on."""
    avgs = rounds(values, round_s)
    if len(avgs) < WINDOW:
        return SteadyState(False, None, None, None, len(avgs))
    final = avgs[-WINDOW:]
    ratios = excursions(final) or (None, None)
    held = (sum(final) / WINDOW, len(avgs), *ratios)
    if not window_is_steady(final):
        return SteadyState(False, None, None, *held)
    end = len(avgs)
    while end - 1 - WINDOW >= 0 and window_is_steady(avgs[end - 1 - WINDOW : end - 1]):
        end -= 1
    return SteadyState(True, end, end * round_s, *held)
