"""The training engine every chapter drives: counts (``arithmetic``), data, models, schedules, the loop and
what one run is made of (``train_config``, ``session``), the graph-memory meter and the bug registry
(``bugs``, ``bug_demos``). Imports only ``infra``."""
