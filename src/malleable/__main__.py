from malleable.cli import main

raise SystemExit(main())
