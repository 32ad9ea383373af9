from headwater.cli.main import main

raise SystemExit(main())
