"""One module per ``replan`` subcommand: ``add_arguments(parser)``, ``run(args)``."""
