from replan.cli import main

raise SystemExit(main())
