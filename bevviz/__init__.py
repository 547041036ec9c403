"""bevviz: an interactive geometry debugger for multi-camera BEV perception.

Library layout, bottom to top (docs/architecture.md has the map and the data path; the
layers are import-linter contracts): core geometry (``shapes``, ``rotations``, ``storage``,
``camera``, ``bev_grid``, ``projection``, ``lidar``), loaders (``io``) and the shared
multi-camera ``aggregation``, ``samplers`` and the ``synthetic`` world, the ``pipeline``
and ``features``, analysis (``calibration``, ``convention_ranking``, ``conventions``,
``overlays``, ``export``, ``downloads``, ``bench``) and pure plotly figure builders
(``viz``). Frames, axes and pixel conventions: docs/conventions.md. Public API:
docs/api.md.
"""

__version__ = "0.1.0"
