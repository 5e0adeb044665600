"""The chapters' demonstrations, one module per chapter or concept (``chNN_...``), plus helpers two chapters
share (``over_seeds``, ``gpu_figures``) and the measured records they read (``results/``). They use the
engine, infra and the tools; the views (``widgets``) use them."""
