"""The Calibration Doctor's laboratory: how its verdicts were measured and tuned.

Not part of the library (no module of :mod:`bevviz` imports it): each module is a
command that runs the doctor over real frame folders and prints what it finds.

* :mod:`bevviz.lab.evaluate`: faults injected into real frames, named or not
  (``python -m bevviz.lab.evaluate --frames DIR ...``; ``python -m
  bevviz.calibration.evaluate`` runs it too);
* :mod:`bevviz.lab.stress`: the same frames bent (a sparser cloud, a shifted LiDAR, a
  distorted lens, ...: :mod:`bevviz.lab.variants`): what the doctor must then refuse to name;
* :mod:`bevviz.lab.rule_search`: the leave-one-rig-out choice of the verdict's constants.
* :mod:`bevviz.lab.bands`: fault bands (``--band 2-5``) and the windows of frames judged
  together (``--frame-counts 1 3``); :mod:`bevviz.lab.tables`: the tables per frame and per
  band and frame count.

docs/calibration.md lists which constant was chosen on what, and which of these commands
tests it again.
"""
