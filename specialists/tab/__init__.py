"""Tab: context copy and a small LM propose, an RL-trained policy picks what, how much and whether.

Configure as ``specialists.tab:TabSpecialist``. Modules: ``replay`` (edit replay and the
simulated user), ``context_copy``, ``lm``, ``features``, ``policy``, ``baselines``,
``harness``, ``train`` (the RL script), ``pretrain`` (the LM recipe), ``data``, ``api``,
``cli``. Nothing heavy is imported here.
"""

from specialists.tab.specialist import TabSpecialist

__all__ = ["TabSpecialist"]
