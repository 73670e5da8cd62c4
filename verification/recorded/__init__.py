"""Recorded agent runs checked against the controller and the guard without running any
tool (``replan check-trace``): a reader per record format (``tau``: τ-bench
trajectories) and the replay (``replay``), which takes each recorded call through the
guard's path with the host's adapter."""
