"""``memlab tune``: an Optuna search over the memory layer's settings that reports
honestly whether it beat the default.

- ``split``: the tuning / held-apart split of the transcripts;
- ``space``: the search space (Hydra's sweep grammar) and the values a trial runs
  with (what a preset writes);
- ``study``: the Optuna study (SQLite storage, TPE, median pruning, workers) and
  one trial;
- ``gain``: the paired bootstrap gain over the default and the preset decision;
- ``report``: tune_report.md/.csv, trials.csv, the charts;
- ``tuner``: the command from plan to report (``run``).
"""

from memlab.lab.tune.gain import Decision, Gain, decide, gain_table, paired_gain
from memlab.lab.tune.space import SearchSpace, preset_yaml, search_space, trial_values
from memlab.lab.tune.split import split, split_ids
from memlab.lab.tune.study import metric_row, objective
from memlab.lab.tune.tuner import Outcome, plan, run

__all__ = [
    "Decision",
    "Gain",
    "Outcome",
    "SearchSpace",
    "decide",
    "gain_table",
    "metric_row",
    "objective",
    "paired_gain",
    "plan",
    "preset_yaml",
    "run",
    "search_space",
    "split",
    "split_ids",
    "trial_values",
]
