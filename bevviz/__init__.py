"""bevviz: an interactive geometry debugger for multi-camera BEV perception.

Library layout (see ``../shared/DESIGN.md``): geometry (``camera``, ``conventions``,
``bev_grid``, ``projection``), samplers (``samplers``), the multi-camera ``pipeline``,
``calibration``, ``export``, loaders (``io``) and pure plotly figure builders (``viz``).
"""

__version__ = "0.1.0"
