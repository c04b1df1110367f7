"""Running a suite: the plan, quieting the OS, fio and its output, the figures derived from it, the runner
that walks the steps, and the run queue the web feeds."""
