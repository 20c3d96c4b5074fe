from ctxplan.cli.main import main

main()
